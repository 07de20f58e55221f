// A status group's members in parts (migration 210): a container's group-held text is found in the one part
// its id hashes to, so a listing's page reads a few buffers a row, not the group's whole member array (at
// 300k waiting containers in one group the first page took ~1.4 s). The texts stay queuedText's.
import { beforeAll, describe, expect, it } from 'vitest';
import { PgQueue } from '../../src/dispatch/pg-queue.js';
import { hashText, statusParts } from '../../src/dispatch/status-parts.js';
import { queuedText } from '../../src/dispatch/scheduler/statuses.js';
import { seededRng } from '../../src/model/clock.js';
import { normalizeRequest } from '../../src/model/request.js';
import { CONTAINER_COLUMNS } from '../../src/store/records.js';
import type { Store } from '../../src/store/store.js';
import { testStore } from '../helpers/store.js';

const N = 20_000;
let store: Store;
let queue: PgQueue;
let ids: string[];

/** The group of `members` in queue order, as a dispatcher stores it. */
const group = (members: string[], reason: string) => ({
  slot: 0,
  reason,
  members,
  positions: members.map((_, i) => i + 1),
  higherAhead: members.map((_, i) => i % 3),
});

beforeAll(async () => {
  const t = await testStore();
  store = t.store;
  queue = new PgQueue(store, t.db.url);
  ids = [];
  const spec = normalizeRequest({ command: ['true'] });
  for (let done = 0; done < N; done += 5_000) {
    const made = await store.requests.create(
      'alice',
      Array.from({ length: 5_000 }, () => spec),
    );
    ids.push(...made.map((r) => r.container_id!));
  }
  await queue.setWaiting('d-parts', [group(ids, 'waits for a t1')], [0]);
  await store.ctx.pool.query('VACUUM ANALYZE');
}, 120_000);

