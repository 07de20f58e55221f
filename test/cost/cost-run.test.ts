// Cost accounting on a real dispatcher run: the real dispatcher, its instance records (PgMirror) and the
// store's cost query on PostgreSQL, the sim cloud on a virtual clock, agents driven by the test. What the
// containers cost adds up, to the cent, to what the instances cost, which is what the cloud billed.
import { describe, expect, it } from 'vitest';
import type { CloudInstance, Driver } from '../../src/cloud/driver.js';
import { PgMirror } from '../../src/dispatch/pg-mirror.js';
import { billedMs, billingRuleOf } from '../../src/model/billing.js';
import { seededRng } from '../../src/model/clock.js';
import { normalizeRequest } from '../../src/model/request.js';
import { agreedLabelsOf } from '../../src/store/labels.js';
import { harness, TYPES } from '../dispatcher/harness.js';

const STEP = 20_000;

describe('cost of a dispatcher run', () => {
  it('containers + unattributed = instances = the cloud bill (to the cent), with labels as instance tags', async () => {
    // The cloud bills whole minutes (billing_period): the instance records carry the rule, the query applies it.
    const billing = billingRuleOf({ minBillingPeriodMs: 0, billingPeriodMs: 60_000 });
    const h = await harness({ bootMs: 40_000, config: { billingPeriodMs: billing.incrementMs } });
    const price = new Map(TYPES.map((t) => [t.name, t.price]));
    // The bill, from the cloud's side: each instance from its create to its termination.
    const created = new Map<string, { at: number; price: number; tags: Record<string, string> }>();
    const ended = new Map<string, number>();
    h.cloud.onEvent((e) => {
      if (e.type === 'terminated') ended.set(e.id, e.at.getTime());
    });
    const driver: Driver = {
      create: async (type, tags, boot): Promise<CloudInstance> => {
        const ci = await h.cloud.create(type, tags, boot);
        created.set(ci.id, { at: h.clock.nowMs(), price: price.get(type.name)!, tags });
        return ci;
      },
      list: (f) => h.cloud.list(f),
      destroy: (id) => h.cloud.destroy(id),
      setTags: (id, t) => h.cloud.setTags(id, t),
    };
    const d = h.make({
      driver,
      mirror: new PgMirror(h.db.pool, 'c1', 't1'),
      labelsFor: (ids) => agreedLabelsOf(h.db.pool, ids),
    });

    // First a batch that agrees on team=gen (its instance is tagged so), then a seeded random stream.
    const rng = seededRng(7);
    const duration = new Map<string, number>(); // container → how long it runs once started
    const startedAt = new Map<string, number>();
    const submit = async (owner: string, n: number, labels: () => Record<string, string>) => {
      const specs = Array.from({ length: n }, () =>
        normalizeRequest({
          command: ['true'],
          vcpus: [0.25, 0.5, 1, 2][Math.floor(rng() * 4)],
          ram: ['256MiB', '1GiB', '3GiB'][Math.floor(rng() * 3)],
          labels: labels(),
        }),
      );
      for (const r of await h.store.requests.create(owner, specs))
        duration.set(r.container_id!, 20_000 + Math.floor(rng() * 300_000));
    };
    await submit('alice', 3, () => ({ team: 'gen', run: 'first' }));
    let killed = false;
    for (let t = 0; t < 5400_000; t += STEP) {
      if (t < 2700_000 && rng() < 0.15)
        await submit(rng() < 0.5 ? 'alice' : 'bob', 1 + Math.floor(rng() * 4), () =>
          rng() < 0.5 ? { team: 'gen' } : { team: 'ops' },
        );
      await h.advance(STEP);
      await h.pingAll();
      for (const a of h.agents.values())
        for (const id of a.running.keys()) if (!startedAt.has(id)) startedAt.set(id, t);
      // Containers whose run time has passed complete; a retried attempt gets its own run time.
      for (const a of h.agents.values()) {
        if (h.cloud.get(a.instanceId)?.state !== 'running') continue;
        for (const [id, token] of [...a.running]) {
          if (t - startedAt.get(id)! < (duration.get(id) ?? 60_000)) continue;
          await h.store.containers.complete(id, a.nodeId, token, {
            exitCode: 0,
            oomKilled: false,
            usage: null,
          });
          a.running.delete(id);
        }
      }
      // Once, an instance dies under its running containers (they are retried elsewhere).
      if (!killed && t > 1800_000) {
        const victim = [...h.agents.values()].find(
          (a) => a.running.size > 0 && h.cloud.get(a.instanceId)?.state === 'running',
        );
        if (victim) {
          h.cloud.kill(victim.instanceId);
          killed = true;
        }
      }
      await d.tick().then(() => d.settled());
    }
    expect(killed).toBe(true);
    expect(d.instances.size).toBe(0); // every instance shut down and gone
    const unfinished = await h.db.pool.query(
      `SELECT count(*)::int AS n FROM container_requests WHERE state <> 'Final'`,
    );
    expect(unfinished.rows[0].n).toBe(0);
    expect(h.events.filter((e) => e.kind === 'error')).toEqual([]);

    const s = await h.store.costs.summary({ from: null }, 'owner', null, 1000);
    expect(created.size).toBeGreaterThan(3);
    expect(s.instances!.by_type.reduce((n, t) => n + t.instances, 0)).toBe(created.size);
    // The identity, to the cent.
    expect(Math.abs(s.total + s.instances!.unattributed - s.instances!.cost)).toBeLessThan(0.005);
    // Instances cost what the cloud billed: exactly for those Berth destroyed; the one killed under it
    // ends when Berth saw it gone (at most a sync interval and a step after its termination, and so up to
    // one more increment).
    let bill = 0;
    for (const [id, c] of created) bill += (c.price * billedMs(ended.get(id)! - c.at, billing)) / 3600_000;
    const slack =
      (Math.max(...TYPES.map((t) => t.price)) * (10_000 + 2 * STEP + billing.incrementMs)) / 3600_000;
    expect(s.instances!.cost).toBeGreaterThanOrEqual(bill - 1e-9);
    expect(s.instances!.cost - bill).toBeLessThan(slack);
    // Every group is real work: both owners, and by label both teams plus the first batch.
    expect(s.groups.map((g) => g.key).sort()).toEqual(['alice', 'bob']);
    const byTeam = await h.store.costs.summary({ from: null }, 'label:team', null);
    expect(byTeam.groups.map((g) => g.key).sort()).toEqual(['gen', 'ops']);
    expect(Math.abs(byTeam.total - s.total)).toBeLessThan(1e-9);
    // Per request, all attempts: the sum over requests is the same total.
    const byRequest = await h.store.costs.summary({ from: null }, 'request', null, 10_000);
    expect(Math.abs(byRequest.total - s.total)).toBeLessThan(1e-9);
    let perAttempt = 0;
    for (const g of byRequest.groups)
      perAttempt += (await h.store.costs.ofRequest(g.key)).reduce((n, c) => n + c.cost, 0);
    expect(Math.abs(perAttempt - s.total)).toBeLessThan(1e-9);

    // The first instance was created for the team=gen batch: tagged with the labels they agree on.
    const first = [...created.values()].sort((a, b) => a.at - b.at)[0]!;
    expect(first.tags).toMatchObject({ team: 'gen', run: 'first', 'berth-cluster': 'c1' });
    // Records outlive their instances.
    const rows = await h.db.pool.query(
      `SELECT count(*)::int AS n FROM instances WHERE gone_at IS NOT NULL AND ended_at IS NOT NULL`,
    );
    expect(rows.rows[0].n).toBe(created.size);
    expect(await h.store.instances.list()).toEqual([]);
  }, 120_000);
});
