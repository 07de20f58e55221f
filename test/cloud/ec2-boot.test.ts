// The whole cloud path against the emulated EC2, with the real SDK, a real API and real processes:
// the ec2 driver creates an instance (moto), the booter runs its UserData as cloud-init would (in the
// instance's own network namespace and cgroup slice when root), the boot script starts `berth agent`
// (from dist/), which reads its instance id from the instance's IMDSv2, registers and runs a container;
// a spot interruption notice hands the running container back as a temp failure; a rebalance
// recommendation drains; terminating the instance stops every process of its machine.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { isAlive } from '../../src/agent/runtimes/procfs.js';
import type { ManualClock } from '../../src/model/clock.js';
import { CGROUP_ROOT } from '../../src/agent/runtimes/cgroup.js';
import type { Ec2Driver } from '../../src/cloud/ec2/driver.js';
import { netnsUnusable } from '../../src/cloud/local/netns.js';
import { Harness, until } from '../agent-e2e/harness.js';
import { assertBuilt, BIN } from '../helpers/cli.js';
import { itIf } from '../helpers/needs.js';
import { bootData, ec2type, ec2World, noMoto, type Ec2World } from './ec2-helpers.js';

const noNetns = noMoto ?? (await netnsUnusable());
const it = itIf(noMoto);
const itRoot = itIf(noNetns);
const small = ec2type('small', 't3.small');

let h: Harness;
let w: Ec2World;
let driver: Ec2Driver;
let relay: Server;
const sockets = new Set<Socket>();
let apiUrl = '';

beforeAll(async () => {
  if (noMoto) return;
  assertBuilt();
  h = await Harness.create();
  w = await ec2World({ boot: true, pollMs: 100 });
  // The booted agents reach the API at the emulator's host address (their namespace sees nothing else).
  relay = createServer((s) => {
    const up = connect(h.port, '127.0.0.1');
    sockets.add(s).add(up);
    s.pipe(up).pipe(s);
    const drop = () => (s.destroy(), up.destroy(), sockets.delete(s), sockets.delete(up));
    s.on('error', drop).on('close', drop);
    up.on('error', drop).on('close', drop);
  });
  const host = w.emu.hostAddr ?? '127.0.0.1';
  await new Promise<void>((r) => relay.listen(0, host, r));
  apiUrl = `http://${host}:${(relay.address() as AddressInfo).port}`;
  driver = w.driver({
    agent_install: { preinstalled: `${process.execPath} ${BIN}` },
    agent_args: ['--runtime', 'process', '--ping-wait', '2s', '--kill-grace', '1s', '--notice-poll', '200ms'],
  });
});
afterAll(async () => {
  await w?.stop();
  for (const s of sockets) s.destroy();
  await new Promise((r) => (relay ? relay.close(r) : r(null)));
  await h?.cleanup();
});

/** A node recorded as the dispatcher records one, and an instance created for it through the driver. */
async function boot(type = small) {
  const { node, bootstrapSecret } = await h.store.nodes.create({
    cluster: 'c1',
    dispatcherTag: 't1',
    instanceId: `pending-${Math.random().toString(36).slice(2)}`,
    instanceType: type.name,
  });
  const ci = await driver.create(
    type,
    { 'berth-cluster': 'c1', 'berth-tag': 't1', 'berth-node': node.id },
    bootData(node.id, apiUrl, bootstrapSecret),
  );
  await h.store.nodes.bind(node.id, ci.id);
  const registered = await until(
    async () => {
      const n = await h.store.nodes.get(node.id);
      return n.state !== 'registered' ? n : null;
    },
    60_000,
    `the agent of ${ci.id} to register`,
  );
  return { ci, node: registered };
}

/** Waits until the node reports `state`; returns its record. */
function nodeIn(id: string, state: string) {
  return until(
    async () => {
      const n = await h.store.nodes.get(id);
      return n.state === state ? n : null;
    },
    30_000,
    `node ${id} to be ${state}`,
  );
}

function machineGone(id: string) {
  return until(() => !w.emu.booter!.get(id), 30_000, `the machine of ${id} to stop`);
}

