// The dispatcher against a real PostgreSQL queue and the sim cloud on a virtual clock.
import { describe, expect, it } from 'vitest';
import type { AssignItem } from '../../src/dispatch/ports.js';
import { ConflictError } from '../../src/store/errors.js';
import { harness } from './harness.js';

describe('dispatcher', () => {
  it('creates the cheapest instance, places the containers once the agent registers, and shuts it down when idle', async () => {
    // idle_timeout 30 s: the 2 arrivals of the last minute make one more likely within it (kept warm).
    const h = await harness({ config: { idleTimeoutMs: 30_000 } });
    const d = h.make();
    const ids = await h.submit({ vcpus: 0.5, ram: '512MiB' }, { vcpus: 0.5, ram: '512MiB' });
    await h.pass(d);
    expect(h.cloud.live).toBe(1);
    const created = h.events.filter((e) => e.kind === 'instance-created');
    expect(created).toMatchObject([{ type: 'small' }]);
    expect(await Promise.all(ids.map(h.state))).toEqual(['Locked', 'Locked']);

    await h.advance(30_000); // boots; the agent registers
    await h.pass(d);
    expect(h.events.some((e) => e.kind === 'instance-ready')).toBe(true);
    expect(h.events.filter((e) => e.kind === 'container-placed')).toHaveLength(2);
    await h.pingAll();
    expect(await Promise.all(ids.map(h.state))).toEqual(['Running', 'Running']);

    await h.finishAll(0);
    await h.pass(d);
    expect(h.cloud.live).toBe(1); // idle, but kept warm for a likely arrival
    await h.advance(61_000);
    await h.pingAll();
    await h.pass(d);
    expect(h.events.filter((e) => e.kind === 'instance-shutdown')).toHaveLength(1);
    expect(h.cloud.live).toBe(0);
    await h.advance(120_000);
    await h.pass(d);
    expect(d.instances.size).toBe(0);
    expect(h.events.filter((e) => e.kind === 'error')).toEqual([]);
  });

  it('share_rule expected: the containers a batch instance was created for start on it once it is ready', async () => {
    // Four 1-vcpu containers get one big instance (batch_packing boots). Once ready and still empty, its
    // expected share is its whole price (0.4/h > 1.5 × 0.1/h): the dispatcher must tell the scheduler
    // whom it was created for, or they refuse it and get more instances.
    const h = await harness({ config: { shareRule: 'expected', batchPacking: 'boots' } });
    const d = h.make();
    const spec = { vcpus: 1, ram: '512MiB' };
    const ids = await h.submit(spec, spec, spec, spec);
    await h.pass(d);
    expect(h.events.filter((e) => e.kind === 'instance-created')).toMatchObject([{ type: 'big' }]);
    await h.advance(30_000); // boots; the agent registers
    await h.pass(d);
    await h.pingAll();
    expect(await Promise.all(ids.map(h.state))).toEqual(['Running', 'Running', 'Running', 'Running']);
    expect(h.cloud.live).toBe(1);
    expect(h.events.filter((e) => e.kind === 'instance-created')).toHaveLength(1);
  });

  it('a restarted dispatcher adopts its instances from the cloud list and creates nothing twice', async () => {
    // Two instances, one per container: the share rule (the 1-vcpu container's share of the big type is
    // its small type's price) and batch packing would otherwise put both on one.
    const h = await harness({ config: { batchPacking: 'off', shareRule: 'price' } });
    const d1 = h.make();
    const ids = await h.submit({ vcpus: 1, ram: '1GiB' }, { vcpus: 3, ram: '8GiB' });
    await h.pass(d1);
    expect(h.cloud.live).toBe(2);
    await h.advance(30_000);
    await h.pass(d1);
    await h.pingAll();
    expect(await Promise.all(ids.map(h.state))).toEqual(['Running', 'Running']);
    // "kill -9": a new dispatcher object with nothing in memory
    const d2 = h.make();
    await h.pass(d2);
    expect(h.cloud.live).toBe(2);
    expect(h.events.filter((e) => e.kind === 'instance-created')).toHaveLength(2);
    expect([...d2.instances.values()].map((i) => i.state).sort()).toEqual(['running', 'running']);
    await h.finishAll(0);
    for (const id of ids) expect(await h.state(id)).toBe('Complete');
  });

  it('a node that stops pinging is failed: its container is retried elsewhere and its instance destroyed', async () => {
    const h = await harness();
    const { d, id, agent: first } = await h.oneRunning();
    h.agents.delete(first.instanceId); // the agent goes silent
    await h.advance(61_000);
    await h.pass(d);
    expect(h.events.filter((e) => e.kind === 'node-lost')).toHaveLength(1);
    const c = await h.store.containers.get(id);
    expect(c).toMatchObject({ state: 'Cancelled', failure_class: 'temp' });
    const req = await h.store.requests.get(c.request_id);
    expect(req.container_id).not.toBe(id);
    expect(h.cloud.get(first.instanceId)!.state).toBe('terminated');
    // the retry runs on a new instance after its backoff
    await h.advance(30_000);
    await h.pass(d);
    await h.advance(30_000);
    await h.pass(d);
    await h.pingAll();
    expect(await h.state(req.container_id!)).toBe('Running');
    // the old agent's late report is refused: its per-lock token was revoked when the node failed
    const late = await h.store.containers
      .complete(id, first.nodeId, first.running.get(id)!, { exitCode: 0, oomKilled: false, usage: null })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(late).toBeInstanceOf(ConflictError);
    expect((late as Error).message).toMatch(
      /^stale lock token for container \S+: it was unlocked, cancelled/,
    );
    expect(await h.store.containers.get(id)).toMatchObject({ state: 'Cancelled', failure_class: 'temp' });
  });

  it('an unsatisfiable container is cancelled perm with the reason', async () => {
    const h = await harness();
    const d = h.make();
    const [id] = await h.submit({ vcpus: 1, ram: '64GiB' });
    await h.pass(d);
    const c = await h.store.containers.get(id!);
    expect(c).toMatchObject({ state: 'Cancelled', failure_class: 'perm' });
    expect(c.runtime_status).toMatch(/64GiB.*16GiB/);
    expect(h.cloud.live).toBe(0);
  });

  it('a capacity error on one type does not block others, and the statuses say why containers wait', async () => {
    const h = await harness({ cloud: { capacityErrorRate: { big: 1 } } });
    const d = h.make();
    const [bigId, smallId] = await h.submit(
      { vcpus: 3, ram: '8GiB', priority: 900 },
      { vcpus: 1, ram: '1GiB', priority: 100 },
    );
    await h.pass(d);
    await h.pass(d);
    expect(h.events.filter((e) => e.kind === 'create-failed').length).toBeGreaterThanOrEqual(1);
    expect(await h.state(smallId!)).toBe('Locked');
    expect(h.cloud.live).toBe(1);
    expect(await h.status(bigId!)).toMatch(/big/);
  });
});

