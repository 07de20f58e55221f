// The cost query on hand-computed cases: an instance's cost divided among its containers by share × run
// time, windows clipping every interval, grouping, and a user's summary without the instances' side.
import { describe, expect, it } from 'vitest';
import { EC2_BILLING, PER_SECOND, type BillingRule } from '../../src/model/billing.js';
import type { Store } from '../../src/store/store.js';
import { submit, testStore } from '../helpers/store.js';

const GiB = 1024 ** 3;
const T0 = Date.parse('2026-01-01T00:00:00Z');
const at = (s: number) => new Date(T0 + s * 1000);

/** An instance record as the dispatcher's mirror writes it (1 vCPU, 2 GiB, 10 GiB scratch unless given). */
async function instance(
  store: Store,
  id: string,
  o: {
    created: number;
    ended: number | null;
    price?: number;
    type?: string;
    vcpus?: number | null;
    /** The provider's billing rule (default: per second, no minimum). */
    billing?: BillingRule;
  },
) {
  await store.ctx.pool.query(
    `INSERT INTO instances (id, cluster, dispatcher_tag, type, provider_type, price, state, idle_behavior, created_at,
       state_since, updated_at, vcpus, ram, scratch, gpus, ended_at, gone_at, billing_minimum_ms, billing_increment_ms)
     VALUES ($1, 'c', 't', $2, $2, $3, $4, 'run', $5, $5, $5, $6, $7, $8, 0, $9, $9, $10, $11)`,
    [
      id,
      o.type ?? 'small',
      o.price ?? 0.1,
      o.ended === null ? 'running' : 'gone',
      at(o.created),
      o.vcpus === undefined ? 1 : o.vcpus,
      2 * GiB,
      10 * GiB,
      o.ended === null ? null : at(o.ended),
      (o.billing ?? PER_SECOND).minimumMs,
      (o.billing ?? PER_SECOND).incrementMs,
    ],
  );
}

/** A request whose one container ran on `inst` from `start` to `end` (null: still running). */
async function ran(
  store: Store,
  inst: string,
  start: number,
  end: number | null,
  o: { owner?: string; vcpus?: number; ram?: string; name?: string; labels?: Record<string, string> } = {},
) {
  const req = await submit(store, o.owner ?? 'alice', {
    vcpus: o.vcpus ?? 0.5,
    ram: o.ram ?? '512MiB',
    name: o.name ?? '',
    labels: o.labels ?? {},
  });
  await store.ctx.pool.query(
    `UPDATE containers SET state = $5, instance_id = $2, started_at = $3, finished_at = $4 WHERE id = $1`,
    [req.container_id, inst, at(start), end === null ? null : at(end), end === null ? 'Running' : 'Complete'],
  );
  return req;
}

const close = (x: number, y: number) => expect(x).toBeCloseTo(y, 9);

