// `npm run bench -- sim-gap --workload FILE [--config FILE] [--json]`
//
// Where the bill of a `berth sim` run goes, beside the offline packer's (src/sim/pack.ts, arrival order,
// zero waits) on the same workload (docs/performance/sim.md, "Session 9 (h-cost7)"): boot, the billing
// minimum's padding, instances alive and running nothing, and the free part of instances running
// something (the vcpus not used × the time × the price per vcpu), split by when it happens in the
// instance's life: before it is first full, between two full stretches, after its last full stretch (a
// tail: one container outlives the others). Also the free vcpus of ready instances while containers
// waited (what a better choice of instance could have used at once), split by whether the waiting
// container went on to wait for a boot or for room on a ready instance; and the packer's figures with
// run times known per task (exact), per step only (the median of the task's step over the whole mix), or
// not at all (a constant), which says how much of the packer's lead is what it knows of run times.
import { defaultSimConfig, loadSimConfig } from '../src/sim/config.js';
import { pack, type PackJob, type PackOptions } from '../src/sim/pack.js';
import { packJobs } from '../src/sim/pack-input.js';
import type { RunRecord } from '../src/sim/report/input.js';
import { runSimulation } from '../src/sim/run.js';
import { prepareWorkload } from '../src/sim/workload/prepare.js';
import { resolveOptions } from '../src/cloud/sim/options.js';
import { billedMs, PER_SECOND } from '../src/model/billing.js';
import { mean } from '../src/cloud/sim/distribution.js';
import { benchArgs, opt, UsageError } from './args.js';

const OPTIONS = {
  workload: opt.text(undefined, 'the workload (as berth sim --workload)'),
  config: opt.text(undefined, 'a simulator config file (as berth sim --config)'),
  json: opt.flag('print JSON'),
};

const HOUR = 3_600_000;

/** $ by cause; `free*` are the unused vcpus' share of instances running something. */
interface Split {
  boot: number;
  padding: number;
  empty: number;
  freeBeforeFull: number;
  freeBetween: number;
  freeTail: number;
}

/** One instance's life after its boot, as (from, to, vcpus used) stretches, split into `s`. */
function splitLife(
  s: Split,
  price: number,
  vcpus: number,
  readyAt: number,
  stop: number,
  runs: Array<[number, number, number]>,
): void {
  const ev: Array<[number, number]> = [];
  for (const [a, b, v] of runs) ev.push([a, v], [b, -v]);
  ev.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  const stretches: Array<[number, number, number]> = [];
  let used = 0;
  let last = readyAt;
  for (const [t, d] of ev) {
    if (t > last) stretches.push([last, Math.min(t, stop), used]);
    last = Math.max(last, t);
    used += d;
  }
  if (stop > last) stretches.push([last, stop, used]);
  const full = stretches.flatMap((x, k) => (x[2] >= vcpus ? [k] : []));
  const first = full.length > 0 ? full[0]! : Infinity;
  const lastFull = full.length > 0 ? full[full.length - 1]! : Infinity;
  stretches.forEach(([a, b, u], k) => {
    if (b <= a) return;
    const cost = (price * (b - a)) / HOUR;
    if (u === 0) s.empty += cost;
    else if (u < vcpus) {
      const free = (cost * (vcpus - u)) / vcpus;
      if (k < first) s.freeBeforeFull += free;
      else if (k > lastFull) s.freeTail += free;
      else s.freeBetween += free;
    }
  });
}

function schedulerSplit(
  record: RunRecord,
  end: number,
): Split & { freeWhileWaiting: { boot: number; room: number } } {
  const s: Split = { boot: 0, padding: 0, empty: 0, freeBeforeFull: 0, freeBetween: 0, freeTail: 0 };
  const types = new Map(record.instanceTypes.map((t) => [t.name, t]));
  const runs = new Map<string, Array<[number, number, number]>>();
  for (const c of record.containers) {
    if (c.start === null || c.instance === null) continue;
    let list = runs.get(c.instance);
    if (list === undefined) runs.set(c.instance, (list = []));
    list.push([c.start, c.end ?? end, c.vcpus]);
  }
  // Free ready vcpus against waiting containers, as a sweep over events: [time, Δfree, Δwait boot, Δwait room].
  const ev: Array<[number, number, number, number]> = [];
  const readyAt = new Map<string, number | null>();
  let perVcpu = Infinity;
  for (const i of record.instances) {
    const t = types.get(i.type)!;
    perVcpu = Math.min(perVcpu, i.price / t.vcpus);
    const stop = i.destroyed ?? end;
    const ready = i.ready === null ? stop : Math.min(i.ready, stop);
    readyAt.set(i.id, i.ready);
    s.boot += (i.price * (ready - i.created)) / HOUR;
    const billed = billedMs(stop - i.created, record.billing ?? PER_SECOND);
    s.padding += (i.price * (billed - (stop - i.created))) / HOUR;
    splitLife(s, i.price, t.vcpus, ready, stop, runs.get(i.id) ?? []);
    if (i.ready !== null) ev.push([i.ready, t.vcpus, 0, 0], [stop, -t.vcpus, 0, 0]);
  }
  for (const c of record.containers) {
    if (c.start === null || c.instance === null) continue;
    ev.push([c.start, -c.vcpus, 0, 0], [c.end ?? end, c.vcpus, 0, 0]);
    if (c.start > c.arrival) {
      const boot = (readyAt.get(c.instance) ?? Infinity) > c.arrival;
      ev.push([c.arrival, 0, boot ? 1 : 0, boot ? 0 : 1], [c.start, 0, boot ? -1 : 0, boot ? 0 : -1]);
    }
  }
  ev.sort((a, b) => a[0] - b[0]);
  let free = 0;
  let waitBoot = 0;
  let waitRoom = 0;
  let last = ev.length > 0 ? ev[0]![0] : 0;
  const w = { boot: 0, room: 0 };
  for (const [t, df, db, dr] of ev) {
    const d = t - last;
    if (d > 0 && free > 0) {
      const room = Math.min(free, waitRoom);
      w.room += (room * d * perVcpu) / HOUR;
      w.boot += ((Math.min(free, waitRoom + waitBoot) - room) * d * perVcpu) / HOUR;
    }
    last = t;
    free += df;
    waitBoot += db;
    waitRoom += dr;
  }
  return { ...s, freeWhileWaiting: w };
}