describe('dispatcher and cloud failures', () => {
  it('a failed list does not stop the pass; a failed destroy is retried after shutdown_retry, a successful one is not repeated', async () => {
    const { CloudApiError } = await import('../../src/cloud/errors.js');
    const h = await harness();
    const d = h.make();
    await h.submit({ vcpus: 1, ram: '1GiB' });
    h.cloud.controls.failNext('list', new CloudApiError('list is down'));
    await h.pass(d); // the first pass syncs: the list fails, the pass still creates
    expect(
      h.events.filter((e) => e.kind === 'error' && e.op === 'list'),
      JSON.stringify(h.events),
    ).toHaveLength(1);
    expect(h.cloud.live).toBe(1);
    await h.advance(30_000);
    await h.pass(d);
    await h.pingAll();
    await h.finishAll(0);
    h.cloud.controls.failNext('destroy', new CloudApiError('destroy refused'));
    await h.pass(d); // idle, and no arrival is likely to use it: shutdown at once, destroy fails
    expect(h.events.filter((e) => e.kind === 'error' && e.op === 'destroy')).toHaveLength(1);
    expect(h.cloud.live).toBe(1);
    await h.advance(2_000);
    await h.pass(d); // before shutdown_retry (5 s): no new attempt
    expect(h.cloud.controls.count('destroy')).toBe(1);
    await h.advance(4_000);
    await h.pass(d); // retried and succeeds
    expect(h.cloud.controls.count('destroy')).toBe(2);
    expect(h.cloud.live).toBe(0);
    await h.advance(10_000);
    await h.pass(d);
    await h.advance(10_000);
    await h.pass(d);
    expect(h.cloud.controls.count('destroy')).toBe(2);
  });
});

describe('spot interruption', () => {
  it('an interruption notice drains the instance; when the cloud reclaims it, its container is retried (temp) elsewhere', async () => {
    const h = await harness({ config: { maxContainersPerInstance: 1 } });
    const d = h.make();
    const [first] = await h.submit({ vcpus: 1, ram: '1GiB', preemptible: true });
    await h.pass(d);
    await h.advance(30_000);
    await h.pass(d);
    await h.pingAll();
    expect(await h.state(first!)).toBe('Running');
    const [spot] = [...h.agents.values()];
    h.cloud.interrupt(spot!.instanceId, 120_000);
    await h.advance(10_000); // past sync_interval: the dispatcher sees the notice
    await h.pass(d);
    expect(h.events.filter((e) => e.kind === 'instance-interrupted')).toHaveLength(1);
    expect(d.instances.get(spot!.instanceId)!.idleBehavior).toBe('drain');
    // new work does not go to the draining instance
    const [second] = await h.submit({ vcpus: 1, ram: '1GiB', preemptible: true });
    await h.pass(d);
    expect(h.events.filter((e) => e.kind === 'instance-created')).toHaveLength(2);
    await h.advance(111_000); // reclaimed
    await h.pass(d);
    const c = await h.store.containers.get(first!);
    expect(c).toMatchObject({ state: 'Cancelled', failure_class: 'temp' });
    const req = await h.store.requests.get(c.request_id);
    expect(req).toMatchObject({ state: 'Committed', temp_failures: 1, attempts: 0 });
    // the retry and the second container run to completion on other instances
    for (let i = 0; i < 6; i++) {
      await h.advance(30_000);
      await h.pass(d);
      await h.pingAll();
      await h.finishAll(0);
    }
    expect((await h.store.requests.get(c.request_id)).outcome).toBe('success');
    expect(await h.state(second!)).toBe('Complete');
  });
});