describe('ec2 boot path (emulated EC2)', () => {
  it('create → cloud-init script → agent registers with its instance id → runs a container → terminate stops the machine', async () => {
    const { ci, node } = await boot();
    expect(node.info).toMatchObject({ instance_id: ci.id });
    const m = w.emu.booter!.get(ci.id)!;
    expect(m.note).toBeNull();
    expect(await isAlive(m.process!)).toBe(true);
    const c = await h.submitAndAssign(
      { id: node.id, instanceId: ci.id },
      { command: ['/bin/sh', '-c', 'echo hello from $(cat /proc/self/cgroup | grep -c berth-ec2emu) slice'] },
    );
    const done = await h.waitState(c, ['Complete', 'Cancelled'], 30_000);
    expect(done).toMatchObject({ state: 'Complete', exit_code: 0 });
    expect(await h.text(c, 'stdout')).toMatch(/^hello from \d+ slice\n$/);
    await driver.destroy(ci.id);
    await machineGone(ci.id);
    expect(await isAlive(m.process!)).toBe(false);
    expect(existsSync(m.dir)).toBe(false);
  });

  itRoot(
    'as root, each machine has its own network namespace and a cgroup slice sized to its type',
    async () => {
      const { ci, node } = await boot(ec2type('large', 't3.large'));
      const m = w.emu.booter!.get(ci.id)!;
      expect(m.slots.netns).not.toBeNull();
      expect(execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })).toContain(m.slots.netns!.name);
      const mem = join(CGROUP_ROOT, 'memory', m.slots.cgroup!.path);
      expect(execFileSync('cat', [join(mem, 'memory.limit_in_bytes')], { encoding: 'utf8' }).trim()).toBe(
        String(8 * 1024 ** 3), // t3.large: 8 GiB
      );
      // The agent and what it runs are in the machine's namespace: it reaches only the routed API address.
      const c = await h.submitAndAssign(
        { id: node.id, instanceId: ci.id },
        { command: ['/bin/sh', '-c', 'readlink /proc/self/ns/net'] },
      );
      await h.waitState(c, ['Complete'], 30_000);
      const nsOfContainer = (await h.text(c, 'stdout')).trim();
      const nsOfHost = execFileSync('readlink', ['/proc/self/ns/net'], { encoding: 'utf8' }).trim();
      expect(nsOfContainer).toMatch(/^net:\[\d+\]$/);
      expect(nsOfContainer).not.toBe(nsOfHost);
      await driver.destroy(ci.id);
      await machineGone(ci.id);
      expect(execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })).not.toContain(m.slots.netns!.name);
      expect(existsSync(mem)).toBe(false);
    },
  );

  it('a spot interruption notice: the running container is handed back as a temp failure (and retried), the node drains, EC2 terminates the instance', async () => {
    const { ci, node } = await boot(ec2type('small-spot', 't3.small', { preemptible: true }));
    const c = await h.submitAndAssign({ id: node.id, instanceId: ci.id }, { command: ['sleep', '300'] });
    await h.waitState(c, ['Running'], 30_000);
    w.emu.interrupt(ci.id, 'terminate', 4000);
    const cancelled = await h.waitState(c, ['Cancelled', 'Complete'], 30_000);
    expect(cancelled).toMatchObject({ state: 'Cancelled', failure_class: 'temp' });
    expect(cancelled.runtime_status).toContain('spot interruption');
    const req = await h.store.requests.get(cancelled.request_id);
    expect(req.state).toBe('Committed'); // retried elsewhere: a new attempt waits
    expect(req.container_id).not.toBe(c);
    // The retry counts the interruption (the scheduler's on_demand_after_interruptions reads it).
    const retry = await h.store.ctx.pool.query(`SELECT spot_interruptions FROM containers WHERE id = $1`, [
      req.container_id,
    ]);
    expect(retry.rows[0].spot_interruptions).toBe(1);
    const n = await nodeIn(node.id, 'drained');
    expect(String(n.info.notice)).toContain('spot interruption');
    // EC2 reclaims it after the notice: the machine is stopped.
    await machineGone(ci.id);
    const [inst] = await w.instances([{ Name: 'instance-id', Values: [ci.id] }]);
    expect(inst!.State!.Name).toBe('terminated');
  });

  it('a rebalance recommendation drains: the running container finishes, nothing new starts', async () => {
    const { ci, node } = await boot();
    const c = await h.submitAndAssign(
      { id: node.id, instanceId: ci.id },
      { command: ['/bin/sh', '-c', 'sleep 2; echo finished'] },
    );
    await h.waitState(c, ['Running'], 30_000);
    w.emu.interrupt(ci.id, 'rebalance', 0);
    await nodeIn(node.id, 'draining');
    const done = await h.waitState(c, ['Complete', 'Cancelled'], 30_000);
    expect(done).toMatchObject({ state: 'Complete', exit_code: 0 });
    const n = await nodeIn(node.id, 'drained');
    expect(String(n.info.notice)).toContain('rebalance');
    const later = await h.submitAndAssign({ id: node.id, instanceId: ci.id }, { command: ['true'] });
    // Its agent takes no new work: after a ping that began once it had seen the start order, it is still
    // Locked (a dispatcher moves it elsewhere). The store's clock is manual: moved on, it dates that ping.
    const clock = h.store.ctx.clock as ManualClock;
    clock.advance(1000);
    const assignedAt = clock.now().getTime();
    await until(
      async () => ((await h.store.nodes.get(node.id)).last_ping_at!.getTime() >= assignedAt ? true : null),
      30_000,
      'a ping after the assignment',
    );
    expect((await h.store.containers.get(later)).state).toBe('Locked');
    await driver.destroy(ci.id);
    await machineGone(ci.id);
  });
});
