// The SLURM side of `bench vs-slurm`: a private one-node SLURM cluster (bench/slurm-cluster.ts: munged,
// slurmctld, slurmd in a temp dir on free ports, found through SLURM_CONF) and N one-CPU batch jobs
// through it.
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startSlurm as startCluster, type SlurmCluster } from '../slurm-cluster.js';
import { pollUntil, runPool, type SideResult } from './common.js';

export { missingSlurmPrograms, SLURM_INSTALL, type SlurmCluster } from '../slurm-cluster.js';

const exec = promisify(execFile);

export interface SlurmOptions {
  cpus: number;
  realMemoryMiB: number;
  /** The `SchedulerParameters=` line's value, or null to leave SLURM's defaults. */
  schedulerParameters: string | null;
  say: (line: string) => void;
}

/** The benchmark's cluster: one node the size of the machine. */
export function startSlurm(o: SlurmOptions): Promise<SlurmCluster> {
  return startCluster({
    prefix: 'berth-vs-slurm-',
    nodes: [{ name: 'node1', cpus: o.cpus, realMemoryMiB: o.realMemoryMiB }],
    schedulerParameters: o.schedulerParameters,
    // Finished jobs stay listed (default 300 s): a run of 1,000 jobs outlasts that, and the latencies are
    // read from these records at the end. Bookkeeping only; the scheduler looks at pending jobs.
    minJobAgeS: 3600,
  });
}

interface SqueueJob {
  job_id: number;
  job_state: string;
  exit_code: number;
  submit_time: number;
  start_time: number;
  end_time: number;
}

/**
 * Submits `jobs` batch jobs (one sbatch call each, `concurrency` at a time) and waits for them all.
 *
 * Submit → start is measured to the same moment as on Berth's sides, the job's command beginning, and to the
 * millisecond (SLURM's own submit and start times are whole seconds, ±1 s on each latency): "submit" is when
 * the sbatch call returned (an upper bound on SLURM's submit time, so SLURM's latencies are if anything a
 * little short), "start" is the first line of the batch script, which prints bash's $EPOCHREALTIME (a
 * builtin: no extra process) before the command runs.
 */
export async function runSlurmJobs(
  c: SlurmCluster,
  o: { jobs: number; concurrency: number; command: string[]; ramMiB: number },
): Promise<SideResult> {
  const script = join(c.dir, 'job.sh');
  writeFileSync(script, `#!/bin/bash\nprintf '%s\\n' "$EPOCHREALTIME"\n${o.command.join(' ')}\n`);
  const out = join(c.dir, 'out');
  const args = [
    '--parsable',
    '--ntasks=1',
    '--cpus-per-task=1',
    `--mem=${o.ramMiB}M`,
    `--chdir=${out}`,
    `--output=${out}/%j.out`,
    script,
  ];
  const submittedAt = new Map<number, number>();
  const t0 = performance.now();
  await runPool(o.jobs, o.concurrency, async () => {
    const r = await exec('sbatch', args, { env: c.env });
    submittedAt.set(Number(r.stdout.trim().split(';')[0]), Date.now());
  });
  const submitted = performance.now();
  // Finished = no longer pending or running (COMPLETING is the node's cleanup after the job ended).
  await pollUntil(
    async () =>
      (await exec('squeue', ['-h', '-t', 'PD,CF,R', '-o', '%i'], { env: c.env })).stdout.trim() === '',
    24 * 3600_000,
    100,
  );
  const done = performance.now();
  const { stdout } = await exec('squeue', ['--json', '--states=all'], {
    env: c.env,
    maxBuffer: 1 << 30,
  });
  const jobs = (JSON.parse(stdout) as { jobs: SqueueJob[] }).jobs.filter((j) => submittedAt.has(j.job_id));
  const ok = jobs.filter((j) => j.job_state === 'COMPLETED' && j.exit_code === 0);
  const startedAt = (j: SqueueJob): number | null => {
    let first: string | undefined;
    try {
      first = readFileSync(join(out, `${j.job_id}.out`), 'utf8').split('\n')[0];
    } catch {
      return null; // no output file: not counted (`recorded` says how many were)
    }
    const s = Number(first?.replace(',', '.'));
    return first && Number.isFinite(s) ? s * 1000 : null;
  };
  const latencies = ok.flatMap((j) => {
    const s = startedAt(j);
    return s === null ? [] : [s - submittedAt.get(j.job_id)!];
  });
  return {
    jobs: o.jobs,
    recorded: latencies.length,
    succeeded: ok.length,
    submitSeconds: (submitted - t0) / 1000,
    makespanSeconds: (done - t0) / 1000,
    submitToStartMs: latencies,
    // SLURM keeps whole seconds: each run time is off by up to ±1 s.
    runMs: jobs.filter((j) => j.end_time > 0).map((j) => (j.end_time - j.start_time) * 1000),
    maxRunning: null,
  };
}
