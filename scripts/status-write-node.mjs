// The status writer's Node work alone (issue 12, docs/PERFORMANCE.md "Session 14: status writes beside the
// passes"): StatusWriter and PgQueue.setWaiting, built, on a pool that answers every query at once, so a
// write's time is its grouping, slot vote, comparison with the last write and parts, not the database's.
// N containers wait for one reason behind a head that waits for its own; each of K rounds a new container
// of a higher priority takes the head (every position moves by one, the old head joins the long group),
// as bench/status-writes.ts does on PostgreSQL. Prints the median, min and max write (rounds after the
// first, which writes everything) and the heap. BUILD is a checkout whose `npm run build` ran (default .),
// so that two builds can be compared; PROF=FILE writes a .cpuprofile of the rounds after the first
// (`node scripts/cpuprofile-top.mjs FILE`).
//   node scripts/status-write-node.mjs [BUILD] [N=300000] [K=20]
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';

const [build = '.', n = '300000', k = '20'] = process.argv.slice(2);
const N = Number(n);
const ROUNDS = Number(k);
if (!Number.isInteger(N) || N < 1 || !Number.isInteger(ROUNDS) || ROUNDS < 1) {
  console.error('usage: node scripts/status-write-node.mjs [BUILD] [N ≥ 1] [K ≥ 1]');
  process.exit(2);
}
const load = (path) => import(pathToFileURL(resolve(build, 'dist/src', path)).href);
const { Statuses } = await load('dispatch/scheduler/statuses.js');
const { StatusWriter } = await load('dispatch/status-writer.js');
const { PgQueue } = await load('dispatch/pg-queue.js');
const { newId } = await load('model/ids.js');

const store = { ctx: { pool: { query: async () => ({ rows: [] }) } } };
let clockMs = 0;
const writer = new StatusWriter(
  new PgQueue(store, ''),
  'b/t',
  0,
  () => clockMs,
  (err) => {
    throw err;
  },
);
// Ids as the store makes them: a millisecond per thousand.
const rest = Array.from({ length: N }, (_, i) => ({
  id: newId('container', 1_700_000_000_000 + Math.floor(i / 1000)),
  priority: 1,
}));
const heads = [];
const prof = process.env.PROF ? new Session() : null;
if (prof) {
  prof.connect();
  await prof.post('Profiler.enable');
}
const times = [];
for (let round = 0; round <= ROUNDS; round++) {
  heads.unshift({ id: newId('container', 1_800_000_000_000 + round), priority: 2 + round });
  const st = new Statuses();
  const head = st.reason('waits for a t1 instance; max_instances=1 reached');
  const behind = st.reason('waits behind the head');
  st.wait(heads[0], head);
  for (const c of heads.slice(1)) st.wait(c, behind);
  for (const c of rest) st.wait(c, behind);
  clockMs += 1e9;
  const t = performance.now();
  writer.offer(st, new Date(clockMs));
  await writer.flushed();
  if (round > 0) times.push(performance.now() - t);
  else if (prof) await prof.post('Profiler.start');
}
if (prof) writeFileSync(process.env.PROF, JSON.stringify((await prof.post('Profiler.stop')).profile));
times.sort((a, b) => a - b);
const ms = (x) => Math.round(x * 10) / 10;
console.log(
  JSON.stringify({
    queued: N,
    rounds: ROUNDS,
    writes: writer.writes,
    median_ms: ms(times[times.length >> 1]),
    min_ms: ms(times[0]),
    max_ms: ms(times[times.length - 1]),
    heap_mb: Math.round(process.memoryUsage().heapUsed / 1e6),
  }),
);
