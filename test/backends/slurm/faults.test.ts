// The slurm backend through failures, on a real SLURM: a node (slurmd and every process of its jobs) killed
// under a running container, the dispatcher process killed with SIGKILL and started again, and 300
// containers of mixed sizes and priorities submitted with `berth submit` through one of each. Nothing is
// submitted twice, nothing is lost, every container completes once with its logs and usage.
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { containerCgroup, probeCgroups } from '../../../src/agent/runtimes/cgroup.js';
import { isLive, type SlurmJob } from '../../../src/backends/slurm/squeue.js';
import { until } from '../../helpers/cli.js';
import { itIf } from '../../helpers/needs.js';
import { slurmTestsUnavailable, slurmWorld, submit, type ContainerView, type SlurmWorld } from './harness.js';

const missing = slurmTestsUnavailable();
const test = itIf(missing);
/** The done-when run's size (BERTH_SLURM_CONTAINERS to try other sizes by hand). */
const MANY = Number(process.env.BERTH_SLURM_CONTAINERS ?? 300);

let w: SlurmWorld;

beforeAll(async () => {
  if (missing) return;
  // Finished jobs stay listed for the whole file, so a second submission of a container would show.
  w = await slurmWorld({ minJobAgeS: 3600 });
}, 120_000);

afterAll(async () => {
  await w?.stop();
});

interface RequestView {
  id: string;
  state: string;
  outcome: string | null;
  attempts: number;
  temp_failures: number;
}

async function containersOf(request: string): Promise<ContainerView[]> {
  return (await w.api<{ items: ContainerView[] }>('GET', `/v1/containers?request_id=${request}&limit=100`))
    .items;
}

/**
 * Containers with more SLURM jobs (any state squeue still lists) than locks: each lock submits at most
 * once (a container given back after its job died before starting it is locked and submitted again).
 * Returns what shows the problem: the container's jobs and events.
 */
async function submittedTwice(jobs: SlurmJob[]): Promise<string[]> {
  const byName = new Map<string, SlurmJob[]>();
  for (const j of jobs)
    if (j.name.startsWith('c-')) (byName.get(j.name) ?? byName.set(j.name, []).get(j.name)!).push(j);
  const out: string[] = [];
  for (const [name, js] of byName) {
    if (js.length < 2) continue;
    const c = await w.api<ContainerView>('GET', `/v1/containers/${name}`);
    if (js.length <= c.lock_count) continue;
    const events = await w.api<{ items: { at: string; message: string }[] }>(
      'GET',
      `/v1/containers/${name}/events`,
    );
    out.push(
      `${name} (${c.lock_count} lock(s)): jobs ${js.map((j) => `${j.id} ${j.state} ${j.reason}`).join(', ')}; ` +
        `events: ${events.items.map((e) => `${e.at} ${e.message}`).join(' | ')}`,
    );
  }
  return out;
}

/** The node a container's job runs on. */
async function nodeOf(c: ContainerView): Promise<string> {
  const id = c.instance_id!.replace('slurm-job-', '');
  return until(
    async () => (await w.jobs()).find((j) => j.id === id && j.state === 'RUNNING')?.nodes,
    30_000,
    `the node of job ${id}`,
  );
}

