// The local cloud driver against a real API: an instance is a detached `berth agent` process (from dist/)
// that registers and runs containers; the list survives a new driver object; destroy leaves no process,
// cgroup or directory; a killed agent is listed as terminated; a spot interruption is announced then kills.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CGROUP_ROOT, cgroupAt, cgroupsUnusable, probeCgroups } from '../../src/agent/runtimes/cgroup.js';
import { isAlive, processRef } from '../../src/agent/runtimes/procfs.js';
import { LOCAL_CGROUP_PARENT, LocalDriver } from '../../src/cloud/local/driver.js';
import { CloudApiError, NotFoundError } from '../../src/cloud/errors.js';
import type { InstanceType } from '../../src/model/types.js';
import { Harness, until } from '../agent-e2e/harness.js';
import { assertBuilt } from '../helpers/cli.js';
import { itIf } from '../helpers/needs.js';

const small: InstanceType = {
  name: 'small',
  providerType: 'local.small',
  vcpus: 1,
  ram: 512 * 1024 * 1024,
  scratch: 1024 ** 3,
  gpus: 0,
  price: 0.01,
  preemptible: false,
};

let h: Harness;
let home: string;
let driver: LocalDriver;
const created: string[] = [];
let cgroups: boolean;
const cgroupsMissing = await cgroupsUnusable();

beforeAll(async () => {
  assertBuilt();
  h = await Harness.create();
  home = await h.tempDir('berth-local-home-');
  cgroups = (await cgroupsUnusable()) === null;
  driver = new LocalDriver({
    home,
    bootDelayMs: 200,
    runtime: 'process',
    agentArgs: ['--ping-wait', '2s', '--kill-grace', '1s'],
    stopGraceMs: 3000,
  });
});
afterAll(async () => {
  // Destroy whatever a failed test left, then the API, the database and the temp dirs.
  const d = new LocalDriver({ home });
  for (const id of created) await d.destroy(id).catch(() => {});
  await h?.cleanup();
});

async function boot(tags: Record<string, string> = {}) {
  const node = await h.store.nodes.create({
    cluster: 'c1',
    dispatcherTag: 't1',
    instanceId: `pending-${Math.random().toString(36).slice(2)}`,
    instanceType: small.name,
  });
  const bootData = JSON.stringify({
    api_url: h.url,
    node_id: node.node.id,
    bootstrap_secret: node.bootstrapSecret,
    instance_type: small.name,
  });
  const ci = await driver.create(small, { 'berth-cluster': 'c1', ...tags }, bootData);
  created.push(ci.id);
  return { ci, nodeId: node.node.id };
}

async function record(id: string) {
  const list = JSON.parse(await readFile(join(home, 'instances.json'), 'utf8')) as {
    instances: {
      id: string;
      process: { pid: number; startTicks: number };
      dir: string;
      cgroup: string | null;
    }[];
  };
  return list.instances.find((i) => i.id === id)!;
}

/** An instance (tagged `role`) running `sleep 1000` on the process runtime, once its run record exists. */
async function runningSleep(role: string) {
  const { ci, nodeId } = await boot({ role });
  await until(async () => (await h.store.nodes.get(nodeId)).registered_at, 30_000, 'the agent to register');
  const cid = await h.submit({ command: ['sleep', '1000'] });
  await h.assign(cid, { id: nodeId, instanceId: ci.id });
  await h.waitState(cid, ['Running']);
  const rec = await record(ci.id);
  const runJson = join(rec.dir, 'work', 'containers', cid, 'run', 'run.json');
  await until(() => existsSync(runJson), 10_000, 'run.json');
  const run = JSON.parse(await readFile(runJson, 'utf8')) as {
    shim: { pid: number; startTicks: number };
    cgroup: string | null;
  };
  return { ci, cid, rec, run };
}

