#!/usr/bin/env node
// A seeded synthetic workload for `berth sim` (docs/SIMULATOR.md, JSON format), plain Node, no
// dependencies. N containers arrive over a simulated week with a diurnal and weekly rhythm; run times
// are lognormal (minutes to hours); sizes are 1–16 vcpus with 2, 4 or 8 GiB per vcpu (the compute,
// general and memory families of the default catalog); a few priorities; some jobs may run on spot.
// The same arguments give the same file, byte for byte.
//
//   node scripts/gen-workload.mjs --jobs 1000000 --seed 1 --out /tmp/w1m.json.gz
//
// Options (defaults in brackets):
//   --jobs N            containers [10000]
//   --seed S            seed of every random draw [1]
//   --days D            arrival window in days [7]
//   --median M          median run time in minutes [30]
//   --sigma X           lognormal sigma of the run time [1.2]
//   --min-run M         shortest run time in minutes [1]
//   --max-run M         longest run time in minutes [720]
//   --diurnal A         daily swing of the arrival rate: rate × (1 + A·cos(…)), peak at 14:00 [0.6]
//   --weekend W         arrival rate on days 6 and 7 relative to weekdays [0.5]
//   --preemptible P     share of jobs that may run on spot instances [0.25]
//   --out FILE          output (.json or .json.gz; gzip by name) [stdout, plain JSON]
import { createWriteStream } from 'node:fs';
import { createGzip } from 'node:zlib';

function args(argv) {
  const o = {
    jobs: 10000,
    seed: 1,
    days: 7,
    median: 30,
    sigma: 1.2,
    minRun: 1,
    maxRun: 720,
    diurnal: 0.6,
    weekend: 0.5,
    preemptible: 0.25,
    out: null,
  };
  const names = {
    '--jobs': 'jobs',
    '--seed': 'seed',
    '--days': 'days',
    '--median': 'median',
    '--sigma': 'sigma',
    '--min-run': 'minRun',
    '--max-run': 'maxRun',
    '--diurnal': 'diurnal',
    '--weekend': 'weekend',
    '--preemptible': 'preemptible',
    '--out': 'out',
  };
  for (let i = 2; i < argv.length; i += 2) {
    const k = names[argv[i]];
    if (k === undefined || argv[i + 1] === undefined) {
      process.stderr.write(`gen-workload: unknown option or missing value: ${argv[i]}\n`);
      process.exit(2);
    }
    o[k] = k === 'out' ? argv[i + 1] : Number(argv[i + 1]);
    if (k !== 'out' && !Number.isFinite(o[k])) {
      process.stderr.write(`gen-workload: ${argv[i]}: expected a number, got ${argv[i + 1]}\n`);
      process.exit(2);
    }
  }
  return o;
}

/** mulberry32: a small, fast, seedable 32-bit generator; uniform in [0, 1). */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Picks a value from [[value, weight], ...]. */
function pick(r, table) {
  let u = r() * table.reduce((s, [, w]) => s + w, 0);
  for (const [v, w] of table) if ((u -= w) < 0) return v;
  return table[table.length - 1][0];
}

const VCPUS = [
  [1, 0.3],
  [2, 0.25],
  [4, 0.2],
  [8, 0.15],
  [16, 0.1],
];
const GIB_PER_VCPU = [
  [2, 0.3],
  [4, 0.5],
  [8, 0.2],
];
const PRIORITY = [
  [500, 0.7],
  [900, 0.1],
  [100, 0.2],
];

const o = args(process.argv);
const DAY = 86400;
const span = o.days * DAY;
const r = rng(o.seed);

/** Relative arrival rate at t seconds after the start (peak 1 + diurnal at 14:00 on weekdays). */
const rate = (t) => {
  const day = Math.floor(t / DAY);
  const hour = (t % DAY) / 3600;
  const week = day % 7 >= 5 ? o.weekend : 1;
  return week * (1 + o.diurnal * Math.cos((2 * Math.PI * (hour - 14)) / 24));
};
const peak = 1 + o.diurnal;

// Arrival times by rejection sampling against the rate, in whole seconds (the resolution of SWF
// traces), sorted. The other fields are drawn afterwards, in arrival order.
const arrivals = new Float64Array(o.jobs);
for (let i = 0; i < o.jobs;) {
  const t = r() * span;
  if (r() * peak < rate(t)) arrivals[i++] = Math.floor(t);
}
arrivals.sort();

const normal = () => {
  const u = 1 - r();
  const v = r();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
};

const out = o.out === null ? process.stdout : createWriteStream(o.out);
const sink = o.out !== null && o.out.endsWith('.gz') ? createGzip({ level: 6 }) : null;
if (sink !== null) sink.pipe(out);
const w = sink ?? out;
const write = (s) => (w.write(s) ? Promise.resolve() : new Promise((ok) => w.once('drain', ok)));

let buf = '{"jobs": [\n';
for (let i = 0; i < o.jobs; i++) {
  const run = Math.exp(Math.log(o.median * 60) + o.sigma * normal());
  const duration = Math.round(Math.min(o.maxRun * 60, Math.max(o.minRun * 60, run)));
  const vcpus = pick(r, VCPUS);
  const ram = vcpus * pick(r, GIB_PER_VCPU);
  const priority = pick(r, PRIORITY);
  const preemptible = r() < o.preemptible;
  let job = `{"id":"j${i + 1}","arrival":${arrivals[i]},"vcpus":${vcpus},"ram":"${ram}GiB","duration":${duration}`;
  if (priority !== 500) job += `,"priority":${priority}`;
  if (preemptible) job += ',"preemptible":true';
  buf += job + (i + 1 < o.jobs ? '},\n' : '}\n');
  if (buf.length > 1 << 20) {
    await write(buf);
    buf = '';
  }
}
buf += ']}\n';
await write(buf);
if (o.out !== null) {
  const finished = new Promise((ok) => out.on('finish', ok));
  w.end();
  await finished;
}
