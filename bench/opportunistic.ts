// `npm run bench -- opportunistic [--trace FILE]... [--limit N]`: issue 16 item 6. Each trace is simulated
// twice with the real scheduler, with half its jobs opportunistic and with none, and the cost,
// utilization, claims back and guaranteed containers short of their request are printed as a table.
//
// The traces of shared/traces (KTH, lublin) record no usage (SWF fields 6 and 7 are -1 on every line), so
// nothing could ever be measured as unused on them. This bench therefore gives each job a synthetic use,
// labelled as such: a fraction of its request drawn per job from `--use MIN-MAX` (default 0.1-0.9, the
// seed's example job uses 25% of its CPUs and 12.5% of its memory), seeded, the same in both runs.
// A workload file's workflow tasks keep their own use (WfCommons avgCPU and memory), never a synthetic one:
// `--trace bench/workloads/six-workflows-short.json` measures packing on recorded usage.
import { resolve } from 'node:path';
import { namedRng } from '../src/model/clock.js';
import { defaultSimConfig } from '../src/sim/config.js';
import { runSimulation, type SimJob, type RunResult } from '../src/sim/run.js';
import { prepareWorkload } from '../src/sim/workload/prepare.js';
import { benchArgs, opt, UsageError } from './args.js';

const TRACES = ['KTH-SP2-1996-2.1-cln', 'lublin_256'].map((t) =>
  resolve(import.meta.dirname, '../../../shared/traces', `${t}.swf.gz`),
);

/** The jobs with a synthetic use (see the file comment): fraction in [lo, hi] of CPUs and of memory. */
function withUse(jobs: SimJob[], lo: number, hi: number, seed: number): SimJob[] {
  const rng = namedRng(seed, 'synthetic-use');
  return jobs.map((j) => {
    const cpu = lo + (hi - lo) * rng();
    const ram = lo + (hi - lo) * rng();
    if (j.usage?.cpuSeconds != null && j.usage.peakRam != null) return j; // the trace's own, where it has one
    return {
      ...j,
      usage: { cpuSeconds: j.vcpus * cpu * (j.duration / 1000), peakRam: Math.round(j.ram * ram) },
    };
  });
}

/** The runs per trace: none opportunistic (the base), then half opportunistic under each set of rules. */
const VARIANTS = [
  { name: 'none opportunistic', fraction: 0, anyType: true, vacate: true, resume: false },
  {
    name: 'half, types within max_price_factor',
    fraction: 0.5,
    anyType: false,
    vacate: false,
    resume: false,
  },
  { name: 'half, any type', fraction: 0.5, anyType: true, vacate: false, resume: false },
  { name: 'half, any type + vacate', fraction: 0.5, anyType: true, vacate: true, resume: false },
  { name: 'half, any type + vacate, resumed', fraction: 0.5, anyType: true, vacate: true, resume: true },
];

const pct = (x: number, y: number) => `${y >= x ? '+' : ''}${(((y - x) / x) * 100).toFixed(1)}%`;

export async function run(args: string[]): Promise<number> {
  const {
    trace: traces,
    variant: only,
    limit,
    use,
  } = benchArgs('opportunistic', args, {
    trace: opt.repeated(
      'an SWF trace or a workload file (default: KTH-SP2-1996-2.1-cln and lublin_256 from the shared traces)',
    ),
    variant: opt.repeated('run only this variant (by name) besides the base'),
    limit: opt.int(undefined, 'use only the first N jobs of each trace'),
    use: opt.text('0.1-0.9', "the synthetic use's range, MIN-MAX, fractions of the request"),
  });
  const [lo, hi] = use.split('-').map(Number) as [number, number];
  if (!(lo >= 0 && hi <= 1 && lo <= hi))
    throw new UsageError(`--use: expected MIN-MAX within 0-1, got ${use}`);
  const seed = 1;
  const rows: string[] = [
    '| trace | jobs (or tasks) | run | cost | utilization vcpu / ram | wait p50 / p99 s | opportunistic | grew | claims back | requeued | vacated | guaranteed short |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const path of traces.length > 0 ? traces : TRACES) {
    const w = prepareWorkload(path, limit === undefined ? {} : { limit });
    const jobs = withUse(w.jobs, lo, hi, seed);
    // A workflow workload has no open-loop jobs: its tasks are what runs (they keep their own use).
    const count = jobs.length + w.workflows.reduce((n, r) => n + r.workflow.tasks.length, 0);
    let base: RunResult | null = null;
    for (const v of VARIANTS) {
      if (only.length > 0 && v.fraction > 0 && !only.includes(v.name)) continue;
      const config = defaultSimConfig();
      config.opportunistic = { ...config.opportunistic, fraction: v.fraction, resume: v.resume };
      config.scheduler = {
        ...config.scheduler,
        opportunisticAnyType: v.anyType,
        opportunisticVacate: v.vacate,
      };
      const t0 = performance.now();
      const r = await runSimulation({ jobs, workflows: w.workflows, config, seed, policy: 'berth' });
      const o = r.stats.opportunistic;
      const u = r.report.utilization;
      const change = base === null ? '' : ` (${pct(base.report.cost.total, r.report.cost.total)})`;
      const uChange = base === null ? '' : ` (${pct(base.report.utilization.vcpu ?? 1, u.vcpu ?? 1)})`;
      rows.push(
        `| ${path.split('/').pop()} | ${count} | ${v.name} | ${r.report.cost.total.toFixed(2)}${change} | ${u.vcpu} / ${u.ram}${uChange} | ${r.report.wait.p50} / ${r.report.wait.p99} | ${o.submitted} | ${o.grew} | ${o.claimsBack} | ${o.requeued} | ${o.vacated} | ${o.guaranteedShort} |`,
      );
      console.error(`${path}: ${v.name} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      base ??= r;
    }
  }
  console.log(rows.join('\n'));
  return 0;
}
