// What a cancelled SLURM job leaves on its node, on a real SLURM: nothing. Running containers whose jobs
// SLURM ends (scancel: SIGTERM to every process of the job, the container's shim too, then SIGKILL after
// KillWait), or whose user cancels them through Berth, leave no cgroup (berth/<id> in any hierarchy: what the
// test world's stop would otherwise remove and warn about) once their jobs have ended. An agent killed with
// SIGKILL cannot clean up: the next one-shot agent on the node removes what it left (src/agent/sweep.ts).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { isLive } from '../../../src/backends/slurm/squeue.js';
import { processesMentioning, until } from '../../helpers/cli.js';
import { itIf } from '../../helpers/needs.js';
import {
  leftoverCgroupDirs,
  slurmTestsUnavailable,
  slurmWorld,
  submit,
  type ContainerView,
  type SlurmWorld,
} from './harness.js';

const exec = promisify(execFile);
const missing = slurmTestsUnavailable();
const test = itIf(missing);

let w: SlurmWorld;

beforeAll(async () => {
  if (missing) return;
  // One node: every job runs where the one before it ran (two at once: this host's two CPUs).
  w = await slurmWorld({ nodes: [{ name: 'solo', cpus: 2, realMemoryMiB: 2048 }], minJobAgeS: 3600 });
  await w.dispatcher();
}, 120_000);

afterAll(async () => {
  await w?.stop();
});

const jobOf = (c: ContainerView) => c.instance_id!.replace('slurm-job-', '');
/** Until SLURM has finished the job (not pending, running nor completing: its processes are gone). */
const jobEnded = (job: string) =>
  until(
    async () => {
      const j = (await w.jobs()).find((x) => x.id === job);
      return j !== undefined && !isLive(j) && j.state !== 'COMPLETING';
    },
    90_000,
    `SLURM job ${job} ended`,
  );
/** The agent's own lines (its job's output), for a failure to show. */
const agentLines = (job: string) => {
  try {
    return readFileSync(join(w.dir, 'out', `${job}.out`), 'utf8');
  } catch {
    return '(no output)';
  }
};

/** The pid of the one-shot agent running `container`, or null. */
function agentPid(container: string): number | null {
  const line = processesMentioning(`agent --once ${container}`)[0];
  return line ? Number(line.split(' ')[0]) : null;
}

interface Started {
  request: string;
  container: string;
  job: string;
}

/**
 * Containers that run until stopped (not retried), submitted together; each returned once Running with its
 * cgroup made.
 */
async function running(name: string, n: number): Promise<Started[]> {
  const subs = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      submit(w, { name: `${name}-${i}`, command: ['sleep', '600'], max_temp_retries: 0 }),
    ),
  );
  return Promise.all(
    subs.map(async (s) => {
      const c = await w.container(s.container, (x) => x.state === 'Running', 90_000, 'running');
      // The precondition: the process runtime made its group (else the test could not fail).
      await until(async () => (await leftoverCgroupDirs(s.container)).length > 0, 30_000, 'its cgroup');
      return { ...s, job: jobOf(c) };
    }),
  );
}

describe('slurm backend: a cancelled job leaves no cgroup', () => {
  test('scancel of running jobs (SIGTERM to the whole job): their agents remove the containers’ cgroups', async () => {
    // Cancelled as soon as each runs: SLURM's SIGTERM then often reaches the shim while the agent starts it.
    const subs = await Promise.all(
      Array.from({ length: 2 }, (_, i) => submit(w, { name: `scancelled-${i}`, command: ['sleep', '600'] })),
    );
    const started = await Promise.all(
      subs.map(async (s) => {
        const c = await w.container(s.container, (x) => x.state === 'Running', 90_000, 'running');
        await exec('scancel', [jobOf(c)], { env: w.cluster.env });
        return { ...s, job: jobOf(c) };
      }),
    );
    for (const s of started) {
      await jobEnded(s.job);
      const c = await w.container(s.container, (x) => x.state === 'Cancelled', 30_000, 'cancelled');
      expect(c.failure_class).toBe('temp');
      expect(await leftoverCgroupDirs(s.container), agentLines(s.job)).toEqual([]);
    }
    await w.cli(['cancel', ...started.map((s) => s.request)]);
  }, 240_000);

  test('a user’s cancel of a running container: its job ends, its cgroup is gone', async () => {
    const [s] = await running('cancelled', 1);
    const r = await w.cli(['cancel', s!.container]);
    expect(r.code, r.stderr).toBe(0);
    await jobEnded(s!.job);
    expect(await leftoverCgroupDirs(s!.container), agentLines(s!.job)).toEqual([]);
  }, 240_000);

  test('an agent killed with SIGKILL leaves its cgroup; the next agent on the node removes it', async () => {
    const [s] = await running('killed', 1);
    // As when SLURM's KillWait has passed (`scancel --signal=KILL` would be a plain scancel: SIGTERM first).
    const agent = await until(() => agentPid(s!.container), 30_000, 'its agent');
    process.kill(agent, 'SIGKILL');
    await jobEnded(s!.job);
    // Nobody could remove it: its container runs on (re-parented, out of SLURM's sight) in its cgroup.
    const left = await leftoverCgroupDirs(s!.container);
    expect(left).not.toEqual([]);
    expect(readFileSync(join(left[0]!, 'cgroup.procs'), 'utf8').trim()).not.toBe('');
    const workDir = join(w.baseConfig.work_dir as string, s!.container);
    expect(existsSync(workDir)).toBe(true);

    const next = await submit(w, { name: 'next', command: ['true'] });
    const done = await w.container(next.container, (x) => x.state === 'Complete', 90_000, 'complete');
    await jobEnded(jobOf(done)); // its agent has exited: its sweep is over
    expect(await leftoverCgroupDirs(s!.container), agentLines(jobOf(done))).toEqual([]);
    expect(existsSync(workDir)).toBe(false);
  }, 240_000);
});
