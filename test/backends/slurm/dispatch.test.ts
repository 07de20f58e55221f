// The slurm backend against a real SLURM (two slurmd of different sizes) and a real Berth: a container runs
// through sbatch and the one-shot agent with its logs, usage and exit; priorities become SLURM's order;
// cancel of a pending and of a running container; a container too big for every node; `why` in SLURM's
// words; a job SLURM holds for bad constraints. The CLI (ps, show, logs, why, cancel) works as with the
// cloud backend.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { RunningSlurmDispatcher } from '../../../src/backends/slurm/service.js';
import { isLive } from '../../../src/backends/slurm/squeue.js';
import { itIf } from '../../helpers/needs.js';
import { until } from '../../helpers/cli.js';
import { slurmTestsUnavailable, slurmWorld, submit, type ContainerView, type SlurmWorld } from './harness.js';

const exec = promisify(execFile);
const missing = slurmTestsUnavailable();
const test = itIf(missing);

let w: SlurmWorld;
let d: RunningSlurmDispatcher;

beforeAll(async () => {
  if (missing) return;
  w = await slurmWorld();
  d = await w.dispatcher();
}, 120_000);

afterAll(async () => {
  await w?.stop();
});

/**
 * Runs `fn` while every CPU of the cluster (1 + 2) is taken by containers that run until cancelled (a
 * process container sees no host file it could wait for: the sandbox); they are cancelled afterwards, even
 * on failure, and waited for.
 */
async function withFullCluster<T>(tag: string, fn: (blockers: string[]) => Promise<T>): Promise<T> {
  const ids: string[] = [];
  try {
    for (let i = 0; i < 3; i++)
      ids.push(
        (
          await submit(w, {
            name: `${tag}-blocker-${i}`,
            priority: 1000,
            command: ['sleep', '600'],
          })
        ).container,
      );
    for (const id of ids) await w.container(id, (c) => c.state === 'Running', 90_000, 'blocker running');
    return await fn(ids);
  } finally {
    // Its exit status is not asserted here (a throw would hide fn's error): the wait below fails if it failed.
    await w.cli(['cancel', ...ids]);
    for (const id of ids)
      await w.container(id, (c) => c.state === 'Complete' || c.state === 'Cancelled', 60_000, 'blocker done');
  }
}

const submitted = (c: ContainerView) => (c.instance_id ?? '').startsWith('slurm-job-');
const jobOf = (c: ContainerView) => c.instance_id!.replace('slurm-job-', '');
const liveJob = async (id: string) => (await w.jobs()).some((j) => j.id === id && isLive(j));

