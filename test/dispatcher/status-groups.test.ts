// Statuses stored by group (migration 060, src/dispatch/status-writer.ts): what `berth why`, `berth ps`
// and the API read is the text the plan gave, while the store holds one row per reason, and a pass that
// moves the head of a long queue rewrites the group, not the waiting containers.
import { describe, expect, it } from 'vitest';
import type { PgQueue } from '../../src/dispatch/pg-queue.js';
import { Statuses, queuedText } from '../../src/dispatch/scheduler/statuses.js';
import type { SnapshotContainer } from '../../src/dispatch/scheduler/types.js';
import { mostCommon } from '../../src/dispatch/status-parts.js';
import { StatusWriter } from '../../src/dispatch/status-writer.js';
import { seededRng } from '../../src/model/clock.js';
import { harness } from './harness.js';

describe('statuses by group', () => {
  it('2,000 waiting containers: the texts read are the plan texts; moving the head rewrites O(groups) rows, not the queue', async () => {
    const h = await harness({ config: { maxInstances: 1 } });
    const d = h.make();
    const low = await h.submit(...Array.from({ length: 2_000 }, () => ({ vcpus: 1, ram: '1GiB' })));
    const high = await h.submit(
      ...Array.from({ length: 2 }, () => ({ vcpus: 1, ram: '1GiB', priority: 900 })),
    );
    const all = [...low, ...high];
    const read = async () => {
      const r = await h.db.pool.query<{ id: string; x: string }>(
        `SELECT id, xmin::text AS x FROM containers WHERE id = ANY($1)`,
        [all],
      );
      const texts = new Map((await h.store.containers.getMany(all)).map((c) => [c.id, c.scheduling_status]));
      return new Map(r.rows.map((row) => [row.id, { ...row, s: texts.get(row.id) ?? null }]));
    };
    const groups = async () =>
      (await h.db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM status_groups`)).rows[0]!.n;

    await d.tick();
    const plan1 = d.lastPlan!;
    let rows = await read();
    for (const id of all) expect(rows.get(id)!.s).toBe(plan1.status.get(id));
    expect(Number(await groups())).toBe(plan1.statuses.reasons.length);
    expect(plan1.statuses.waiting.length).toBeGreaterThan(1_990);
    expect([...rows.values()].some((r) => /; 1 higher-priority container ahead; /.test(r.s ?? ''))).toBe(
      true,
    );

    // The instance boots and runs the container it was made for; when that one ends, the next waiting
    // one takes its place: every waiting container's position moves by one.
    await h.advance(30_000);
    await d.tick();
    await h.pingAll();
    expect(await h.finishAll()).toHaveLength(1);
    await h.advance(5_000);
    await d.tick();
    const plan2 = d.lastPlan!;
    expect(plan2.statuses.waiting.length).toBe(plan1.statuses.waiting.length - 1);
    const before = rows;
    rows = await read();
    for (const [id, text] of plan2.status) expect(rows.get(id)!.s).toBe(text);
    expect(plan2.status.size).toBe(all.length - 1); // the one that ended is no longer the plan's
    const rewritten = plan2.statuses.waiting.filter((c) => rows.get(c.id)!.x !== before.get(c.id)!.x);
    // Only a container that changed groups (here the new head, now waiting for its own reason): O(groups).
    expect(rewritten.length).toBeLessThanOrEqual(plan2.statuses.reasons.length);
    expect(Number(await groups())).toBe(plan2.statuses.reasons.length);
  });

  it('a new container taking the head: the old head joins the long group, whose members keep their row', async () => {
    const h = await harness({ config: { maxInstances: 0 } });
    const d = h.make();
    const low = await h.submit(...Array.from({ length: 500 }, () => ({ vcpus: 1, ram: '1GiB' })));
    const pointers = async () =>
      new Map(
        (
          await h.db.pool.query<{ id: string; g: string | null; x: string }>(
            `SELECT id, status_group::text AS g, xmin::text AS x FROM containers WHERE id = ANY($1)`,
            [low],
          )
        ).rows.map((r) => [r.id, r]),
      );
    await d.tick();
    const before = await pointers();
    const plan1 = d.lastPlan!;
    const head = plan1.statuses.waiting[0]!.id;
    // The head waits for a reason of its own (the limit); the others wait behind it.
    expect(plan1.statuses.reasonOf[0]).not.toBe(plan1.statuses.reasonOf[1]);
    expect(new Set(plan1.statuses.reasonOf.slice(1)).size).toBe(1);

    // A higher-priority container arrives: it is the new head, and the old head joins the others.
    const [top] = await h.submit({ vcpus: 1, ram: '1GiB', priority: 900 });
    await h.advance(5_000);
    await d.tick();
    const plan2 = d.lastPlan!;
    expect(plan2.statuses.waiting[0]!.id).toBe(top);
    const after = await pointers();
    for (const id of low) expect((await h.status(id))!).toBe(plan2.status.get(id));
    const repointed = low.filter((id) => after.get(id)!.g !== before.get(id)!.g);
    const rewritten = low.filter((id) => after.get(id)!.x !== before.get(id)!.x);
    // Only the old head moved to another row (the first member's slot rule moved all 499 others).
    expect(repointed).toEqual([head]);
    expect(rewritten).toEqual([head]);
  });

  it("the store's text is queuedText's, for 0, 1 and more higher-priority containers ahead", async () => {
    const h = await harness();
    const ids = await h.submit({}, {}, {});
    await h.queue.setWaiting(
      'c1/t1',
      [{ slot: 0, reason: 'why not', members: ids, positions: [1, 2, 3], higherAhead: [0, 1, 5] }],
      [0],
    );
    const got = new Map((await h.store.containers.getMany(ids)).map((c) => [c.id, c.scheduling_status]));
    expect(ids.map((id) => got.get(id))).toEqual([
      queuedText(1, 0, 'why not'),
      queuedText(2, 1, 'why not'),
      queuedText(3, 5, 'why not'),
    ]);
    // A container given its own text no longer reads the group's; a gone reason leaves the rest to own texts.
    await h.queue.setStatuses(new Map([[ids[0]!, 'starting on instance i-1']]));
    expect((await h.store.containers.get(ids[0]!)).scheduling_status).toBe('starting on instance i-1');
    await h.queue.setWaiting('c1/t1', [], []);
    expect((await h.store.containers.get(ids[1]!)).scheduling_status).toBeNull();
    expect(Number((await h.db.pool.query(`SELECT count(*) AS n FROM status_groups`)).rows[0].n)).toBe(0);
  });

  // The slot vote keeps each member's last slot as groups change (status-writer.ts slotted: paired with the
  // last groups, only members not paired are looked up): seeded random passes over a few reasons (members
  // leave, come back, move between groups and within one, groups split off and vanish, a write fails),
  // each checked against the rule computed from scratch: largest group first, the free slot most of its
  // members held at the last write, else the lowest free one.
  it('random passes: each group takes the free slot most of its members held at the last write', async () => {
    const h = await harness();
    const ids = await h.submit(...Array.from({ length: 1_200 }, () => ({ vcpus: 1, ram: '1GiB' })));
    let failNext = false;
    const queue = Object.create(h.queue) as PgQueue;
    queue.setWaiting = async (...args: Parameters<PgQueue['setWaiting']>) => {
      if (failNext) {
        failNext = false;
        throw new Error('connection lost (injected)');
      }
      return h.queue.setWaiting(...args);
    };
    const errors: unknown[] = [];
    const w = new StatusWriter(
      queue,
      'c1/vote',
      0,
      () => h.clock.nowMs(),
      (err) => errors.push(err),
    );
    const rng = seededRng(11);
    const pick = (n: number) => Math.floor(rng() * n);
    let groups: string[][] = [
      ids.slice(0, 500),
      ids.slice(500, 700),
      ids.slice(700, 760),
      ids.slice(760, 790),
    ];
    /** The model: each member's slot at the last write that succeeded. */
    let held = new Map<string, number>();
    // First, 200 arrive in a small group, then they wait for a reason of their own: they held its slot.
    const [a, b, c] = [ids.slice(0, 100), ids.slice(100, 110), ids.slice(200, 400)];
    const scripted = [
      [a, b],
      [a, [...b, ...c]],
      [a, b, c],
    ];
    for (let step = 0; step < 40; step++) {
      const spare = ids.filter((id) => !groups.some((g) => g.includes(id)));
      if (step < scripted.length) groups = scripted[step]!.map((x) => [...x]);
      const g = groups[pick(groups.length)]!;
      const k = 1 + pick(120);
      const op = step < scripted.length ? -1 : pick(6);
      if (op === 0) g.splice(pick(g.length), k);
      if (op === 1)
        g.splice(pick(g.length + 1), 0, ...spare.slice(pick(spare.length), undefined).slice(0, k));
      if (op === 2) {
        const to = groups[pick(groups.length)]!;
        to.splice(pick(to.length + 1), 0, ...g.splice(pick(g.length), k));
      }
      if (op === 3) groups.push(g.splice(pick(g.length), k));
      if (op === 4) groups.splice(pick(groups.length), 1);
      if (op === 5 && g.length > 1) g.splice(pick(g.length), 0, ...g.splice(pick(g.length), 1));
      groups = groups.filter((x) => x.length > 0);
      if (groups.length === 0) groups.push(spare.slice(0, 50));
      // The rule, from scratch.
      const taken = new Set<number>();
      const want = new Array<number | undefined>(groups.length);
      const bySize = groups.map((_, i) => i).sort((i, j) => groups[j]!.length - groups[i]!.length);
      for (const i of bySize) {
        const best = mostCommon(
          groups[i]!.map((id) => held.get(id)!).filter((s) => s !== undefined && !taken.has(s)),
        );
        if (best !== undefined) taken.add((want[i] = best));
      }
      let free = 0;
      for (let i = 0; i < groups.length; i++)
        if (want[i] === undefined) {
          while (taken.has(free)) free++;
          taken.add((want[i] = free));
        }
      const st = new Statuses();
      groups.forEach((members, i) => {
        const reason = st.reason(`reason ${i}`);
        for (const id of members) st.wait({ id, priority: 1 } as SnapshotContainer, reason);
      });
      failNext = step % 9 === 8;
      const before = errors.length;
      h.clock.runUntil(h.clock.nowMs() + 1_000);
      w.offer(st, h.clock.now());
      await w.flushed();
      if (errors.length > before) continue; // nothing was written: the members hold their last slots
      const stored = await h.db.pool.query<{ slot: number; reason: string }>(
        `SELECT slot, reason FROM status_groups WHERE dispatcher_id = 'c1/vote'`,
      );
      const got = new Map(stored.rows.map((r) => [r.reason, r.slot]));
      expect(
        groups.map((_, i) => got.get(`reason ${i}`)),
        `step ${step} op ${op}`,
      ).toEqual(want);
      held = new Map(groups.flatMap((members, i) => members.map((id) => [id, want[i]!] as const)));
    }
    expect(errors).toHaveLength(4);
  }, 60_000);
});
