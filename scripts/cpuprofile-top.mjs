// The functions with the most self time in a V8 .cpuprofile (node --cpu-prof), as shares of all samples:
//   node scripts/cpuprofile-top.mjs FILE.cpuprofile [N=30]
import { readFileSync } from 'node:fs';

const profile = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const top = Number(process.argv[3] ?? 30);
const ticks = new Map();
profile.samples.forEach((id, i) => ticks.set(id, (ticks.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const self = new Map();
let total = 0;
for (const node of profile.nodes) {
  const t = ticks.get(node.id) ?? 0;
  total += t;
  const f = node.callFrame;
  const key = `${f.functionName || '(anonymous)'} ${f.url.split('/').pop()}:${f.lineNumber + 1}`;
  self.set(key, (self.get(key) ?? 0) + t);
}
for (const [key, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`${((100 * t) / total).toFixed(1).padStart(5)}%  ${key}`);
console.log(`total ${(total / 1000).toFixed(0)} ms`);