describe('cost attribution', () => {
  it('divides an instance among its containers by share × run time, boot and idle included', async () => {
    const { store, clock } = await testStore();
    // Boots 30 s, c1 (share 0.5) runs an hour, c2 (0.5 CPU, 1 GiB: share 0.5) half an hour beside it,
    // then 60 s idle: 3690 s at 0.1/h.
    await instance(store, 'i-1', { created: 0, ended: 3690 });
    const r1 = await ran(store, 'i-1', 30, 3630);
    const r2 = await ran(store, 'i-1', 1830, 3630, { ram: '1GiB' });
    clock.set(at(7200));
    const instCost = (0.1 * 3690) / 3600;
    const [c1] = await store.costs.ofRequest(r1.id);
    const [c2] = await store.costs.ofRequest(r2.id);
    // weights 0.5 × 3600 and 0.5 × 1800: two thirds and one third of the instance
    close(c1!.cost, (instCost * 2) / 3);
    close(c2!.cost, instCost / 3);
    close(c1!.direct, 0.1 * 0.5);
    close(c2!.direct, 0.1 * 0.5 * 0.5);
    close(c1!.overhead + c2!.overhead, instCost - 0.075);
    expect(c1!.share).toBe(0.5);
    expect(c1!.run_seconds).toBe(3600);

    const all = await store.costs.summary({ from: null }, 'owner', null);
    close(all.total, instCost);
    close(all.instances!.cost, instCost);
    expect(all.instances!.unattributed).toBe(0);
    expect(all.groups).toEqual([expect.objectContaining({ key: 'alice', containers: 2, requests: 2 })]);
  });

  it('clips every interval to the window, so each window adds up on its own', async () => {
    const { store, clock } = await testStore();
    await instance(store, 'i-1', { created: 0, ended: 3690 });
    await ran(store, 'i-1', 30, 3630);
    await ran(store, 'i-1', 1830, 3630, { ram: '1GiB' });
    clock.set(at(7200));
    const late = await store.costs.summary({ from: at(1800) }, 'owner', null);
    // The instance from 1800 to 3690; c1 weighs 0.5 × 1830, c2 0.5 × 1800.
    close(late.instances!.cost, (0.1 * 1890) / 3600);
    close(late.total, (0.1 * 1890) / 3600);
    const early = await store.costs.summary({ from: null, to: at(1800) }, 'owner', null);
    close(early.total + late.total, (0.1 * 3690) / 3600);
    // Before c2 started, c1 alone carried the instance.
    const c1Early = await store.costs.summary({ from: null, to: at(1800) }, 'request', null);
    expect(c1Early.groups).toHaveLength(1);
  });

  it('keeps what instances that ran nothing cost apart, and a live instance costs until now', async () => {
    const { store, clock } = await testStore();
    await instance(store, 'i-idle', { created: 0, ended: 600, price: 0.2, type: 'big' });
    await instance(store, 'i-live', { created: 0, ended: null });
    await ran(store, 'i-live', 100, null);
    clock.set(at(1800));
    const s = await store.costs.summary({ from: null }, 'type', null);
    close(s.instances!.unattributed, (0.2 * 600) / 3600);
    close(s.total, (0.1 * 1800) / 3600);
    close(s.total + s.instances!.unattributed, s.instances!.cost);
    expect(s.instances!.by_type.map((t) => [t.type, t.instances])).toEqual([
      ['big', 1],
      ['small', 1],
    ]);
    clock.set(at(3600));
    const later = await store.costs.summary({ from: null }, 'type', null);
    close(later.total, 0.1);
  });

  it('groups by owner, label, name series and request; a user sees only their own, without instances', async () => {
    const { store, clock } = await testStore();
    await instance(store, 'i-1', { created: 0, ended: 3600, vcpus: 4 });
    await ran(store, 'i-1', 0, 3600, { owner: 'alice', vcpus: 1, name: 'align-1', labels: { team: 'gen' } });
    await ran(store, 'i-1', 0, 3600, { owner: 'alice', vcpus: 1, name: 'align-2', labels: { team: 'gen' } });
    await ran(store, 'i-1', 0, 3600, { owner: 'bob', vcpus: 2, name: 'report', labels: { team: 'ops' } });
    clock.set(at(3600));
    const keys = async (by: Parameters<Store['costs']['summary']>[1], owner: string | null = null) =>
      (await store.costs.summary({ from: null }, by, owner)).groups.map((g) => [g.key, +g.cost.toFixed(6)]);
    expect(await keys('owner')).toEqual([
      ['alice', 0.05],
      ['bob', 0.05],
    ]);
    expect(await keys('label:team')).toEqual([
      ['gen', 0.05],
      ['ops', 0.05],
    ]);
    expect(await keys('label:none')).toEqual([['(none)', 0.1]]);
    expect(await keys('name')).toEqual([
      ['align', 0.05],
      ['report', 0.05],
    ]);
    expect((await keys('request')).length).toBe(3);
    const mine = await store.costs.summary({ from: null }, 'owner', 'bob');
    expect(mine.instances).toBeNull();
    expect(mine.groups.map((g) => g.key)).toEqual(['bob']);
    close(mine.total, 0.05);
  });

  it('bills each instance under its provider’s rule: the minimum, then whole increments', async () => {
    const { store, clock } = await testStore();
    const hourly = { minimumMs: 0, incrementMs: 3_600_000 };
    // EC2: 20 s of life are billed 60 s; 90.4 s are billed 91 s. Hourly: 3700 s are billed two hours.
    await instance(store, 'i-short', { created: 0, ended: 20, price: 0.36, billing: EC2_BILLING });
    await instance(store, 'i-frac', { created: 0, ended: 90.4, price: 0.36, billing: EC2_BILLING });
    await instance(store, 'i-hour', { created: 0, ended: 3700, price: 1, type: 'hourly', billing: hourly });
    const r = await ran(store, 'i-short', 5, 15);
    clock.set(at(10_000));
    const all = await store.costs.summary({ from: null }, 'type', null);
    close(all.instances!.cost, (0.36 * 60) / 3600 + (0.36 * 91) / 3600 + 2);
    expect(all.instances!.by_type).toEqual([
      { type: 'hourly', cost: 2, hours: 2, instances: 1 },
      {
        type: 'small',
        cost: expect.closeTo((0.36 * 151) / 3600, 9),
        hours: expect.closeTo(151 / 3600, 9),
        instances: 2,
      },
    ]);
    // The container that ran on i-short carries the whole minute: its 10 s, the boot, the idle and the padding.
    const [c] = await store.costs.ofRequest(r.id);
    close(c!.cost, (0.36 * 60) / 3600);
    close(c!.direct, (0.36 * 0.5 * 10) / 3600);
    // A window after the instance ended but inside its billed time still sees the padding.
    const padding = await store.costs.summary({ from: at(3700), to: at(10_000) }, 'type', null);
    close(padding.instances!.cost, 3500 / 3600);
    // While it lives, an instance costs until now, clipped like any window.
    await instance(store, 'i-live', { created: 9990, ended: null, price: 0.36, billing: EC2_BILLING });
    const live = await store.costs.summary({ from: at(9990) }, 'type', null);
    close(live.instances!.by_type.find((t) => t.type === 'small')!.cost, (0.36 * 10) / 3600);
  });

  it('an instance with unknown resources counts every container in full (share 1)', async () => {
    const { store, clock } = await testStore();
    await instance(store, 'i-old', { created: 0, ended: 3600, vcpus: null });
    const a = await ran(store, 'i-old', 0, 3600);
    const b = await ran(store, 'i-old', 0, 1800);
    clock.set(at(3600));
    close((await store.costs.ofRequest(a.id))[0]!.cost, (0.1 * 2) / 3);
    close((await store.costs.ofRequest(b.id))[0]!.cost, 0.1 / 3);
  });
});
