// `npm run chaos -- --containers N --seed S [--json]`: the chaos run from the command line. Prints the
// checks and figures; exits non-zero when a check fails.
import { runChaos, type ChaosResult } from './run.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v <= 0) {
    process.stderr.write(`--${name}: expected a whole number > 0, got ${process.argv[i + 1] ?? 'nothing'}\n`);
    process.exit(2);
  }
  return v;
}

function print(r: ChaosResult): void {
  const out: string[] = [`chaos: ${r.options.containers} containers, seed ${r.options.seed}`, '', 'checks:'];
  for (const c of r.checks) out.push(`  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name}`, `       ${c.detail}`);
  out.push('', 'failures injected:');
  for (const [k, v] of Object.entries(r.injected)) out.push(`  ${k}: ${v}`);
  out.push('', 'control-plane faults:');
  for (const f of r.faults) out.push(`  ${f}`);
  out.push('', 'figures:');
  for (const [k, v] of Object.entries(r.figures)) out.push(`  ${k}: ${v}`);
  out.push('', r.ok ? 'all checks passed' : 'SOME CHECKS FAILED');
  process.stdout.write(`${out.join('\n')}\n`);
}

// Ctrl-C ends the run cleanly: its PostgreSQL server is stopped and its files removed.
const abort = new AbortController();
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => abort.abort());
const result = await runChaos({
  signal: abort.signal,
  containers: arg('containers', 500),
  seed: arg('seed', 1),
  wallLimitMs: arg('wall-limit-s', 20 * 60) * 1000,
  log: (line) => process.stderr.write(`${line}\n`),
});
if (process.argv.includes('--json')) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
else print(result);
process.exit(result.ok ? 0 : 1);