describe('status groups in parts', () => {
  it('every member reads its queuedText, through get, the listing and the queue page', async () => {
    const want = new Map(ids.map((id, i) => [id, queuedText(i + 1, i % 3, 'waits for a t1')]));
    for (const c of await store.containers.getMany(ids)) expect(c.scheduling_status).toBe(want.get(c.id));
    const page = await store.containerList.list({ state: 'Queued', limit: 100 });
    expect(page.items).toHaveLength(100);
    for (const c of page.items) {
      expect(c.scheduling_status).toBe(want.get(c.id));
      expect(c).not.toHaveProperty('queued_status');
    }
    const q = await store.dashboard.queued(null, null, 50);
    for (const c of q.items) expect(c.scheduling_status).toBe(want.get(c.id));
    expect((await store.containers.get(ids[N - 1]!)).scheduling_status).toBe(want.get(ids[N - 1]!));
  });

  it("the first page of Queued reads a few buffers a row, not the group's whole array", async () => {
    const r = await store.ctx.pool.query(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
       SELECT ${CONTAINER_COLUMNS} FROM containers WHERE state = 'Queued' ORDER BY id DESC LIMIT 101`,
    );
    const plan = r.rows[0]['QUERY PLAN'][0].Plan;
    const buffers = plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
    // ~7 a row with parts (the row, the group and its part through their primary keys); the whole array
    // of 20k ids detoasted per row is ~100 a row.
    expect(buffers).toBeLessThan(20 * 101);
    expect(plan.Plans[0]['Node Type']).toBe('Index Scan');
  });

  it('a pass in which one member left rewrites its part only; the others keep their row versions', async () => {
    const versions = async () =>
      new Map(
        (await store.ctx.pool.query(`SELECT part, xmin::text AS x FROM status_group_parts`)).rows.map((r) => [
          r.part as number,
          r.x as string,
        ]),
      );
    const before = await versions();
    // The last in the queue left (cancelled): the others keep their positions, so their parts are unchanged.
    const left = ids.slice(0, N - 1);
    await queue.setWaiting('d-parts', [group(left, 'waits for a t1')], [0]);
    const after = await versions();
    expect(after.size).toBe(statusParts(N - 1));
    const rewritten = [...after].filter(([part, x]) => before.get(part) !== x);
    expect(rewritten).toHaveLength(1);
    expect((await store.containers.get(ids[N - 2]!)).scheduling_status).toBe(
      queuedText(N - 1, (N - 2) % 3, 'waits for a t1'),
    );
    expect((await store.containers.get(ids[N - 1]!)).scheduling_status).toBeNull();
    await queue.setWaiting('d-parts', [group(ids, 'waits for a t1')], [0]);
  });

  it('a group that shrinks is rewritten in fewer parts; members it dropped read their own text', async () => {
    const kept = ids.slice(0, 1_000);
    await queue.setWaiting('d-parts', [group(kept, 'waits again')], [0]);
    const parts = await store.ctx.pool.query(`SELECT count(*)::int AS n FROM status_group_parts`);
    expect(parts.rows[0].n).toBe(statusParts(1_000));
    const got = new Map(
      (await store.containers.getMany([...kept, ids[5_000]!])).map((c) => [c.id, c.scheduling_status]),
    );
    kept.forEach((id, i) => expect(got.get(id)).toBe(queuedText(i + 1, i % 3, 'waits again')));
    expect(got.get(ids[5_000]!)).toBeNull();
  });

  it('parts: a power of two, ~64 members each', () => {
    expect([0, 1, 64, 65, 128, 129, 20_000].map(statusParts)).toEqual([1, 1, 1, 2, 2, 4, 512]);
  });
});

// Bases and incremental writes (migration 224, src/dispatch/status-parts.ts): positions are stored less the
// group's bases, and a write sends only the parts that changed, so a moving head costs a few parts.
describe('status groups: bases and incremental writes', () => {
  const D = 'd-bases';
  /** A queue of one priority in `members` order (nobody of a higher priority ahead), after `ahead` others. */
  const fifo = (members: string[], reason = 'waits for a t2', slot = 0, ahead = 0) => ({
    slot,
    reason,
    members,
    positions: members.map((_, i) => ahead + i + 1),
    higherAhead: members.map(() => 0),
  });
  const versions = async () =>
    new Map(
      (
        await store.ctx.pool.query<{ k: string; x: string }>(
          `SELECT p.group_id || '/' || p.part AS k, p.xmin::text AS x
             FROM status_group_parts p JOIN status_groups g ON g.id = p.group_id WHERE g.dispatcher_id = $1`,
          [D],
        )
      ).rows.map((r) => [r.k, r.x]),
    );
  const rewritten = (before: Map<string, string>, after: Map<string, string>) =>
    [...after].filter(([k, x]) => before.get(k) !== x).length;
  /** Every member of each group reads the text the group gives it. */
  const expectTexts = async (...groups: ReturnType<typeof fifo>[]) => {
    const want = new Map<string, string>();
    for (const g of groups)
      g.members.forEach((id, i) => want.set(id, queuedText(g.positions[i]!, g.higherAhead[i]!, g.reason)));
    const got = await store.containers.getMany([...want.keys()]);
    for (const c of got) expect(c.scheduling_status).toBe(want.get(c.id));
  };

  it("hashText is the server's hashtext", async () => {
    const odd = ['', 'a', 'é漢字', 'x'.repeat(11), 'x'.repeat(12), 'x'.repeat(13), 'y'.repeat(40)];
    const sample = [...odd, ...ids.slice(0, 5_000), ...ids.slice(0, 500).map((id) => `${id}-2`)];
    const r = await store.ctx.pool.query<{ h: number }>(
      `SELECT hashtext(u) AS h FROM unnest($1::text[]) WITH ORDINALITY AS t(u, o) ORDER BY o`,
      [sample],
    );
    expect(r.rows.map((row) => row.h >>> 0)).toEqual(sample.map(hashText));
  });

  it('the head leaves and one arrives: the base moves and at most two parts are rewritten', async () => {
    await queue.setWaiting(D, [fifo(ids)], [0]);
    const before = await versions();
    // The head was placed; a new container (here the same one, back) arrived at the tail.
    const next = fifo([...ids.slice(1), ids[0]!]);
    await queue.setWaiting(D, [next], [0]);
    const after = await versions();
    expect(after.size).toBe(statusParts(N));
    expect(rewritten(before, after)).toBeLessThanOrEqual(2);
    await expectTexts(next);
  });

  it('a higher-priority container takes the head: both bases move, one part is rewritten', async () => {
    const [top] = await store.requests.create('alice', [normalizeRequest({ command: ['true'] })]);
    await queue.setWaiting(D, [fifo(ids)], [0]);
    const before = await versions();
    const g = fifo([top!.container_id!, ...ids]);
    g.higherAhead = g.members.map((_, i) => (i === 0 ? 0 : 1));
    await queue.setWaiting(D, [g], [0]);
    const after = await versions();
    expect(rewritten(before, after)).toBeLessThanOrEqual(1 + (after.size - before.size));
    await expectTexts(g);
  });

  it('a write that failed after dropping a group is followed by a complete one', async () => {
    const a = fifo(ids.slice(0, 1_000), 'first', 0);
    const b = fifo(ids.slice(1_000, 2_000), 'second', 1, 1_000);
    await queue.setWaiting(D, [a, b], [0, 1]);
    await expectTexts(a, b);
    // The drop of group 1 succeeds, the upsert of group 0 fails (a reason may not be null).
    await expect(queue.setWaiting(D, [{ ...a, reason: null as unknown as string }], [0])).rejects.toThrow();
    await queue.setWaiting(D, [a, b], [0, 1]);
    await expectTexts(a, b);
  });

  it('a member given its own text, then back in its place, reads its group again (its pointer is set again)', async () => {
    const g = fifo(ids.slice(0, 500), 'own and back');
    await queue.setWaiting(D, [g], [0]);
    // Placed, then requeued: the same group, the same places; only the pointers were cleared meanwhile.
    await queue.setStatuses(new Map(ids.slice(100, 103).map((id) => [id, 'starting on instance i-1'])));
    await queue.setWaiting(D, [g], [0]);
    await expectTexts(g);
  });

  // What the writer keeps of the last write (status-parts.ts WrittenGroups: members paired with it, their
  // hashes, pointers and parts) against what the database holds: seeded random passes over three groups
  // (members leave from the head or anywhere, arrive, move within a group and between groups, are given
  // their own text and come back, a group goes and comes, part counts change, a write fails), and after
  // each write every member reads its group's text and every other its own.
  it('random passes: every member reads what the last write gave it', async () => {
    const R = 'd-random';
    const rng = seededRng(7);
    const pick = (n: number) => Math.floor(rng() * n);
    const pool = ids.slice(0, 3_000);
    let groups: string[][] = [pool.slice(0, 700), pool.slice(700, 760), pool.slice(760, 1_000)];
    let spare = pool.slice(1_000);
    let shift = 0;
    const own = new Map<string, string>();
    const stored = () => {
      let ahead = shift;
      return groups.flatMap((members, slot) => {
        if (members.length === 0) return [];
        const g = { ...fifo(members, `reason ${slot}`, slot, ahead), slot };
        g.higherAhead = members.map((id) => (id.charCodeAt(id.length - 1) % 4) + (shift % 3));
        ahead += members.length;
        return [g];
      });
    };
    for (let step = 0; step < 40; step++) {
      const g = groups[pick(groups.length)]!;
      const k = 1 + pick(150);
      const op = pick(8);
      if (op === 0) g.splice(0, Math.min(k, g.length)); // the head placed
      if (op === 1) for (let n = 0; n < 5 && g.length > 0; n++) g.splice(pick(g.length), 1);
      if (op === 2) g.push(...spare.splice(0, k)); // arrivals at the tail
      if (op === 3) g.splice(pick(g.length + 1), 0, ...spare.splice(0, 1 + pick(5))); // ahead of others
      if (op === 4 && g.length > 1) g.splice(pick(g.length), 0, ...g.splice(pick(g.length), 1)); // one moves
      if (op === 5) {
        const to = groups[pick(groups.length)]!;
        to.splice(pick(to.length + 1), 0, ...g.splice(pick(g.length), Math.min(k, 80)));
      }
      if (op === 6 && g.length > 10) {
        // Some are placed (their own text) and requeued in their place before the next write.
        const placed = g.slice(pick(g.length - 5), undefined).slice(0, 5);
        await queue.setStatuses(new Map(placed.map((id) => [id, `placed ${step}`])));
      }
      if (op === 7)
        groups =
          groups[2]!.length > 0 ? [groups[0]!, groups[1]!, []] : [...groups.slice(0, 2), spare.splice(0, k)];
      shift += pick(3);
      // Containers out of every group get a text of their own.
      const held = new Set(groups.flat());
      const gone = pool.filter((id) => !held.has(id) && !own.has(id));
      const ownNow = new Map(gone.map((id) => [id, `left at ${step}`]));
      for (const id of held) own.delete(id);
      for (const [id, text] of ownNow) own.set(id, text);
      if (ownNow.size > 0) await queue.setStatuses(ownNow);
      spare = pool.filter((id) => !held.has(id));
      const now = stored();
      if (step % 13 === 12) {
        // The drop succeeds, the upsert fails: what the writer knows is forgotten.
        const bad = now.map((x, i) => (i === 0 ? { ...x, reason: null as unknown as string } : x));
        await expect(queue.setWaiting(R, bad, [now[0]!.slot])).rejects.toThrow();
      }
      await queue.setWaiting(
        R,
        now,
        now.map((x) => x.slot),
      );
      await expectTexts(...now).catch((e: unknown) => {
        throw new Error(`step ${step} op ${op}: ${String(e)}`);
      });
      // Each part holds exactly the members that hash to it, in queue order (none that left).
      const want = new Map<string, string[]>();
      for (const x of now) {
        const parts = statusParts(x.members.length);
        for (let part = 0; part < parts; part++) want.set(`${x.slot}/${part}`, []);
        for (const id of x.members) want.get(`${x.slot}/${hashText(id) & (parts - 1)}`)!.push(id);
      }
      const rows = await store.ctx.pool.query<{ k: string; members: string[] }>(
        `SELECT g.slot || '/' || p.part AS k, p.members FROM status_group_parts p
           JOIN status_groups g ON g.id = p.group_id WHERE g.dispatcher_id = $1`,
        [R],
      );
      expect(new Map(rows.rows.map((r) => [r.k, r.members])), `step ${step} op ${op}`).toEqual(want);
      const got = await store.containers.getMany([...own.keys()]);
      for (const c of got) expect(c.scheduling_status, `step ${step}`).toBe(own.get(c.id));
    }
  }, 60_000);

  it('a new process (nothing known of what is stored) writes over what another left', async () => {
    const g = fifo(ids.slice(0, 3_000), 'after a restart');
    await queue.setWaiting(D, [fifo(ids.slice(0, 3_000).reverse(), 'before')], [0]);
    const restarted = new PgQueue(store, '');
    await restarted.setWaiting(D, [g], [0]);
    await expectTexts(g);
  });
});