describe('slurm backend under failures', () => {
  test(
    'a slurmd killed under a running container: retried, completes once',
    { timeout: 240_000 },
    async () => {
      const d = await w.dispatcher({ tag: 'nodekill' });
      try {
        const { request, container } = await submit(w, {
          name: 'survivor',
          command: ['/bin/sh', '-c', 'echo attempt; sleep 8; echo done'],
        });
        const first = await w.container(container, (c) => c.state === 'Running', 60_000, 'running');
        const node = await nodeOf(first);
        await w.cluster.killNode(node);
        // As on a machine that died, nothing of the container is left on this host: not its cgroup.
        const groups = await containerCgroup(await probeCgroups(), container).dirs();
        expect(groups.filter((d) => existsSync(d))).toEqual([]);
        const c1 = await w.container(
          container,
          (c) => c.state === 'Cancelled',
          120_000,
          'cancelled after its node died',
        );
        expect(c1.failure_class).toBe('temp');
        expect(c1.runtime_status).toMatch(/SLURM job \d+ (ended: NODE_FAIL|is gone)|sent no ping/);
        await w.cluster.startNode(node);
        const req = await until(
          async () => {
            const r = await w.api<RequestView>('GET', `/v1/requests/${request}`);
            return r.state === 'Final' ? r : null;
          },
          180_000,
          'the request to finish',
        );
        expect(req).toMatchObject({ outcome: 'success', temp_failures: 1 });
        const all = await containersOf(request);
        expect(all.map((c) => c.state).sort()).toEqual(['Cancelled', 'Complete']);
        const done = all.find((c) => c.state === 'Complete')!;
        const logs = await w.api<{ items: { data: string }[] }>('GET', `/v1/containers/${done.id}/logs`);
        expect(logs.items.map((l) => l.data).join('')).toBe('attempt\ndone\n');
      } finally {
        await d.stop();
      }
    },
  );

  test(
    `${MANY} containers of mixed sizes and priorities through berth submit, one slurmd kill and one dispatcher SIGKILL`,
    { timeout: 1_800_000 },
    async () => {
      let d = w.dispatcherProcess({ tag: 'many' });
      // Sizes that fit: small (1 CPU, 1 GiB) takes the first three, only big (2 CPUs, 3 GiB) the last.
      const sizes = [
        ['0.5', '64MiB'],
        ['1', '128MiB'],
        ['1', '512MiB'],
        ['2', '1GiB'],
      ] as const;
      const submitted: string[] = [];
      let next = 0;
      const submitter = async () => {
        while (next < MANY) {
          const i = next++;
          const [cpus, ram] = sizes[i % sizes.length]!;
          const r = await w.cli([
            'submit',
            '--json',
            '--name',
            `many-${i}`,
            '--cpus',
            cpus,
            '--ram',
            ram,
            '--priority',
            String(100 + (i % 7) * 100),
            '--',
            '/bin/sh',
            '-c',
            `echo start ${i}; sleep 0.${i % 5}; echo end ${i}`,
          ]);
          if (r.code !== 0) throw new Error(`berth submit: ${r.stderr}`);
          submitted[i] = (JSON.parse(r.stdout) as { id: string }).id;
        }
      };
      const submitting = Promise.all(Array.from({ length: 4 }, submitter));
      const finished = async () =>
        (await w.api<{ items: unknown[] }>('GET', '/v1/requests?name=many-&state=Final&limit=1000')).items
          .length;

      // A node dies under running work, and comes back.
      await until(
        async () => (await finished()) >= Math.min(40, MANY / 4),
        600_000,
        'a first part to finish',
      );
      // A container that runs for a while, submitted now at the top priority: its node is killed as soon
      // as it runs (no timing window to catch among the short ones, whatever the machine's speed).
      const s = await w.cli([
        'submit',
        '--json',
        '--name',
        'struck',
        '--cpus',
        '0.5',
        '--ram',
        '64MiB',
        '--priority',
        '1000',
        '--',
        '/bin/sh',
        '-c',
        'echo start struck; sleep 20; echo end struck',
      ]);
      if (s.code !== 0) throw new Error(`berth submit: ${s.stderr}`);
      const struckId = (JSON.parse(s.stdout) as { id: string }).id;
      const struck = await until(
        async () => {
          const page = await w.api<{ items: ContainerView[] }>(
            'GET',
            '/v1/containers?state=Running&limit=1000',
          );
          return page.items.find((c) => c.request_id === struckId);
        },
        300_000,
        'the long container to run',
      );
      const victim = await nodeOf(struck);
      await w.cluster.killNode(victim);
      await new Promise((r) => setTimeout(r, 2000));
      await w.cluster.startNode(victim);

      // The dispatcher dies (SIGKILL: no release, an sbatch may be in flight) and is started again.
      await until(async () => (await finished()) >= Math.min(120, MANY / 2), 900_000, 'half to finish');
      d.child.kill('SIGKILL');
      await d.exited;
      const before = d.output();
      d = w.dispatcherProcess({ tag: 'many' });

      await submitting;
      await until(async () => (await finished()) === MANY, 1_200_000, `all ${MANY} requests to finish`);
      await until(
        async () => (await w.api<RequestView>('GET', `/v1/requests/${struckId}`)).state === 'Final',
        300_000,
        'the struck request to finish',
      );
      expect(d.output()).not.toMatch(/pass failed/);

      // Nothing submitted twice: one SLURM job per container (finished jobs stay listed for this file).
      const jobs = await w.jobs();
      const twice = await submittedTwice(jobs);
      if (twice.length > 0) console.error(`first dispatcher:\n${before}\nsecond dispatcher:\n${d.output()}`);
      expect(twice).toEqual([]);
      // A job ends a moment after its container's last report (the one-shot agent exits, slurmstepd ends it).
      await until(
        async () => (await w.jobs()).every((j) => !(j.name.startsWith('c-') && isLive(j))),
        60_000,
        'every container job to end',
      ).catch(() => {});
      expect((await w.jobs()).filter((j) => j.name.startsWith('c-') && isLive(j))).toEqual([]);

      let retried = 0;
      let resubmitted = 0;
      for (let i = 0; i < MANY; i++) {
        const req = await w.api<RequestView>('GET', `/v1/requests/${submitted[i]}`);
        expect(req, `many-${i}`).toMatchObject({ state: 'Final', outcome: 'success' });
        const cs = await containersOf(submitted[i]!);
        // Completes once: one Complete container; others only Cancelled (temp) by the node's death.
        const complete = cs.filter((c) => c.state === 'Complete');
        expect(complete, `many-${i}`).toHaveLength(1);
        for (const c of cs.filter((x) => x.state !== 'Complete'))
          expect(c, `many-${i}`).toMatchObject({ state: 'Cancelled', failure_class: 'temp' });
        retried += cs.length - 1;
        const c = complete[0]!;
        if (c.lock_count > 1) resubmitted++;
        expect(c.exit_code).toBe(0);
        expect(c.usage, `many-${i} usage`).not.toBeNull();
        expect(c.usage!.wall_ms).toBeGreaterThan(0);
        const logs = await w.api<{ items: { data: string }[] }>('GET', `/v1/containers/${c.id}/logs`);
        expect(logs.items.map((l) => l.data).join(''), `many-${i} logs`).toBe(`start ${i}\nend ${i}\n`);
        const events = await w.api<{ items: { message: string }[] }>('GET', `/v1/containers/${c.id}/events`);
        expect(events.items.filter((e) => e.message.startsWith('Running')).length).toBe(1);
      }
      // The container running on the killed node was cancelled (temp) and retried.
      const struckReq = await w.api<RequestView>('GET', `/v1/requests/${struckId}`);
      expect(struckReq).toMatchObject({ state: 'Final', outcome: 'success' });
      expect(struckReq.temp_failures).toBeGreaterThanOrEqual(1);
      expect((await w.api<ContainerView>('GET', `/v1/containers/${struck.id}`)).failure_class).toBe('temp');
      console.log(
        `slurm ${MANY}: ${retried} container(s) retried (Running when their node died), ` +
          `${resubmitted} submitted again (their job died before the agent started them)`,
      );

      const ps = await w.cli(['ps', '--all', '--json']);
      expect(ps.code, ps.stderr).toBe(0);
      await d.stop('SIGTERM');
    },
  );
});
