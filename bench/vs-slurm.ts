// `npm run bench -- vs-slurm [--jobs N] [--json] [...]`: N trivial one-CPU jobs through SLURM, through
// Berth, and through Berth on SLURM on this machine, side by side. SLURM: a private one-node cluster
// (munged, slurmctld, slurmd, the node = this machine's CPUs) started and stopped here, one `sbatch` per
// job. Berth: the `berth up` setup (local driver, one warm instance the size of the machine, process
// runtime). Berth on SLURM: the same SLURM cluster with Berth's slurm backend in front (each job runs its
// container through the one-shot agent). All get the same command, 1 CPU and the same memory per job, the
// same submission concurrency, and the same 100 ms completion poll. See docs/performance/vs-slurm.md.
import { cpus, loadavg, totalmem } from 'node:os';
import { runBerthJobs, type SubmitMode } from './vs-slurm/berth.js';
import { runBerthOnSlurmJobs } from './vs-slurm/berth-slurm.js';
import { pct, type SideResult } from './vs-slurm/common.js';
import { missingSlurmPrograms, runSlurmJobs, SLURM_INSTALL, startSlurm } from './vs-slurm/slurm.js';
import { benchArgs, opt } from './args.js';

/**
 * SLURM's scheduler settings for the comparison. `tuned`: batch_sched_delay=0 — by default (3 s) slurmctld
 * batches the scheduling that follows job submissions and completions into one pass per 3 s, which caps a
 * node of short jobs at one wave per 3 s; 0 is what SLURM's high-throughput guide points at for this.
 * `stock`: no SchedulerParameters line at all.
 */
const SLURM_SCHED = { tuned: 'batch_sched_delay=0', stock: null } as const;

interface Args {
  jobs: number;
  json: boolean;
  concurrency: number;
  submit: SubmitMode;
  slurmSched: keyof typeof SLURM_SCHED;
  sides: { slurm: boolean; berth: boolean; berthSlurm: boolean };
  /** Berth on SLURM: whether a started job runs further containers (reuse_allocation.enabled). */
  reuse: boolean;
}

const SIDES = ['slurm', 'berth', 'berth-slurm'] as const;

const OPTIONS = {
  jobs: opt.int(1000, 'trivial jobs on each side'),
  json: opt.flag('print JSON'),
  concurrency: opt.int(8, 'submissions in flight'),
  'berth-submit': opt.oneOf(
    ['single', 'batch'] as const,
    'single',
    "Berth's submissions: one per call, or batched",
  ),
  'slurm-sched': opt.oneOf(['tuned', 'stock'] as const, 'tuned', "SLURM's SchedulerParameters"),
  only: opt.someOf(SIDES, SIDES, 'the sides to run'),
  'slurm-reuse': opt.oneOf(['on', 'off'] as const, 'on', 'Berth on SLURM: reuse_allocation.enabled'),
};

function parse(argv: string[]): Args {
  const o = benchArgs('vs-slurm', argv, OPTIONS);
  return {
    jobs: o.jobs,
    json: o.json,
    concurrency: o.concurrency,
    submit: o['berth-submit'],
    slurmSched: o['slurm-sched'],
    sides: {
      slurm: o.only.includes('slurm'),
      berth: o.only.includes('berth'),
      berthSlurm: o.only.includes('berth-slurm'),
    },
    reuse: o['slurm-reuse'] === 'on',
  };
}

interface SideReport {
  jobs: number;
  recorded: number;
  succeeded: number;
  submit_s: number;
  all_finished_s: number;
  jobs_per_s: number;
  submit_to_start_p50_ms: number;
  submit_to_start_p99_ms: number;
  submit_to_start_max_ms: number;
  run_p50_ms: number;
  run_p99_ms: number;
  max_running: number | null;
  load_before: number[];
  load_after: number[];
}

function report(r: SideResult, before: number[]): SideReport {
  const ms = [...r.submitToStartMs].sort((x, y) => x - y);
  const run = [...r.runMs].sort((x, y) => x - y);
  const round = (x: number, d = 1) => +x.toFixed(d);
  return {
    jobs: r.jobs,
    recorded: r.recorded,
    succeeded: r.succeeded,
    submit_s: round(r.submitSeconds, 2),
    all_finished_s: round(r.makespanSeconds, 2),
    jobs_per_s: round(r.jobs / r.makespanSeconds, 2),
    submit_to_start_p50_ms: round(pct(ms, 50)),
    submit_to_start_p99_ms: round(pct(ms, 99)),
    submit_to_start_max_ms: round(ms[ms.length - 1] ?? 0),
    run_p50_ms: round(pct(run, 50)),
    run_p99_ms: round(pct(run, 99)),
    max_running: r.maxRunning,
    load_before: before.map((x) => round(x, 2)),
    load_after: loadavg().map((x) => round(x, 2)),
  };
}

