// Runs only the scheduler bench's one-arrival passes (bench/scheduler.ts: the incremental planner over the
// steady snapshot and the same with one container more, alternately), for a CPU profile of them alone:
//   npm run build && node --cpu-prof --cpu-prof-dir=/tmp/prof scripts/profile-one-change.mjs 100000 100
//   node scripts/cpuprofile-top.mjs /tmp/prof/*.cpuprofile 25
// Arguments: queued containers (100000), passes (40), the change (`arrival`, or `start`: one Locked
// container assigned to an instance started, as the bench's one_start columns). Instances 10,000, types 50,
// seed 1, as the bench's.
import { applied, buildSnapshot, shapeContainer } from '../dist/bench/scheduler.js';
import { seededRng } from '../dist/src/model/clock.js';
import { IncrementalPlanner } from '../dist/src/dispatch/scheduler/incremental.js';
import { plan } from '../dist/src/dispatch/scheduler/plan.js';

const queued = Number(process.argv[2] ?? 100_000);
const passes = Number(process.argv[3] ?? 40);
const args = {
  queued,
  instances: 10_000,
  types: 50,
  seed: 1,
  expected: 0,
  set: [],
  json: false,
  'min-reps': 3,
};
const s = buildSnapshot(args);
const steady = applied(s, plan(s));
const change = process.argv[4] ?? 'arrival';
let arrived;
if (change === 'start') {
  const k = steady.containers.findIndex((c) => c.state === 'Locked' && c.instance !== null);
  const containers = [...steady.containers];
  containers[k] = { ...containers[k], state: 'Running', startedAt: steady.now };
  arrived = { ...steady, containers };
} else {
  const arrival = shapeContainer('q-arrival', seededRng(args.seed + 7), { queuedAt: steady.now });
  arrived = { ...steady, containers: [...steady.containers, arrival] };
}
const planner = new IncrementalPlanner();
planner.plan({ ...steady });
const cpu = [];
for (let i = 0; i < passes; i++) {
  const c0 = process.cpuUsage();
  planner.plan({ ...(i % 2 === 0 ? arrived : steady) });
  const c = process.cpuUsage(c0);
  cpu.push((c.user + c.system) / 1000);
}
cpu.sort((a, b) => a - b);
console.log(
  `one-change (${change}) passes=${passes} cpu_median_ms=${cpu[cpu.length >> 1]} stats=${JSON.stringify(planner.stats)} ` +
    `queue=${JSON.stringify(planner.queueCounts)} pool=${JSON.stringify(planner.poolCounts)}`,
);
