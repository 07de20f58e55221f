// `berth agent --once CONTAINER`, the one-shot agent a SLURM job runs (docs/SLURM.md): the secret on stdin,
// one container run and reported, its work dir removed, no token on disk; nothing to run when the container
// is not assigned to its node; SIGTERM (SLURM ending the job) stops the container and reports it cancelled
// (temp), so that it is retried. BIN runs the agent from the one-file bundle of `npm run build`
// (scripts/bundle-agent.mjs), as a SLURM job does.
import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_PROBE_FILE } from '../../src/agent/agent.js';
import { cgroupsUnusable } from '../../src/agent/runtimes/cgroup.js';
import { parseSlurmConfig } from '../../src/backends/slurm/config.js';
import { recordAllocations } from '../../src/backends/slurm/queue.js';
import { allocationOf } from '../../src/backends/slurm/sbatch.js';
import { assertBuilt, BIN, ROOT } from '../helpers/cli.js';
import { itIf } from '../helpers/needs.js';
import { Harness, until } from './harness.js';

const cgroupsMissing = await cgroupsUnusable();

let h: Harness;

beforeAll(async () => {
  assertBuilt();
  h = await Harness.create();
});
afterAll(async () => {
  await h?.cleanup();
});

/** The one-shot agent as a SLURM job starts it: the secret on stdin. */
function once(
  node: { id: string; workDir: string; secret: string },
  container: string,
  extra: string[] = [],
) {
  const child = spawn(
    process.execPath,
    [
      BIN,
      'agent',
      '--once',
      container,
      '--api-url',
      h.url,
      '--node-id',
      node.id,
      '--work-dir',
      node.workDir,
      '--runtime',
      'process',
      '--kill-grace',
      '1s',
      '--bootstrap-secret-file',
      '-',
      ...extra,
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  child.stdin.end(`${node.secret}\n`);
  const exited = new Promise<number>((r) => child.on('exit', (code) => r(code ?? -1)));
  return { child, exited, output: () => output };
}

describe('berth agent --once', () => {
  it('runs its one container, reports it, removes its work dir and exits; the token never touches disk', async () => {
    const node = await h.node();
    const cid = await h.submitAndAssign(node, { command: ['sh', '-c', 'echo hello; exit 4'] });
    const a = once(node, cid, ['--log-level', 'info']);
    const seen = new Set<string>();
    // While it runs, its work dir holds no token file.
    const watch = setInterval(() => {
      if (existsSync(`${node.workDir}/node-token.json`)) seen.add('token');
    }, 5);
    try {
      expect(await a.exited, a.output()).toBe(0);
    } finally {
      clearInterval(watch);
    }
    const c = await h.store.containers.get(cid);
    expect(c).toMatchObject({ state: 'Complete', exit_code: 4 });
    expect(await h.text(cid, 'stdout')).toBe('hello\n');
    expect(existsSync(node.workDir)).toBe(false);
    expect(seen.has('token')).toBe(false);
    // The passed sandbox probe outlives the job, for the node's next one (test/agent/probe-cache.test.ts).
    expect(existsSync(join(dirname(node.workDir), SANDBOX_PROBE_FILE))).toBe(true);
    // No opportunistic containers on SLURM: no pressure watcher probing and sampling cgroups.
    expect(a.output()).not.toContain('pressure watcher');
    // Its container was started by the registration's answer: no first ping, no start report.
    const lines = a
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'));
    const registered = lines.map((l) => JSON.parse(l) as { msg?: string; started?: string[] });
    expect(registered.find((l) => l.msg === 'registered')?.started, a.output()).toEqual([cid]);
    expect(a.output()).not.toContain('start already recorded');
  });

  it('exits at once when its container is not assigned to its node (cancelled or given back)', async () => {
    const node = await h.node();
    const cid = await h.submit({ command: ['true'] });
    const a = once(node, cid);
    expect(await a.exited).toBe(0);
    const said = a
      .output()
      .split('\n')
      .find((l) => l.includes('not assigned to this node'));
    expect(said, a.output()).toBeDefined();
    expect(said).toContain(cid);
    expect((await h.store.containers.get(cid)).state).toBe('Queued');
  });

  it('SIGTERM stops the container and reports it cancelled (temp): it is retried', async () => {
    const node = await h.node();
    const cid = await h.submitAndAssign(node, { command: ['sh', '-c', 'echo up; sleep 60'] });
    const a = once(node, cid);
    await h.waitState(cid, ['Running']);
    await until(async () => (await h.text(cid, 'stdout')) === 'up\n', 10_000, 'the container to print');
    a.child.kill('SIGTERM');
    expect(await a.exited, a.output()).toBe(0);
    const c = await h.store.containers.get(cid);
    expect(c).toMatchObject({
      state: 'Cancelled',
      failure_class: 'temp',
      runtime_status: 'SIGTERM: the SLURM job is ending',
    });
    const req = await h.store.requests.get(c.request_id, null);
    expect(req.container_id).not.toBe(cid);
    expect((await h.store.containers.get(req.container_id!)).state).toBe('Queued');
    expect(existsSync(node.workDir)).toBe(false);
  });

  it('with allocation reuse: runs the next container its allocation fits, then exits; the superseded job’s agent exits at once', async () => {
    // Placed as the slurm dispatcher places them: locked by cluster/tag, nodes bound to jobs, allocations
    // recorded (1 CPU each, from the sbatch options' owner).
    const cfg = parseSlurmConfig({ cluster: 'c1', tag: 't1' });
    const place = async (job: string, command: string[], priority: number) => {
      const node = await h.node(`slurm-job-${job}`);
      const id = await h.submit({ command, priority });
      const spec = {
        id,
        vcpus: 1,
        ram: 64 * 2 ** 20,
        scratch: 0,
        gpus: 0,
        instanceTypes: null,
        maxRunTimeMs: null,
      };
      const a = allocationOf(spec, cfg);
      if (!a.ok) throw new Error(a.reason);
      await recordAllocations(h.store.ctx.pool, [{ node: node.id, allocation: a.allocation }], cfg);
      expect(await h.store.containers.lock([id], 'c1/t1')).toHaveLength(1);
      await h.store.containers.assign(id, 'c1/t1', node.instanceId, node.id);
      return { node, id };
    };
    const first = await place('901', ['sh', '-c', 'echo first'], 500);
    const next = await place('902', ['sh', '-c', 'echo next; exit 2'], 500);
    const a = once(first.node, first.id, ['--log-level', 'info']);
    expect(await a.exited, a.output()).toBe(0);
    expect(await h.store.containers.get(first.id)).toMatchObject({ state: 'Complete', exit_code: 0 });
    // The next one ran in the same job, with its logs and exit, reported with its new token.
    expect(await h.store.containers.get(next.id)).toMatchObject({
      state: 'Complete',
      exit_code: 2,
      node_id: first.node.id,
      instance_id: 'slurm-job-901',
    });
    expect(await h.text(next.id, 'stdout')).toBe('next\n');
    expect(a.output()).toContain("the next container, in this job's allocation");
    expect(existsSync(first.node.workDir)).toBe(false);
    // Its own job started anyway: its agent finds the container gone and exits 0 at once, changing nothing.
    const late = once(next.node, next.id);
    expect(await late.exited, late.output()).toBe(0);
    expect(late.output()).toContain('not assigned to this node');
    expect((await h.store.containers.get(next.id)).state).toBe('Complete');
  });

  it('runs from the bundle: npm run build made it after tsc, so bin/berth.js picks it', () => {
    const mtime = (rel: string) => statSync(join(ROOT, 'dist', rel)).mtimeMs;
    expect(mtime('agent-main.bundle.js')).toBeGreaterThanOrEqual(mtime('src/cli/agent-main.js'));
  });

  itIf(cgroupsMissing)(
    'the hard ram limit, the OOM report, usage and the log arrive as from any agent',
    async () => {
      const node = await h.node();
      const cid = await h.submitAndAssign(node, {
        command: ['sh', '-c', 'echo big; head -c 300m /dev/zero | tail; echo "survived $?"; exit 5'],
        ram: '64MiB',
      });
      const a = once(node, cid);
      expect(await a.exited, a.output()).toBe(0);
      const c = await h.store.containers.get(cid);
      expect(c).toMatchObject({ state: 'Complete', exit_code: 5, oom_killed: true });
      expect(c.usage!.wall_ms).toBeGreaterThan(0);
      expect(c.usage!.cpu_seconds).toBeGreaterThan(0);
      // tail held up to the limit before it was killed.
      expect(c.usage!.peak_ram).toBeGreaterThan(32 * 2 ** 20);
      expect(c.usage!.peak_ram).toBeLessThanOrEqual(64 * 2 ** 20);
      expect(await h.text(cid, 'stdout')).toBe('big\nsurvived 137\n');
      expect(await h.text(cid, 'system')).toBe(
        'berth: the container was killed: out of memory (its ram limit)\n',
      );
    },
  );

  it('--once takes a container id', async () => {
    const node = await h.node();
    const a = once(node, 'not-an-id');
    expect(await a.exited).toBe(2);
    expect(a.output()).toContain('once (from --once): expected a container id (c-…), got "not-an-id"');
  });
});