export async function run(argv: string[]): Promise<number> {
  const a = parse(argv);
  const say = (s: string) => !a.json && console.error(s);
  const missing = a.sides.slurm || a.sides.berthSlurm ? missingSlurmPrograms() : [];
  if (missing.length > 0) {
    console.error(
      `vs-slurm: SLURM is not installed here (missing: ${missing.join(', ')}).\n` +
        `Install it as root with:\n  ${SLURM_INSTALL}\n` +
        `(or run only the Berth side with --only berth)`,
    );
    return 2;
  }
  const nCpus = Math.max(1, cpus().length);
  const totalMiB = Math.floor(totalmem() / 1024 ** 2);
  const machine = { cpus: nCpus, ram_mib: totalMiB, node_ram_mib: Math.floor(totalMiB * 0.75) };
  const job = { command: ['true'], cpus: 1, ram_mib: 64 };
  const out: {
    machine: typeof machine;
    job: typeof job;
    submission_concurrency: number;
    slurm?: SideReport & { submission: string; scheduler_config: string[] };
    berth?: SideReport & { submission: string };
    berth_on_slurm?: SideReport & { submission: string };
    ratios?: { jobs_per_s: number; p50: number; p99: number };
    berth_on_slurm_vs_slurm?: { jobs_per_s: number; p99_extra_ms: number };
    targets: {
      jobs_per_s_ratio_min: number;
      latency_ratio_max: number;
      berth_on_slurm_jobs_per_s_ratio_min: number;
      berth_on_slurm_p99_extra_ms_max: number;
    };
  } = {
    machine,
    job,
    submission_concurrency: a.concurrency,
    targets: {
      jobs_per_s_ratio_min: 3,
      latency_ratio_max: 0.2,
      berth_on_slurm_jobs_per_s_ratio_min: 0.8,
      berth_on_slurm_p99_extra_ms_max: 1000,
    },
  };

  if (a.sides.slurm) {
    say(
      `slurm: starting munged, slurmctld, slurmd (SchedulerParameters: ${SLURM_SCHED[a.slurmSched] ?? 'defaults'})…`,
    );
    const cluster = await startSlurm({
      cpus: nCpus,
      realMemoryMiB: machine.node_ram_mib,
      schedulerParameters: SLURM_SCHED[a.slurmSched],
      say,
    });
    // Ctrl-C mid-run still stops the daemons and removes the temp dir.
    const onSignal = () => void cluster.stop().finally(() => process.exit(130));
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      say(`slurm: ${a.jobs} jobs (one sbatch each, ${a.concurrency} at a time)…`);
      const before = loadavg();
      const r = await runSlurmJobs(cluster, {
        jobs: a.jobs,
        concurrency: a.concurrency,
        command: job.command,
        ramMiB: job.ram_mib,
      });
      out.slurm = {
        ...report(r, before),
        submission: `one sbatch per job, ${a.concurrency} at a time`,
        scheduler_config: cluster.schedulerConfig,
      };
      say(`slurm: done in ${out.slurm.all_finished_s} s`);
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      await cluster.stop();
    }
  }

  if (a.sides.berth) {
    say('berth: starting (embedded PostgreSQL, server, dispatcher, one warm local instance)…');
    const before = loadavg();
    const r = await runBerthJobs({
      jobs: a.jobs,
      concurrency: a.concurrency,
      submit: a.submit,
      command: job.command,
      ramMiB: job.ram_mib,
      vcpus: nCpus,
      instanceRamMiB: machine.node_ram_mib,
      say,
    });
    out.berth = {
      ...report(r, before),
      submission:
        a.submit === 'single'
          ? `one POST /v1/requests per job, ${a.concurrency} at a time`
          : `POST /v1/requests/batch, up to 1000 per call`,
    };
    say(`berth: done in ${out.berth.all_finished_s} s`);
  }

  if (a.sides.berthSlurm) {
    const before = loadavg();
    const r = await runBerthOnSlurmJobs({
      jobs: a.jobs,
      concurrency: a.concurrency,
      command: job.command,
      ramMiB: job.ram_mib,
      cpus: nCpus,
      realMemoryMiB: machine.node_ram_mib,
      schedulerParameters: SLURM_SCHED[a.slurmSched],
      reuse: a.reuse,
      say,
    });
    out.berth_on_slurm = {
      ...report(r, before),
      submission: `one POST /v1/requests per job, ${a.concurrency} at a time; one sbatch per job by the dispatcher; allocation reuse ${a.reuse ? 'on' : 'off'}`,
    };
    say(`berth on slurm: done in ${out.berth_on_slurm.all_finished_s} s`);
  }

  if (out.slurm && out.berth_on_slurm) {
    out.berth_on_slurm_vs_slurm = {
      jobs_per_s: +(out.berth_on_slurm.jobs_per_s / out.slurm.jobs_per_s).toFixed(3),
      p99_extra_ms: Math.round(out.berth_on_slurm.submit_to_start_p99_ms - out.slurm.submit_to_start_p99_ms),
    };
  }

  if (out.slurm && out.berth) {
    const div = (x: number, y: number) => (y === 0 ? Infinity : +(x / y).toFixed(3));
    out.ratios = {
      jobs_per_s: div(out.berth.jobs_per_s, out.slurm.jobs_per_s),
      p50: div(out.berth.submit_to_start_p50_ms, out.slurm.submit_to_start_p50_ms),
      p99: div(out.berth.submit_to_start_p99_ms, out.slurm.submit_to_start_p99_ms),
    };
  }

  if (a.json) console.log(JSON.stringify(out, null, 2));
  else printTable(out);
  return 0;
}

