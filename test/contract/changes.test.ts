// changes() (SEAMS §2), against both queues: a view kept by applying the changes is always what
// containers() lists, whatever happens between two reads.
import { describe, expect, it } from 'vitest';
import type { ChangeCursor, DispatchQueue } from '../../src/dispatch/ports.js';
import type { SnapshotContainer } from '../../src/dispatch/scheduler/types.js';
import { seededRng } from '../../src/model/clock.js';
import { USAGE_STAMP_GROWTH, USAGE_STAMP_INTERVAL_MS } from '../../src/store/containers.js';
import { Store } from '../../src/store/store.js';
import { DISPATCHER, pgSubjects, randomTransition, running, SUBJECTS, T0, type Subject } from './subjects.js';

const D = DISPATCHER;

/** A dispatcher's container view, kept up to date with changes(). */
class View {
  readonly byId = new Map<string, SnapshotContainer>();
  cursor: ChangeCursor | null = null;
  nextRunAfter: Date | null = null;
  constructor(
    private readonly queue: DispatchQueue,
    private readonly dispatcher = D,
  ) {}
  /**
   * Applies the changes since the last read; returns what they changed in the view. (A change may be
   * reported twice, e.g. while a transaction anywhere on the server is older than it: a repeat changes
   * nothing.)
   */
  async read(now: Date) {
    const ch = await this.queue.changes(this.dispatcher, now, this.cursor);
    const upserts = ch.upserts.filter((c) => JSON.stringify(this.byId.get(c.id)) !== JSON.stringify(c));
    const removed = ch.removed.filter((id) => this.byId.has(id));
    for (const id of ch.removed) this.byId.delete(id);
    for (const c of ch.upserts) this.byId.set(c.id, c);
    this.cursor = ch.cursor;
    this.nextRunAfter = ch.nextRunAfter;
    return { upserts, removed, nextRunAfter: ch.nextRunAfter };
  }
  list() {
    return [...this.byId.values()].sort((a, b) => a.id.localeCompare(b.id));
  }
}

const sorted = (cs: SnapshotContainer[]) => [...cs].sort((a, b) => a.id.localeCompare(b.id));

describe.each(SUBJECTS)('changes() on the %s queue', (_name, make) => {
  it('from nothing: what containers() lists; then only what changed', async () => {
    const s = await make();
    const [a, b] = [await s.submit(), await s.submit()];
    const ca = await s.current(a);
    const cb = await s.current(b);
    const v = new View(s.queue);
    const first = await v.read(s.clock.now());
    expect(sorted(first.upserts)).toEqual(sorted(await s.queue.containers(D, s.clock.now())));
    expect(first.removed).toEqual([]);
    expect(first.nextRunAfter).toBeNull();

    expect(await v.read(s.clock.now())).toMatchObject({ upserts: [], removed: [] });

    expect(await s.queue.lock([ca], D)).toEqual([ca]);
    expect(await s.queue.lock([cb], 'c/other')).toEqual([cb]);
    const ch = await v.read(s.clock.now());
    expect(ch.upserts.map((c) => [c.id, c.state, c.lockCount])).toEqual([[ca, 'Locked', 1]]);
    expect(ch.removed).toEqual([cb]);

    const node = await s.node('i-1');
    await s.queue.assign([{ id: ca, instance: 'i-1', node }], D);
    expect((await v.read(s.clock.now())).upserts.map((c) => [c.id, c.instance])).toEqual([[ca, 'i-1']]);
    await s.start(ca, node);
    await s.complete(ca, node, 0);
    expect(await v.read(s.clock.now())).toMatchObject({ upserts: [], removed: [ca] });
    expect(v.list()).toEqual([]);
  });

  it('a run_after that passes between two reads brings the container in; nextRunAfter says when', async () => {
    const s = await make();
    const later = await s.submit({ runAfterMs: 60_000 });
    const id = await s.current(later);
    const v = new View(s.queue);
    expect((await v.read(s.clock.now())).upserts).toEqual([]);
    expect(v.nextRunAfter).toEqual(new Date(T0 + 60_000));
    s.clock.advance(30_000);
    expect((await v.read(s.clock.now())).upserts).toEqual([]);
    s.clock.advance(30_000);
    expect((await v.read(s.clock.now())).upserts.map((c) => c.id)).toEqual([id]);
    expect(v.nextRunAfter).toBeNull();
    s.clock.advance(30_000);
    expect((await v.read(s.clock.now())).upserts).toEqual([]);
  });

  it('random operations: the view kept by changes() is containers() after every read', async () => {
    const s = await make({ maxDispatchAttempts: 3 });
    const rng = seededRng(11);
    const pick = <T>(xs: T[]) => xs[Math.floor(rng() * xs.length)]!;
    const views = [new View(s.queue, D), new View(s.queue, 'c/other')];
    const nodes = [await s.node('i-1'), await s.node('i-2')];
    const requests: string[] = [];
    for (let step = 0; step < 120; step++) {
      const ids = await Promise.all(requests.map((r) => s.current(r)));
      const op = requests.length < 3 ? 0 : Math.floor(rng() * 8);
      const d = pick([D, 'c/other']);
      const id = ids.length > 0 ? pick(ids) : '';
      const node = pick(nodes);
      if (op === 0) requests.push(await s.submit({ runAfterMs: rng() < 0.3 ? rng() * 200_000 : undefined }));
      else if (!(await randomTransition(s, rng, op, id, d, node))) s.clock.advance(rng() * 30_000);
      const v = pick(views);
      await v.read(s.clock.now());
      const dispatcher = v === views[0] ? D : 'c/other';
      expect(v.list()).toEqual(sorted(await s.queue.containers(dispatcher, s.clock.now())));
    }
  });
});

