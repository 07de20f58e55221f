// Cost and labels through the HTTP API: validation names the field and changes nothing, users see their
// own costs only, admins see the instances' side, and /metrics counts spend by type.
import { describe, expect, it } from 'vitest';
import { dump } from '../helpers/store.js';
import { testApi } from '../helpers/api.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const at = (s: number) => new Date(T0 + s * 1000);

describe('cost API', async () => {
  const api = await testApi();
  const { call, tokens, store, clock } = api;

  /** A request of `token`'s owner that ran on instance i-1 from 0 to 1800 s. */
  async function ranRequest(token: string, labels: Record<string, string>) {
    const r = await call(token, {
      method: 'POST',
      url: '/v1/requests',
      payload: { command: ['true'], vcpus: 0.5, ram: '512MiB', labels },
    });
    expect(r.statusCode, r.body).toBe(201);
    await store.ctx.pool.query(
      `UPDATE containers SET state = 'Complete', instance_id = 'i-1', started_at = $2, finished_at = $3 WHERE id = $1`,
      [r.json().container_id, at(0), at(1800)],
    );
    return r.json() as { id: string; labels: Record<string, string> };
  }

  it('stores labels, and refuses bad ones naming the field without changing anything', async () => {
    const before = await dump(store);
    for (const [labels, field] of [
      [{ '1team': 'x' }, 'labels.1team'],
      [{ team: 'a;b' }, 'labels.team'],
      [{ 'berth-type': 'x' }, 'labels.berth-type'],
      [{ 'AWS:x': 'y' }, 'labels.AWS:x'],
    ] as const) {
      const r = await call(tokens.alice, {
        method: 'POST',
        url: '/v1/requests',
        payload: { command: ['true'], labels },
      });
      expect(r.statusCode, r.body).toBe(400);
      expect(r.json().error.details.map((d: { field: string }) => d.field)).toContain(field);
    }
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v']));
    const r = await call(tokens.alice, {
      method: 'POST',
      url: '/v1/requests',
      payload: { command: ['true'], labels: many },
    });
    expect(r.statusCode).toBe(400);
    expect(r.json().error.details[0].field).toBe('labels');
    expect(await dump(store)).toBe(before);
  });

  it('a user sees their own costs and requests only; an admin everyone, with the instances', async () => {
    await store.ctx.pool.query(
      `INSERT INTO instances (id, cluster, dispatcher_tag, type, provider_type, price, state, idle_behavior, created_at,
         state_since, updated_at, vcpus, ram, scratch, gpus, ended_at, gone_at)
       VALUES ('i-1', 'c', 't', 'small', 'small', 0.2, 'gone', 'run', $1, $1, $1, 1, 2147483648, 0, 0, $2, $2)`,
      [at(0), at(3600)],
    );
    const mine = await ranRequest(tokens.alice, { team: 'gen' });
    expect(mine.labels).toEqual({ team: 'gen' });
    const theirs = await ranRequest(tokens.bob, { team: 'ops' });
    clock.set(at(7200));

    const alice = await call(tokens.alice, { method: 'GET', url: '/v1/cost?by=label:team' });
    expect(alice.statusCode, alice.body).toBe(200);
    expect(alice.json().groups.map((g: { key: string }) => g.key)).toEqual(['gen']);
    expect(alice.json().total).toBeCloseTo(0.1, 9);
    expect(alice.json().instances).toBeNull();
    expect((await call(tokens.alice, { method: 'GET', url: '/v1/cost?owner=bob' })).statusCode).toBe(403);

    const admin = await call(tokens.admin, { method: 'GET', url: '/v1/cost?by=owner' });
    expect(
      admin
        .json()
        .groups.map((g: { key: string }) => g.key)
        .sort(),
    ).toEqual(['alice', 'bob']);
    expect(admin.json().instances.cost).toBeCloseTo(0.2, 9);
    expect(admin.json().total + admin.json().instances.unattributed).toBeCloseTo(0.2, 9);
    const since = await call(tokens.admin, { method: 'GET', url: `/v1/cost?since=${at(900).toISOString()}` });
    expect(since.json().instances.cost).toBeCloseTo((0.2 * 2700) / 3600, 9);

    const own = await call(tokens.alice, { method: 'GET', url: `/v1/requests/${mine.id}/cost` });
    expect(own.statusCode).toBe(200);
    expect(own.json().cost).toBeCloseTo(0.1, 9);
    expect(own.json().items).toEqual([
      expect.objectContaining({ type: 'small', share: 0.5, run_seconds: 1800 }),
    ]);
    const other = await call(tokens.alice, { method: 'GET', url: `/v1/requests/${theirs.id}/cost` });
    expect(other.statusCode).toBe(404);
  });

  it('refuses a bad window or grouping, naming the parameter', async () => {
    for (const [q, field] of [
      ['since=yesterday', 'since'],
      ['until=2026-13-01T00:00:00Z', 'until'],
      ['since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z', 'until'],
      ['by=colour', 'by'],
      ['by=label:', 'by'],
      ['limit=0', 'limit'],
      ['extra=1', 'extra'],
    ]) {
      const r = await call(tokens.admin, { method: 'GET', url: `/v1/cost?${q}` });
      expect(r.statusCode, `${q}: ${r.body}`).toBe(400);
      expect(r.json().error.details[0].field, q).toBe(field);
    }
  });

  it('counts spend and billed hours by type on /metrics', async () => {
    const r = await call(null, { method: 'GET', url: '/metrics' });
    expect(r.body).toMatch(/^berth_spend_total\{type="small"\} 0\.2$/m);
    expect(r.body).toMatch(/^berth_instance_hours_total\{type="small"\} 1$/m);
  });
});
