// Single submissions are group-committed (src/store/requests.ts, SUBMISSION_BATCHING): concurrent callers'
// requests share one insert statement. Each caller must get exactly the answer it gets alone: an invalid
// one its 400, one the database refuses its own error (and nothing of it is stored), the others their 201.
import type { PoolClient } from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testApi } from '../helpers/api.js';

let t: Awaited<ReturnType<typeof testApi>>;
let blocker: PoolClient | null = null;

beforeAll(async () => {
  t = await testApi();
  // The database refuses this one name (a constraint of this test's own database): a refusal the API's
  // validation cannot see, as a disk-full or a broken constraint would be.
  await t.store.ctx.pool.query(
    `ALTER TABLE container_requests ADD CONSTRAINT test_refused CHECK (name <> 'refuse-me')`,
  );
});
afterAll(async () => {
  if (blocker) {
    await blocker.query('ROLLBACK').catch(() => undefined);
    blocker.release();
  }
});

type Who = 'alice' | 'bob';
const CASES: { who: Who; payload: Record<string, unknown> }[] = [
  { who: 'alice', payload: { command: ['echo', 'a'], name: 'a', vcpus: 2, ram: '1GiB' } },
  { who: 'bob', payload: { command: ['echo', 'b'], name: 'b', priority: 100, labels: { k: 'v' } } },
  { who: 'alice', payload: { command: ['x'], ram: '4 gigs' } }, // invalid: 400 naming ram
  { who: 'bob', payload: { command: ['echo', 'r'], name: 'refuse-me' } }, // refused by the database
  { who: 'alice', payload: { command: ['echo', 'c'], name: 'c', env: { X: '1' } } },
  { who: 'bob', payload: { command: ['echo', 'd'], name: 'd', secret_env: { S: 'v' } } },
];

const submit = (who: Who, payload: Record<string, unknown>) =>
  t.call(t.tokens[who], { method: 'POST', url: '/v1/requests', payload });

/** The answer with what differs between two identical submissions (ids, times) checked and taken out. */
function answer(res: { statusCode: number; json(): unknown }) {
  const body = res.json() as Record<string, unknown>;
  if (res.statusCode === 201) {
    expect(body.id).toMatch(/^r/);
    expect(body.container_id).toMatch(/^c/);
    const { id: _i, container_id: _c, created_at: _a, updated_at: _u, ...rest } = body;
    return { status: res.statusCode, body: rest };
  }
  return { status: res.statusCode, body };
}

async function until(what: string, cond: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function count(sql: string): Promise<number> {
  return (await t.store.ctx.pool.query(sql)).rows[0].n as number;
}

/**
 * Submits `cases` concurrently as one group: the table is held so two submissions wait inside the database
 * (the coalescer's two calls in flight) and the group gathers behind them, then goes out as one statement.
 */
async function inOneGroup(cases: typeof CASES, reaching: number) {
  const pool = t.store.ctx.pool;
  blocker = await pool.connect();
  await blocker.query('BEGIN');
  await blocker.query('LOCK TABLE container_requests IN EXCLUSIVE MODE');
  const s0 = t.store.requests.singleStats;
  const plugs = [];
  for (const n of [1, 2]) {
    plugs.push(submit('alice', { command: ['plug'] }));
    await until(`call ${n} in flight`, () => t.store.requests.singleStats.calls === s0.calls + n);
  }
  const group = cases.map((c) => submit(c.who, c.payload));
  await until('the group waiting', () => t.store.requests.singleStats.pending === reaching);
  await blocker.query('COMMIT');
  blocker.release();
  blocker = null;
  const together = (await Promise.all(group)).map(answer);
  for (const p of await Promise.all(plugs)) expect(p.statusCode).toBe(201);
  const s1 = t.store.requests.singleStats;
  expect(s1.items - s0.items).toBe(2 + reaching);
  expect(s1.calls - s0.calls).toBe(3); // the two plugs, then the whole group in one call
  return together;
}

describe('group-committed single submissions over HTTP', () => {
  it('give each caller of a group exactly the answer it gets alone; nothing of a refused one is stored', async () => {
    const alone: ReturnType<typeof answer>[] = [];
    for (const c of CASES) alone.push(answer(await submit(c.who, c.payload)));
    expect(alone.map((a) => a.status)).toEqual([201, 201, 400, 500, 201, 201]);
    expect(JSON.stringify(alone[2]!.body)).toContain('ram');

    const reaching = CASES.filter((_, i) => alone[i]!.status !== 400).length;
    const together = await inOneGroup(CASES, reaching);
    expect(together).toEqual(alone);
    // Nothing of the refused one, and every stored request has its container and its one event.
    expect(await count(`SELECT count(*)::int AS n FROM container_requests WHERE name = 'refuse-me'`)).toBe(0);
    const requests = await count(`SELECT count(*)::int AS n FROM container_requests`);
    expect(requests).toBe(2 * 4 + 2);
    expect(await count(`SELECT count(*)::int AS n FROM containers`)).toBe(requests);
    const cids = (await t.store.ctx.pool.query('SELECT id FROM containers')).rows.map((r) => r.id as string);
    for (const id of cids) {
      const events = await t.store.containerList.events(id);
      expect(events.filter((e) => e.message === 'Queued: submitted')).toHaveLength(1);
    }

    // The same group without the refused one: one statement for all (no retry one by one), same answers.
    const ok = CASES.filter((_, i) => i !== 3);
    expect(await inOneGroup(ok, reaching - 1)).toEqual(alone.filter((_, i) => i !== 3));
  });
});