function packerSplit(
  input: PackJob[],
  o: PackOptions,
): Split & { cost: number; ratio: number | null; instances: number } {
  const r = pack(input, { ...o, keepSchedule: true });
  const s: Split = {
    boot: r.boot,
    padding: 0,
    empty: r.idle,
    freeBeforeFull: 0,
    freeBetween: 0,
    freeTail: 0,
  };
  for (const b of r.schedule ?? []) {
    const runs = b.jobs.map((j): [number, number, number] => {
      const job = input[j]!;
      return [job.start, job.start + job.duration, job.vcpus];
    });
    // The packer's idle (the 60 s minimum included) is counted in `empty` already.
    const before = s.empty;
    splitLife(s, b.type.price, b.type.vcpus, b.created + o.bootMs, b.end, runs);
    s.empty = before;
  }
  return { ...s, cost: r.cost, ratio: r.ratio, instances: r.instances };
}

const r4 = (x: number) => Math.round(x * 1e4) / 1e4;

export async function run(argv: string[]): Promise<number> {
  const args = benchArgs('sim-gap', argv, OPTIONS);
  if (args.workload === undefined) throw new UsageError('--workload: required (a workload file)');
  const config = args.config === undefined ? defaultSimConfig() : loadSimConfig(args.config);
  const { jobs, workflows } = prepareWorkload(args.workload);
  const { record, report } = await runSimulation({ jobs, workflows, config, seed: 1, policy: 'berth' });
  const end = record.endTime ?? Math.max(...record.instances.map((i) => i.destroyed ?? i.created));
  const sched = schedulerSplit(record, end);

  // The packer boots for the mean boot time, as `berth sim pack` does.
  const bootMs = mean(resolveOptions({ ...config.cloud, seed: 0 }).bootTime);
  const o: PackOptions = { types: config.catalog, billing: config.billing, bootMs, lookahead: 0 };
  const input = packJobs(jobs, workflows, 'exact');
  const exact = packerSplit(input, o);
  const step = pack(packJobs(jobs, workflows, 'step'), o);
  const none = pack(packJobs(jobs, workflows, 'none'), o);
  const out = {
    scheduler: {
      ratio: report.cost.ratio,
      cost: report.cost.total,
      lowerBound: report.cost.lowerBound,
      instances: report.instances.created,
      ...Object.fromEntries(Object.entries(sched).map(([k, v]) => [k, typeof v === 'number' ? r4(v) : v])),
    },
    packer: Object.fromEntries(Object.entries(exact).map(([k, v]) => [k, typeof v === 'number' ? r4(v) : v])),
    packerKnowing: {
      exact: exact.ratio === null ? null : r4(exact.ratio),
      stepMedian: step.ratio === null ? null : r4(step.ratio),
      nothing: none.ratio === null ? null : r4(none.ratio),
    },
  };
  if (args.json) console.log(JSON.stringify(out, null, 2));
  else {
    const rows: Array<[string, keyof Split]> = [
      ['boot', 'boot'],
      ['billing minimum padding (packer: in the next row)', 'padding'],
      ['alive, running nothing', 'empty'],
      ['free vcpus before first full', 'freeBeforeFull'],
      ['free vcpus between full stretches', 'freeBetween'],
      ['free vcpus after last full (tails)', 'freeTail'],
    ];
    console.log(`lower bound ${r4(report.cost.lowerBound)} $`);
    console.log(
      `berth sim: ${r4(report.cost.total)} $ (ratio ${report.cost.ratio}, ${report.instances.created} instances); packer: ${r4(exact.cost)} $ (ratio ${exact.ratio === null ? '-' : r4(exact.ratio)}, ${exact.instances} instances)`,
    );
    for (const [label, k] of rows)
      console.log(
        `${label.padEnd(40)} ${r4(sched[k]).toFixed(4).padStart(9)} ${r4(exact[k]).toFixed(4).padStart(9)}`,
      );
    console.log(
      `free ready vcpus while containers waited: for a boot ${r4(sched.freeWhileWaiting.boot)} $, for room ${r4(sched.freeWhileWaiting.room)} $`,
    );
    console.log(
      `packer knowing run times exactly / per step (median over the mix) / not at all: ${out.packerKnowing.exact} / ${out.packerKnowing.stepMedian} / ${out.packerKnowing.nothing}`,
    );
  }
  return 0;
}