describe('changes() on PostgreSQL: a change committed after a read is in the next read', () => {
  it('even when its transaction began before the read (a sequence number would have skipped it)', async () => {
    const s: Subject = await pgSubjects()();
    const r = await s.submit();
    const id = await s.current(r);
    const v = new View(s.queue);
    await v.read(s.clock.now());
    // A transaction that changes the container and is still open while the dispatcher reads.
    const tx = await s.db!.connect();
    try {
      await tx.query('BEGIN');
      await tx.query(`UPDATE containers SET priority = 7 WHERE id = $1`, [id]);
      // Another change commits after it started, with a later transaction id.
      const other = await s.current(await s.submit());
      expect((await v.read(s.clock.now())).upserts.map((c) => c.id)).toEqual([other]);
      await tx.query('COMMIT');
    } finally {
      tx.release();
    }
    expect((await v.read(s.clock.now())).upserts.map((c) => [c.id, c.priority])).toEqual([[id, 7]]);
  });

  it('a usage sample of a Running container is in the next read (what opportunistic placement lends)', async () => {
    const s: Subject = await pgSubjects()();
    const { id, node } = await running(s, await s.submit());
    const v = new View(s.queue);
    expect((await v.read(s.clock.now())).upserts.map((c) => [c.id, c.state, c.usage])).toEqual([
      [id, 'Running', undefined],
    ]);
    s.clock.advance(4000);
    // As the API records an agent's ping (routes/nodes.ts).
    const store = new Store(s.db!, { clock: s.clock, rng: seededRng(1) });
    await store.containers.recordUsage(node, {
      [id]: { cpu_seconds: 1, ram: 10_000_000, peak_ram: 20_000_000 },
    });
    expect((await v.read(s.clock.now())).upserts.map((c) => [c.id, c.usage])).toEqual([
      [id, { ram: 20_000_000, vcpus: 0.25, observedMs: 4000 }],
    ]);

    // The next pings' samples are stored but stamp the feed only every USAGE_STAMP_INTERVAL_MS, or at
    // once when the peak grew by USAGE_STAMP_GROWTH of the request (its ram: 1 GiB, testing.ts's default).
    // Whether a sample stamped is read from the row: the feed itself may hand a row over again while any
    // transaction on the server is older than its stamp (other test files' in CI), with its newest usage.
    const stamp = async () =>
      (await s.db!.query<{ x: string }>(`SELECT change_xid::text AS x FROM containers WHERE id = $1`, [id]))
        .rows[0]!.x;
    const sample = async (advanceMs: number, peak: number) => {
      s.clock.advance(advanceMs);
      const before = await stamp();
      await store.containers.recordUsage(node, {
        [id]: { cpu_seconds: 2, ram: 10_000_000, peak_ram: peak },
      });
      return (await stamp()) !== before;
    };
    const ram = (await store.containers.get(id)).ram;
    expect(await sample(10_000, 21_000_000)).toBe(false);
    expect((await store.containers.get(id)).usage).toMatchObject({ peak_ram: 21_000_000, wall_ms: 14_000 });
    expect(await sample(USAGE_STAMP_INTERVAL_MS - 10_001, 21_000_000)).toBe(false);
    expect(await sample(1, 21_000_000)).toBe(true);
    // A stamped sample is in the next read, as the dispatcher's view.
    expect(
      (await v.read(s.clock.now())).upserts.map((c) => [c.id, c.usage?.ram, c.usage?.observedMs]),
    ).toEqual([[id, 21_000_000, 4000 + USAGE_STAMP_INTERVAL_MS]]);
    const grown = 21_000_000 + Math.ceil(ram * USAGE_STAMP_GROWTH);
    expect(await sample(1000, grown - 1)).toBe(false);
    expect(await sample(1000, grown)).toBe(true);
    expect((await v.read(s.clock.now())).upserts.map((c) => [c.id, c.usage?.ram])).toEqual([[id, grown]]);
  });

  it("a sample that waited for the row while its container ended leaves the exit report's final usage", async () => {
    const s: Subject = await pgSubjects()();
    const { id, node } = await running(s, await s.submit());
    const store = new Store(s.db!, { clock: s.clock, rng: seededRng(1) });
    const token = await store.containers.tokenFor(id);
    const final = { cpu_seconds: 9, peak_ram: 40_000_000, wall_ms: 5000 };
    // A third transaction holds the row: the exit report waits for it, then the sample (which read the
    // container Running) waits behind the exit; the exit commits first.
    const holder = await s.db!.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM containers WHERE id = $1 FOR UPDATE', [id]);
      const exit = store.containers.complete(id, node, token, {
        exitCode: 0,
        oomKilled: false,
        usage: final,
      });
      await waitersOnLocks(s, 1);
      const sample = store.containers.recordUsage(node, {
        [id]: { cpu_seconds: 1, ram: 10_000_000, peak_ram: 20_000_000 },
      });
      await waitersOnLocks(s, 2);
      await holder.query('COMMIT');
      await exit;
      await sample;
    } finally {
      holder.release();
    }
    const c = await store.containers.get(id);
    expect(c.state).toBe('Complete');
    expect(c.usage).toMatchObject(final);
  });
});

/** Waits until `n` sessions of this database wait for a lock (a statement that blocked on a row). */
async function waitersOnLocks(s: Subject, n: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await s.db!.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if (r.rows[0]!.n >= n) return;
    if (Date.now() > deadline) throw new Error(`${n} sessions did not wait for a lock within 30 s`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