describe('dispatcher batches', () => {
  it('one batched call per kind: a refused item is reported and does not stop the others', async () => {
    const h = await harness();
    const calls: string[] = [];
    let refuse: string | null = null;
    // The real queue, recording its calls, with a concurrent change taking one container away first.
    const queue = new Proxy(h.queue, {
      get(target, key, receiver) {
        const v = Reflect.get(target, key, receiver) as unknown;
        if (typeof v !== 'function') return v;
        return async (...args: unknown[]) => {
          if (key === 'assign' && refuse !== null)
            await h.store.containers.cancel(refuse, { kind: 'system' }, 'perm', 'taken meanwhile');
          if (key === 'lock' || key === 'assign')
            calls.push(`${String(key)}(${(args[0] as unknown[]).length})`);
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const d = h.make({ queue });
    const ids = await h.submit(
      { vcpus: 0.25, ram: '256MiB' },
      { vcpus: 0.25, ram: '256MiB' },
      { vcpus: 0.25, ram: '256MiB' },
    );
    await h.pass(d);
    await h.advance(30_000);
    refuse = ids[1]!;
    await h.pass(d);
    expect(calls).toEqual(['lock(3)', 'assign(3)']);
    expect(
      h.events
        .filter((e) => e.kind === 'container-placed')
        .map((e) => (e as { container: string }).container)
        .sort(),
    ).toEqual([ids[0], ids[2]].sort());
    expect(h.events.filter((e) => e.kind === 'error')).toMatchObject([
      { op: 'start', container: ids[1], errorClass: 'QueueRefusal' },
    ]);
    await h.pingAll();
    expect(await Promise.all(ids.map(h.state))).toEqual(['Running', 'Cancelled', 'Running']);
  });

  it('what a pass locks for a ready instance is locked and assigned in one call, with the same outcome as lock then assign', async () => {
    const run = async (combined: boolean) => {
      const h = await harness();
      const calls: string[] = [];
      // The real queue, recording its calls; when not `combined`, its lockAssign is the old path: lock,
      // then assign what was locked (two calls).
      const queue: typeof h.queue = new Proxy(h.queue, {
        get(target, key, receiver) {
          if (key === 'lockAssign' && !combined)
            return async (items: AssignItem[], d: string) => {
              const got = new Set(
                await queue.lock(
                  items.map((it) => it.id),
                  d,
                ),
              );
              await queue.assign(
                items.filter((it) => got.has(it.id)),
                d,
              );
              return [...got];
            };
          const v = Reflect.get(target, key, receiver) as unknown;
          if (typeof v !== 'function') return v;
          return (...args: unknown[]) => {
            if (key === 'lock' || key === 'assign' || key === 'lockAssign')
              calls.push(`${String(key)}(${(args[0] as unknown[]).length})`);
            return (v as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      });
      const d = h.make({ queue });
      const shape = { vcpus: 0.25, ram: '256MiB' };
      await h.submit(shape);
      await h.pass(d);
      await h.advance(30_000);
      await h.pass(d);
      await h.pingAll(); // the instance is ready and runs one container
      calls.length = 0;
      const ids = await h.submit(shape, shape);
      await h.pass(d);
      const placed = h.events
        .filter((e) => e.kind === 'container-placed')
        .map((e) => (e as { container: string }).container);
      await h.pingAll();
      const events = await Promise.all(
        ids.map(async (id) =>
          (await h.store.containerList.events(id)).map(
            (e) => `${e.kind}: ${e.message.replace(/n-[0-9a-z]{16}/g, 'n')}`,
          ),
        ),
      );
      return {
        calls,
        placed: placed.slice(-2).sort(),
        ids: [...ids].sort(),
        states: await Promise.all(ids.map(h.state)),
        events,
      };
    };
    const one = await run(true);
    expect(one.calls).toEqual(['lockAssign(2)']);
    expect(one.placed).toEqual(one.ids);
    expect(one.states).toEqual(['Running', 'Running']);
    const two = await run(false);
    expect(two.calls).toEqual(['lock(2)', 'assign(2)']);
    // The same container events in the same order (berth show), the same states.
    expect(one.events).toEqual(two.events);
    expect(one.events[0]!.slice(0, 3)).toEqual([
      'state: Queued: submitted',
      'state: Locked by dispatcher c1/t1',
      'assign: assigned to instance sim-1 (node n)',
    ]);
    expect(two.states).toEqual(one.states);
  });
});
