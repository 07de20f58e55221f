// GET /v1/usage (right-sizing) on a real database: containers run their lifecycle through the API and
// report usage; the SQL aggregation must agree with the in-memory one the simulator uses.
import { beforeAll, describe, expect, it } from 'vitest';
import { aggregateUsage, rightSize, type UsageSample } from '../../src/model/rightsize.js';
import { testApi } from '../helpers/api.js';

const GiB = 1024 ** 3;
let t: Awaited<ReturnType<typeof testApi>>;
let node: { id: string; token: string; instanceId: string };

/** Submits as `token`, then lock → assign → start → complete with the given usage; returns the container. */
async function runOne(
  token: string,
  payload: Record<string, unknown>,
  usage: { peak_ram: number; cpu_seconds: number; wall_ms: number } | null,
  exitCode = 0,
): Promise<string> {
  const r = (
    await t.call(token, { method: 'POST', url: '/v1/requests', payload: { command: ['x'], ...payload } })
  ).json();
  const cid = r.container_id as string;
  const lockToken = await t.place(cid, node);
  const start = await t.call(node.token, {
    method: 'POST',
    url: `/v1/containers/${cid}/start`,
    payload: { lock_token: lockToken },
  });
  expect(start.statusCode).toBe(200);
  t.clock.advance(60_000);
  const done = await t.call(node.token, {
    method: 'POST',
    url: `/v1/containers/${cid}/complete`,
    payload: { lock_token: lockToken, exit_code: exitCode, ...(usage === null ? {} : { usage }) },
  });
  expect(done.statusCode).toBe(200);
  return cid;
}

// alice's "align": 4 vcpus, 8 GiB asked; used 1.0, 1.5, 3.0 cores over 100 s; peaks 2, 3, 2.5 GiB.
const ALIGN: Array<[number, number]> = [
  [100, 2 * GiB],
  [150, 3 * GiB],
  [300, 2.5 * GiB],
];

beforeAll(async () => {
  t = await testApi();
  node = await t.node('i-usage');
  for (const [cpu, peak] of ALIGN)
    await runOne(
      t.tokens.alice,
      { name: 'align', vcpus: 4, ram: '8GiB' },
      { cpu_seconds: cpu, peak_ram: peak, wall_ms: 100_000 },
    );
  // A failed run counts too (it completed and used what it used); bob's "sort" on 2 vcpus.
  await runOne(
    t.tokens.bob,
    { name: 'sort', vcpus: 2, ram: '4GiB' },
    { cpu_seconds: 50, peak_ram: GiB, wall_ms: 200_000 },
    1,
  );
  // An unnamed request without usage (an agent that reported none): counted, not measured.
  await runOne(t.tokens.alice, { vcpus: 1, ram: '1GiB' }, null);
});

describe('GET /v1/usage', () => {
  it('groups completed containers by name: asked, used, suggested, saved (hand-computed)', async () => {
    const res = await t.call(t.tokens.admin, { method: 'GET', url: '/v1/usage' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.by).toBe('name');
    expect(body.items.map((r: { key: string }) => r.key)).toEqual(['', 'align', 'sort']);
    const align = body.items[1];
    // Cores used 1, 1.5, 3 → p95 (nearest rank) 3 → suggest 3 vcpus. Asked 4 × 300 s = 1/3 vcpu-hour;
    // suggested 3 × 300 s = 1/4: saves 1/12 h = 0.0833 (25 %).
    expect(align.cpu).toEqual({
      measured: 3,
      asked: { min: 4, max: 4 },
      used: { mean: 1.833, p95: 3 },
      suggested: 3,
      askedHours: 0.3333,
      suggestedHours: 0.25,
      savedHours: 0.0833,
      savedShare: 0.25,
    });
    // Peak 3 GiB × 1.2 = 3.6 GiB, rounded up to 64 MiB: 3.625 GiB. 8 GiB × 300 s = 0.6667 GiB-h.
    expect(align.ram).toEqual({
      measured: 3,
      asked: { min: 8 * GiB, max: 8 * GiB },
      used: { max: 3 * GiB },
      suggested: 3.625 * GiB,
      askedGiBHours: 0.6667,
      suggestedGiBHours: 0.3021,
      savedGiBHours: 0.3646,
      savedShare: 0.5469,
    });
    expect(body.items[0]).toEqual({ key: '', containers: 1, cpu: null, ram: null });
  });

  it('SQL and the simulator aggregate the same way: one rule', async () => {
    const samples: UsageSample[] = ALIGN.map(([cpu, peak]) => ({
      vcpus: 4,
      ram: 8 * GiB,
      runSeconds: 100,
      cpuSeconds: cpu,
      peakRam: peak,
    }));
    const res = (await t.call(t.tokens.admin, { method: 'GET', url: '/v1/usage' })).json();
    expect(res.items[1]).toEqual(rightSize(aggregateUsage('align', samples)));
  });

  it('a user sees only their own containers; an admin may ask for one owner, or group by owner', async () => {
    const alice = (await t.call(t.tokens.alice, { method: 'GET', url: '/v1/usage' })).json();
    expect(alice.items.map((r: { key: string }) => r.key)).toEqual(['', 'align']);
    const bob = (await t.call(t.tokens.admin, { method: 'GET', url: '/v1/usage?owner=bob' })).json();
    expect(bob.items.map((r: { key: string }) => r.key)).toEqual(['sort']);
    const owners = (await t.call(t.tokens.admin, { method: 'GET', url: '/v1/usage?by=owner' })).json();
    expect(owners.items.map((r: { key: string; containers: number }) => [r.key, r.containers])).toEqual([
      ['alice', 4],
      ['bob', 1],
    ]);
    const forbidden = await t.call(t.tokens.alice, { method: 'GET', url: '/v1/usage?owner=bob' });
    expect(forbidden.statusCode).toBe(403);
    expect(forbidden.json().error.message).toMatch(/^owner: a user token may only see its own usage/);
    expect((await t.call(t.tokens.dispatcher, { method: 'GET', url: '/v1/usage' })).statusCode).toBe(403);
    expect((await t.call(null, { method: 'GET', url: '/v1/usage' })).statusCode).toBe(401);
  });

  it('since: only containers finished since then', async () => {
    const later = new Date(t.clock.now().getTime() + 1000).toISOString();
    const none = (await t.call(t.tokens.admin, { method: 'GET', url: `/v1/usage?since=${later}` })).json();
    expect(none.items).toEqual([]);
    const all = (
      await t.call(t.tokens.admin, { method: 'GET', url: '/v1/usage?since=2026-01-01T00:00:00Z' })
    ).json();
    expect(all.items).toHaveLength(3);
  });

  it('bad parameters are 400s naming the field, and change nothing', async () => {
    const cases: Array<[string, string]> = [
      ['/v1/usage?by=colour', 'by'],
      ['/v1/usage?since=yesterday', 'since'],
      ['/v1/usage?limit=3', 'limit'],
      ['/v1/usage?owner=a%00b', 'owner'],
      ['/v1/usage?since=2026-01-01T00:00:00Z%00', 'since'],
      ['/v1/usage?since=2026-13-01T00:00:00Z', 'since'],
    ];
    for (const [url, field] of cases) {
      const res = await t.call(t.tokens.admin, { method: 'GET', url });
      expect(res.statusCode, url).toBe(400);
      expect(JSON.stringify(res.json().error), url).toContain(field);
    }
  });
});