describe('slurm backend', () => {
  test(
    'runs a container through sbatch and the one-shot agent: logs, usage, exit code, CLI',
    { timeout: 120_000 },
    async () => {
      const { request, container } = await submit(w, {
        name: 'hello',
        command: [
          '/bin/sh',
          '-c',
          'echo out-line; echo err-line >&2; head -c 20000000 /dev/zero | tail -c 1 >/dev/null; exit 3',
        ],
        max_run_time: '10m',
        retry_on_failure: false,
      });
      const c = await w.container(container, (x) => x.state === 'Complete', 90_000, 'complete');
      expect(c.exit_code).toBe(3);
      expect(c.instance_id).toMatch(/^slurm-job-\d+$/);
      expect(c.usage!.wall_ms).toBeGreaterThan(0);
      expect(c.usage!.peak_ram).toBeGreaterThan(0);
      const logs = await w.api<{ items: { stream: string; data: string }[] }>(
        'GET',
        `/v1/containers/${container}/logs`,
      );
      expect(
        logs.items
          .filter((l) => l.stream === 'stdout')
          .map((l) => l.data)
          .join(''),
      ).toBe('out-line\n');
      expect(
        logs.items
          .filter((l) => l.stream === 'stderr')
          .map((l) => l.data)
          .join(''),
      ).toBe('err-line\n');

      // SLURM saw it as one job with the container's name, its resources and --time from max_run_time.
      const jobId = c.instance_id!.replace('slurm-job-', '');
      const { stdout } = await exec('scontrol', ['show', 'job', jobId], { env: w.cluster.env });
      expect(stdout).toContain(`JobName=${container}`);
      expect(stdout).toMatch(/TimeLimit=00:11:00/);
      expect(stdout).toMatch(/MinMemoryNode=320M/);
      expect(stdout).toContain('Requeue=0');

      // The CLI, as with the cloud backend.
      const show = await w.cli(['show', request]);
      expect(show.code, show.stderr).toBe(0);
      expect(show.stdout).toContain(c.instance_id!);
      expect(show.stdout).toContain('exit code 3');
      const logsCli = await w.cli(['logs', container]);
      expect(logsCli.stdout).toContain('out-line');
      const why = await w.cli(['why', container]);
      expect(why.stdout.trim()).toBe(`${container}: Complete, exit code 3`);
      const ps = await w.cli(['ps', '--all']);
      expect(ps.stdout).toContain(request);
    },
  );

  test(
    'a container past its memory is OOM-killed and reported as on a cloud instance: exit, logs, usage, show',
    { timeout: 120_000 },
    async () => {
      // dd's 200 MiB buffer passes the container's 64 MiB; the job asks SLURM for 64 MiB + ram_overhead, so
      // the runtime's limit, not SLURM, stops it.
      const { request, container } = await submit(w, {
        name: 'oom',
        command: ['/bin/sh', '-c', 'echo before-oom; exec dd if=/dev/zero of=/dev/null bs=200M count=1'],
        ram: '64MiB',
        retry_on_failure: false,
      });
      const c = await w.container(container, (x) => x.state === 'Complete', 90_000, 'complete');
      expect(c).toMatchObject({ exit_code: 137, oom_killed: true });
      expect(c.instance_id).toMatch(/^slurm-job-\d+$/);
      expect(c.usage!.peak_ram).toBeGreaterThan(32 * 1024 ** 2);
      expect(c.usage!.peak_ram).toBeLessThanOrEqual(64 * 1024 ** 2);
      const logs = await w.api<{ items: { stream: string; data: string }[] }>(
        'GET',
        `/v1/containers/${container}/logs`,
      );
      const text = (stream: string) =>
        logs.items
          .filter((l) => l.stream === stream)
          .map((l) => l.data)
          .join('');
      expect(text('stdout')).toBe('before-oom\n');
      expect(text('system')).toMatch(/out of memory|OOM/);
      const show = await w.cli(['show', request]);
      expect(show.stdout).toMatch(/exit code 137 \(OOM-killed: the container reached its memory limit\)/);
      expect(show.stdout).toMatch(/usage: peak memory [\d.]+MiB of 64MiB requested/);
      // The job itself ended normally: the agent reported the OOM and exited.
      const job = (await w.jobs()).find((j) => j.id === jobOf(c));
      expect(job?.state).toBe('COMPLETED');
    },
  );

  test(
    'a container too big for every node is cancelled (perm) with SLURM’s reason',
    { timeout: 60_000 },
    async () => {
      const { container } = await submit(w, { command: ['true'], ram: '8GiB' });
      const c = await w.container(container, (x) => x.state === 'Cancelled', 30_000, 'cancelled');
      expect(c.failure_class).toBe('perm');
      expect(c.runtime_status).toBe(
        'SLURM refused the job: Memory specification can not be satisfied; Batch job submission failed: ' +
          'Requested node configuration is not available (--cpus-per-task=1 --mem=8448M)',
      );
      const why = await w.cli(['why', container]);
      expect(why.stdout).toContain(
        'Cancelled (perm): SLURM refused the job: Memory specification can not be satisfied',
      );
      // And an instance type the cluster does not map to a feature: refused before sbatch.
      const t = await submit(w, { command: ['true'], instance_types: ['gpu-huge'] });
      const c2 = await w.container(t.container, (x) => x.state === 'Cancelled', 30_000, 'cancelled');
      expect(c2.runtime_status).toMatch(/instance_types: gpu-huge has no SLURM node feature/);
    },
  );

  test('priority order under contention, and why says SLURM’s reason', { timeout: 240_000 }, async () => {
    const low: string[] = [];
    const high: string[] = [];
    await withFullCluster('prio', async () => {
      for (let i = 0; i < 3; i++)
        low.push((await submit(w, { name: `low-${i}`, priority: 100, command: ['true'] })).container);
      for (const id of low) await w.container(id, submitted, 30_000, 'submitted');
      for (let i = 0; i < 3; i++)
        high.push((await submit(w, { name: `high-${i}`, priority: 900, command: ['true'] })).container);
      for (const id of high) await w.container(id, submitted, 30_000, 'submitted');
      // Berth's order is now SLURM's: every high job above every low one.
      await until(
        async () => {
          const jobs = (await w.jobs()).filter((j) => j.state === 'PENDING');
          const prio = (ids: string[]) => jobs.filter((j) => ids.includes(j.name)).map((j) => j.priority);
          const [h, l] = [prio(high), prio(low)];
          return h.length === 3 && l.length === 3 && Math.min(...h) > Math.max(...l);
        },
        30_000,
        'SLURM priorities in Berth order',
      );
      // SLURM gives its reason at its next scheduling pass.
      const why = await until(
        async () => {
          const r = await w.cli(['why', low[0]!]);
          return /\(SLURM reason: (Priority|Resources)\)/.test(r.stdout) ? r.stdout : null;
        },
        30_000,
        'why to give SLURM’s reason',
      );
      expect(why).toMatch(new RegExp(`^${low[0]}: Locked: SLURM job \\d+ is pending: `));
    });
    const done = await Promise.all(
      [...high, ...low].map((id) => w.container(id, (c) => c.state === 'Complete', 120_000, 'complete')),
    );
    // The blockers' jobs, their containers cancelled, keep their CPUs and take the waiting containers one by one
    // (allocation reuse, docs/SLURM.md) in Berth's order (no SLURM pass starts a job of theirs meanwhile: the
    // CPUs stay taken until nothing is left). The three jobs pick at once: a low container is picked only
    // while no high one waits unpicked (move.ts: FOR UPDATE SKIP LOCKED in that order), but a high one picked
    // in the same moment may carry a later start time (each pick's time is read before its statement). So
    // every high one started before any low one finished; in FIFO order the lows would run first.
    const times = (ids: string[], at: (c: ContainerView) => string | null) =>
      done.filter((c) => ids.includes(c.id)).map((c) => Date.parse(at(c)!));
    expect(Math.max(...times(high, (c) => c.started_at))).toBeLessThanOrEqual(
      Math.min(...times(low, (c) => c.finished_at)),
    );
  });

  test(
    'cancel of a pending and of a running container: its job is cancelled, nothing retried',
    { timeout: 240_000 },
    async () => {
      await withFullCluster('cancel', async (blockers) => {
        const pending = await submit(w, { name: 'to-cancel-pending', command: ['true'] });
        const c0 = await w.container(pending.container, submitted, 30_000, 'submitted');
        const pendingJob = jobOf(c0);
        const r = await w.cli(['cancel', pending.container]);
        expect(r.code, r.stderr).toBe(0);
        await until(async () => !(await liveJob(pendingJob)), 30_000, 'pending job gone');

        // A running one: a blocker is cancelled; its agent stops it and the job ends.
        const running = blockers[0]!;
        const runningJob = jobOf(await w.api<ContainerView>('GET', `/v1/containers/${running}`));
        const r2 = await w.cli(['cancel', running]);
        expect(r2.code, r2.stderr).toBe(0);
        await until(async () => !(await liveJob(runningJob)), 30_000, 'running job gone');
        for (const id of [pending.container, running]) {
          const c = await w.api<ContainerView>('GET', `/v1/containers/${id}`);
          expect(c).toMatchObject({ state: 'Cancelled', failure_class: 'user' });
        }
        const req = await w.api<{ state: string; outcome: string }>('GET', `/v1/requests/${pending.request}`);
        expect(req).toMatchObject({ state: 'Final', outcome: 'cancelled' });
      });
    },
  );

  test(
    'a pending job cancelled outside Berth: the container goes back to the queue, saying how its job ended',
    { timeout: 240_000 },
    async () => {
      await withFullCluster('gone', async () => {
        const { container } = await submit(w, { name: 'pending-scancelled', command: ['true'] });
        const job = jobOf(await w.container(container, submitted, 30_000, 'submitted'));
        await exec('scancel', [job], { env: w.cluster.env });
        // A pass lists live jobs only; the ended one is asked for by id to say how it ended.
        const events = async () =>
          JSON.stringify(
            (await w.api<{ items: unknown[] }>('GET', `/v1/containers/${container}/events`)).items,
          );
        await until(async () => (await events()).includes(`SLURM job ${job} ended`), 60_000, 'unlocked');
        expect(await events()).toMatch(
          new RegExp(
            `unlocked by [^"]*: SLURM job ${job} ended: CANCELLED[^"]* before its agent started the container`,
          ),
        );
        // Submitted again (a new job, pending behind the blockers), then cancelled.
        await until(
          async () => (await w.jobs()).some((j) => j.name === container && j.id !== job && isLive(j)),
          60_000,
          'submitted again',
        );
        const r = await w.cli(['cancel', container]);
        expect(r.code, r.stderr).toBe(0);
      });
    },
  );

  test(
    'priority 0 withdraws: a pending container goes back to the queue (its job cancelled), a running one is killed',
    { timeout: 240_000 },
    async () => {
      await withFullCluster('withdraw', async (blockers) => {
        const pending = await submit(w, { name: 'to-withdraw-pending', command: ['true'] });
        const pendingJob = jobOf(await w.container(pending.container, submitted, 30_000, 'submitted'));
        const r = await w.cli(['priority', pending.request, '0']);
        expect(r.code, r.stderr).toBe(0);
        await until(async () => !(await liveJob(pendingJob)), 30_000, 'pending job gone');
        await w.container(pending.container, (c) => c.state === 'Queued', 30_000, 'back in the queue');

        const running = blockers[0]!;
        const c = await w.api<ContainerView>('GET', `/v1/containers/${running}`);
        const r2 = await w.cli(['priority', c.request_id, '0']);
        expect(r2.code, r2.stderr).toBe(0);
        await until(async () => !(await liveJob(jobOf(c))), 30_000, 'running job gone');
        expect(await w.api<ContainerView>('GET', `/v1/containers/${running}`)).toMatchObject({
          state: 'Cancelled',
          failure_class: 'user',
          runtime_status: 'priority is 0 (withdrawn)',
        });
        // Nothing submits the withdrawn one again while its priority stays 0.
        expect((await w.jobs()).filter((j) => j.name === pending.container && isLive(j))).toEqual([]);
        await w.cli(['cancel', pending.container]);
      });
    },
  );

  test(
    'SLURM ends a running job itself (an administrator’s scancel): the container is retried',
    { timeout: 180_000 },
    async () => {
      const { request, container } = await submit(w, {
        name: 'scancelled',
        command: ['/bin/sh', '-c', 'echo once; sleep 60'],
      });
      const c = await w.container(container, (x) => x.state === 'Running', 90_000, 'running');
      await exec('scancel', [jobOf(c)], { env: w.cluster.env });
      const ended = await w.container(container, (x) => x.state === 'Cancelled', 60_000, 'cancelled');
      expect(ended.failure_class).toBe('temp');
      expect(ended.runtime_status).toMatch(/SIGTERM: the SLURM job is ending|SLURM job \d+ ended/);
      const req = await w.api<{ container_id: string; temp_failures: number }>(
        'GET',
        `/v1/requests/${request}`,
      );
      expect(req.container_id).not.toBe(container);
      expect(req.temp_failures).toBe(1);
      await w.cli(['cancel', request]);
    },
  );

  test(
    'a job held for bad constraints is released once, then cancelled (perm) with SLURM’s reason',
    { timeout: 240_000 },
    async () => {
      const env = w.cluster.env;
      await withFullCluster('held', async () => {
        const { container } = await submit(w, { command: ['true'], instance_types: ['big'] });
        await w.container(container, submitted, 30_000, 'submitted');
        // The site reconfigures node "big": no node has the feature any more.
        await exec(
          'scontrol',
          ['update', 'nodename=big', 'availablefeatures=other', 'activefeatures=other'],
          {
            env,
          },
        );
        try {
          const c = await w.container(container, (x) => x.state === 'Cancelled', 60_000, 'cancelled');
          expect(c.failure_class).toBe('perm');
          expect(c.runtime_status).toMatch(
            /^SLURM job \d+ is held: no node of the partition can ever satisfy its request .*\(SLURM reason: BadConstraints\)$/,
          );
          expect(await liveJob(jobOf(c))).toBe(false);
        } finally {
          await exec('scontrol', ['update', 'nodename=big', 'availablefeatures=big', 'activefeatures=big'], {
            env,
          });
        }
      });
    },
  );

  test('the dispatcher is alone on its cluster/tag', { timeout: 30_000 }, async () => {
    await expect(w.dispatcher()).rejects.toThrow(/another live dispatcher holds the lease for test\/default/);
    expect(d.dispatcher.id).toBe('test/default');
  });
});