function printTable(out: {
  machine: { cpus: number; node_ram_mib: number };
  slurm?: SideReport & { submission: string; scheduler_config: string[] };
  berth?: SideReport & { submission: string };
  berth_on_slurm?: SideReport & { submission: string };
  ratios?: { jobs_per_s: number; p50: number; p99: number };
  berth_on_slurm_vs_slurm?: { jobs_per_s: number; p99_extra_ms: number };
}): void {
  const s = out.slurm;
  const b = out.berth;
  const bs = out.berth_on_slurm;
  const vs = out.berth_on_slurm_vs_slurm;
  const cell = (v: number | string | undefined) => String(v ?? '–').padStart(12);
  const wide = (v: number | string | undefined) => String(v ?? '–').padStart(16);
  const rows: [string, keyof SideReport | null, string, string, string, string][] = [
    ['jobs in records', 'recorded', '', '', '', ''],
    ['jobs succeeded', 'succeeded', '', '', '', ''],
    ['submit all (s)', 'submit_s', '', '', '', ''],
    ['all finished (s)', 'all_finished_s', '', '', '', ''],
    [
      'jobs/s',
      'jobs_per_s',
      out.ratios ? `${out.ratios.jobs_per_s}×` : '',
      '≥ 3×',
      vs ? `${vs.jobs_per_s}×` : '',
      '≥ 0.8×',
    ],
    [
      'submit→start p50 (ms)',
      'submit_to_start_p50_ms',
      out.ratios ? `${out.ratios.p50}×` : '',
      '≤ 0.2×',
      '',
      '',
    ],
    [
      'submit→start p99 (ms)',
      'submit_to_start_p99_ms',
      out.ratios ? `${out.ratios.p99}×` : '',
      '≤ 0.2×',
      vs ? `${vs.p99_extra_ms >= 0 ? '+' : ''}${vs.p99_extra_ms} ms` : '',
      '≤ +1000 ms',
    ],
    ['submit→start max (ms)', 'submit_to_start_max_ms', '', '', '', ''],
    ['start→end p50 (ms)', 'run_p50_ms', '', '', '', ''],
    ['start→end p99 (ms)', 'run_p99_ms', '', '', '', ''],
    ['most running at once', 'max_running', '', '', '', ''],
  ];
  console.log(
    `${''.padEnd(24)}${cell('SLURM')}${cell('Berth')}${cell('Berth/SLURM')}${cell('target')}${wide('Berth on SLURM')}${wide('vs SLURM')}${cell('target')}`,
  );
  for (const [label, key, ratio, target, vsText, vsTarget] of rows)
    console.log(
      `${label.padEnd(24)}${cell(key && s ? (s[key] as number) : undefined)}${cell(key && b ? (b[key] as number) : undefined)}${cell(ratio)}${cell(target)}` +
        `${wide(key && bs ? (bs[key] as number) : undefined)}${wide(vsText)}${cell(vsTarget)}`,
    );
  console.log(
    `machine: ${out.machine.cpus} CPUs; SLURM node and Berth instance: ${out.machine.cpus} CPUs, ${out.machine.node_ram_mib} MiB`,
  );
  if (s)
    console.log(
      `SLURM: ${s.submission}; ${s.scheduler_config.join(', ')}; load ${s.load_before.join(' ')} → ${s.load_after.join(' ')}`,
    );
  if (b) console.log(`Berth: ${b.submission}; load ${b.load_before.join(' ')} → ${b.load_after.join(' ')}`);
  if (bs)
    console.log(
      `Berth on SLURM: ${bs.submission}; load ${bs.load_before.join(' ')} → ${bs.load_after.join(' ')}`,
    );
  if (s)
    console.log(
      "SLURM's submit → start: from the sbatch call's answer to the batch script's first line (ms); its start → end: SLURM's records (whole seconds).",
    );
}