describe('local driver', () => {
  it('create starts an agent that registers and runs a container; the secret is in a 0600 file', async () => {
    const { ci, nodeId } = await boot({ role: 'a' });
    expect(ci.state).toBe('pending');
    expect(ci.providerType).toBe('local.small');
    await until(async () => (await h.store.nodes.get(nodeId)).registered_at, 30_000, 'the agent to register');
    const rec = await record(ci.id);
    expect((await stat(join(rec.dir, 'bootstrap-secret'))).mode & 0o777).toBe(0o600);
    const tokenFile = join(rec.dir, 'work', 'node-token.json');
    await until(() => existsSync(tokenFile), 10_000, 'the saved node token');
    expect((await stat(tokenFile)).mode & 0o777).toBe(0o600);
    // The secret is not on any command line.
    const cmdline = await readFile(`/proc/${rec.process.pid}/cmdline`, 'utf8');
    expect(cmdline).not.toContain((await readFile(join(rec.dir, 'bootstrap-secret'), 'utf8')).trim());
    const listed = await driver.list({ role: 'a' });
    expect(listed.map((i) => [i.id, i.state])).toEqual([[ci.id, 'running']]);
    const cid = await h.submit({ command: ['sh', '-c', 'echo hello from $0'] });
    await h.assign(cid, { id: nodeId, instanceId: ci.id });
    const c = await h.waitState(cid, ['Complete', 'Cancelled'], 30_000);
    expect(c).toMatchObject({ state: 'Complete', exit_code: 0 });
    expect(await h.text(cid, 'stdout')).toBe('hello from sh\n');
    if (cgroups) {
      // The agent runs in the instance's slice, sized to the type.
      const procCg = await readFile(`/proc/${rec.process.pid}/cgroup`, 'utf8');
      expect(procCg).toMatch(new RegExp(`memory:/${LOCAL_CGROUP_PARENT}/${ci.id}`));
      const limit = await readFile(join(CGROUP_ROOT, 'memory', rec.cgroup!, 'memory.limit_in_bytes'), 'utf8');
      expect(Number(limit)).toBe(small.ram);
    }
  });

  it('the list survives a new driver object (a restarted dispatcher); setTags adds tags', async () => {
    const { ci } = await boot({ role: 'list' });
    const before = await driver.list({ role: 'list' });
    expect(before.map((i) => i.id)).toEqual([ci.id]);
    const again = new LocalDriver({ home });
    const after = await again.list({ role: 'list' });
    expect(after.map((i) => i.id)).toEqual(before.map((i) => i.id));
    await again.setTags(after[0]!.id, { idle: 'hold' });
    expect((await driver.list({ idle: 'hold' })).map((i) => i.id)).toEqual([after[0]!.id]);
    await expect(again.setTags('local-nope', {})).rejects.toBeInstanceOf(NotFoundError);
  });

  it('destroy stops the agent, kills its containers and removes cgroups and the directory', async () => {
    const { ci, cid, rec, run } = await runningSleep('b');
    const shim = run.shim;
    expect(await isAlive(shim)).toBe(true);

    await driver.destroy(ci.id);
    expect(await isAlive(rec.process)).toBe(false);
    expect(await isAlive(shim)).toBe(false);
    expect(existsSync(rec.dir)).toBe(false);
    expect(Harness.leftCgroups([cid])).toEqual([]);
    if (rec.cgroup) expect(existsSync(join(CGROUP_ROOT, 'memory', rec.cgroup))).toBe(false);
    expect((await driver.list({ role: 'b' })).map((i) => i.state)).toEqual(['terminated']);
    await driver.destroy(ci.id); // destroying a terminated instance succeeds
    await expect(driver.destroy('local-nope')).rejects.toBeInstanceOf(NotFoundError);
  });

  itIf(cgroupsMissing)(
    "containers nest in the instance's slice; destroy kills them, frozen, with no record of them left",
    async () => {
      const { ci, cid, rec, run } = await runningSleep('nest');
      // The agent read BERTH_CGROUP_PARENT: the container's group is in the slice, the agent in its leaf.
      const path = `${rec.cgroup}/containers/${cid}`;
      expect(run.cgroup).toBe(path);
      // The memory hierarchy's line on v1, the unified one on v2.
      const inGroup = (path: string) => new RegExp(`^(\\d+:memory|0:):/${path}$`, 'm');
      expect(await readFile(`/proc/${run.shim.pid}/cgroup`, 'utf8')).toMatch(inGroup(path));
      expect(await readFile(`/proc/${rec.process.pid}/cgroup`, 'utf8')).toMatch(
        inGroup(`${rec.cgroup}/agent`),
      );
      const group = cgroupAt(await probeCgroups(), path);
      const refs = (await Promise.all((await group.pids()).map(processRef))).filter((r) => r !== null);
      expect(refs.length).toBeGreaterThanOrEqual(2); // the shim, the sandbox's processes, sleep
      // The agent dies with its records (as when `berth up` stops while the instance's directory goes),
      // and the container is frozen: only the slice is left to find it by.
      process.kill(-rec.process.pid, 'SIGKILL');
      await until(async () => !(await isAlive(rec.process)), 10_000, 'the agent to die');
      await rm(join(rec.dir, 'work', 'containers'), { recursive: true, force: true });
      await group.freeze();

      await driver.destroy(ci.id);
      expect(await isAlive(run.shim)).toBe(false);
      for (const ref of refs) expect(await isAlive(ref), `pid ${ref.pid}`).toBe(false);
      expect(
        await cgroupAt(await probeCgroups(), rec.cgroup!)
          .dirs()
          .then((d) => d.filter(existsSync)),
      ).toEqual([]);
    },
  );

  it('an instance whose machine died (its boot wrapper killed) is listed as terminated and cleaned up', async () => {
    const { ci, nodeId } = await boot({ role: 'c' });
    await until(async () => (await h.store.nodes.get(nodeId)).registered_at, 30_000, 'the agent to register');
    const rec = await record(ci.id);
    process.kill(rec.process.pid, 'SIGKILL');
    await until(
      async () => (await driver.list({ role: 'c' }))[0]?.state === 'terminated',
      10_000,
      'terminated',
    );
    expect(existsSync(rec.dir)).toBe(false);
  });

  it('an agent that dies is started again on its instance, re-attaches, and reports its container once', async () => {
    const { ci, nodeId } = await boot({ role: 'restart' });
    await until(async () => (await h.store.nodes.get(nodeId)).registered_at, 30_000, 'the agent to register');
    const cid = await h.submit({ command: ['sh', '-c', 'sleep 2; echo survived'] });
    const [lock] = await h.store.containers.lock([cid], 'd-restart');
    await h.store.containers.assign(cid, 'd-restart', ci.id, nodeId);
    await until(async () => (await h.store.containers.get(cid)).state === 'Running', 20_000, 'Running');
    const rec = await record(ci.id);
    // Running is recorded before the runtime starts the process; killing the agent in between is the
    // other path (cancelled temp, retried). This test is about re-attaching: wait for the runtime's record.
    const runJson = join(rec.dir, 'work', 'containers', cid, 'run', 'run.json');
    await until(async () => existsSync(runJson), 20_000, 'the runtime to record the container');
    const agentPid = Number(
      execFileSync('pgrep', ['-P', String(rec.process.pid)], { encoding: 'utf8' })
        .trim()
        .split('\n')[0],
    );
    process.kill(agentPid, 'SIGKILL');
    await until(
      async () => (await h.store.containers.get(cid)).state === 'Complete',
      60_000,
      'the container to complete',
    );
    const c = await h.store.containers.get(cid);
    expect(c.exit_code).toBe(0);
    expect((await h.store.logs.read(cid)).map((l) => l.data).join('')).toBe('survived\n');
    expect((await driver.list({ role: 'restart' }))[0]?.state).toBe('running');
    expect(lock).toBeDefined();
  });

  it('a spot interruption is announced, then kills the instance', async () => {
    const { ci, nodeId } = await boot({ role: 'd' });
    await until(async () => (await h.store.nodes.get(nodeId)).registered_at, 30_000, 'the agent to register');
    const rec = await record(ci.id);
    const interrupted = driver.interrupt(ci.id, 500);
    await until(async () => (await driver.list({ role: 'd' }))[0]?.interruptionNotice, 5000, 'the notice');
    await interrupted;
    expect(await isAlive(rec.process)).toBe(false);
    expect((await driver.list({ role: 'd' }))[0]?.state).toBe('terminated');
  });

  it('two driver objects creating at once lose no instance (locked read-modify-write)', async () => {
    const a = new LocalDriver({ home, bootDelayMs: 600_000, cgroups: false });
    const b = new LocalDriver({ home, bootDelayMs: 600_000, cgroups: false });
    const boot = JSON.stringify({
      api_url: h.url,
      node_id: 'n-none',
      bootstrap_secret: 'bs_none',
      instance_type: small.name,
    });
    const made = await Promise.all(
      Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).create(small, { role: 'e' }, boot)),
    );
    created.push(...made.map((m) => m.id));
    const listed = await new LocalDriver({ home }).list({ role: 'e' });
    expect(listed.map((i) => i.id).sort()).toEqual(made.map((m) => m.id).sort());
    expect(listed.every((i) => i.state === 'pending')).toBe(true); // still in their boot delay
    await Promise.all(made.map((m, i) => (i % 2 ? b : a).destroy(m.id)));
    expect((await a.list({ role: 'e' })).every((i) => i.state === 'terminated')).toBe(true);
    for (const m of made) expect(existsSync(join(home, 'instances', m.id))).toBe(false);
  });

  it('refuses boot data without what the agent needs', async () => {
    const err = await driver.create(small, {}, JSON.stringify({ api_url: h.url })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CloudApiError);
    expect((err as CloudApiError).retryable).toBe(false);
    expect((err as Error).message).toMatch(/boot data: node_id: /);
  });
});
