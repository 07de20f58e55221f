import { beforeAll, describe, expect, it } from 'vitest';
import { testApi } from '../helpers/api.js';

let t: Awaited<ReturnType<typeof testApi>>;
beforeAll(async () => {
  t = await testApi();
});

describe('requests API', () => {
  it('submits, normalises units, lists and gets', async () => {
    const res = await t.call(t.tokens.alice, {
      method: 'POST',
      url: '/v1/requests',
      payload: { command: ['echo', 'hi'], vcpus: 2, ram: '4GiB', name: 'greet', max_run_time: '90s' },
    });
    expect(res.statusCode).toBe(201);
    const r = res.json();
    expect(r).toMatchObject({
      owner: 'alice',
      vcpus: 2,
      ram: 4 * 1024 ** 3,
      state: 'Committed',
      max_run_time_ms: 90_000,
      priority: 500,
    });
    const got = await t.call(t.tokens.alice, { method: 'GET', url: `/v1/requests/${r.id}` });
    expect(got.json().id).toBe(r.id);
    const c = await t.call(t.tokens.alice, { method: 'GET', url: `/v1/containers/${r.container_id}` });
    expect(c.json()).toMatchObject({ state: 'Queued', request_id: r.id, attempt: 1 });
  });

  it('rejects malformed input with a field-level 400 and changes nothing', async () => {
    const before = await t.store.ctx.pool.query('SELECT count(*)::int AS n FROM container_requests');
    const cases: [unknown, string][] = [
      [{ command: ['x'], ram: '4 gigs' }, 'ram'],
      [{ command: [] }, 'command'],
      [{ command: ['x'], colour: 'blue' }, 'colour'],
      [{ command: ['x'], priority: 5000 }, 'priority'],
      [{ command: ['x'], vcpus: -1 }, 'vcpus'],
      [{ command: ['x'], run_after: 'tomorrow' }, 'run_after'],
      [{ command: ['x'], env: { 'BAD-NAME': 'x' } }, 'env.BAD-NAME'],
      [{}, 'command'],
    ];
    for (const [payload, field] of cases) {
      const res = await t.call(t.tokens.alice, {
        method: 'POST',
        url: '/v1/requests',
        payload: payload as object,
      });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      const body = res.json();
      expect(body.error.code).toBe('invalid');
      expect(body.error.details.map((d: { field: string }) => d.field)).toContain(field);
    }
    const bad = await t.app.inject({
      method: 'POST',
      url: '/v1/requests',
      headers: { authorization: `Bearer ${t.tokens.alice}`, 'content-type': 'application/json' },
      payload: '{"command": [',
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe('invalid_json');
    const after = await t.store.ctx.pool.query('SELECT count(*)::int AS n FROM container_requests');
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it('batch submits up to 1,000 and rejects the whole batch when one is bad', async () => {
    const ok = await t.call(t.tokens.bob, {
      method: 'POST',
      url: '/v1/requests/batch',
      payload: {
        requests: Array.from({ length: 50 }, (_, i) => ({ command: ['echo', String(i)], name: `b${i}` })),
      },
    });
    expect(ok.statusCode).toBe(201);
    expect(ok.json().items).toHaveLength(50);
    const bad = await t.call(t.tokens.bob, {
      method: 'POST',
      url: '/v1/requests/batch',
      payload: { requests: [{ command: ['ok'] }, { command: ['x'], ram: 'lots' }] },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details[0].field).toBe('requests.1.ram');
  });

  it('filters and paginates with a cursor', async () => {
    await t.call(t.tokens.bob, {
      method: 'POST',
      url: '/v1/requests/batch',
      payload: {
        requests: Array.from({ length: 25 }, (_, i) => ({
          command: ['true'],
          name: `page-${i}`,
          priority: 100 + i,
        })),
      },
    });
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await t.call(t.tokens.bob, {
        method: 'GET',
        url: `/v1/requests?name=page-&limit=10${cursor ? `&cursor=${cursor}` : ''}`,
      });
      expect(res.statusCode).toBe(200);
      const page = res.json();
      seen.push(...page.items.map((r: { name: string }) => r.name));
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen).toHaveLength(25);
    expect(new Set(seen).size).toBe(25);
    const hi = await t.call(t.tokens.bob, { method: 'GET', url: '/v1/requests?priority_min=120&name=page-' });
    expect(hi.json().items).toHaveLength(5);
    const badLimit = await t.call(t.tokens.bob, { method: 'GET', url: '/v1/requests?limit=5000' });
    expect(badLimit.statusCode).toBe(400);
    expect(badLimit.json().error.details[0].field).toBe('limit');
    const badCursor = await t.call(t.tokens.bob, { method: 'GET', url: '/v1/requests?cursor=zzz' });
    expect(badCursor.statusCode).toBe(400);
  });

  it('cancel makes the request Final and its container Cancelled; cancelling it again is a 409 saying it has finished', async () => {
    const r = (
      await t.call(t.tokens.alice, {
        method: 'POST',
        url: '/v1/requests',
        payload: { command: ['sleep', '100'] },
      })
    ).json();
    const res = await t.call(t.tokens.alice, {
      method: 'POST',
      url: `/v1/requests/${r.id}/cancel`,
      payload: {},
    });
    expect(res.json()).toMatchObject({ state: 'Final', outcome: 'cancelled' });
    const c = (
      await t.call(t.tokens.alice, { method: 'GET', url: `/v1/containers/${r.container_id}` })
    ).json();
    expect(c).toMatchObject({ state: 'Cancelled', failure_class: 'user' });
    const again = await t.call(t.tokens.alice, {
      method: 'POST',
      url: `/v1/containers/${r.container_id}/cancel`,
      payload: {},
    });
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toMatchObject({
      code: 'already_finished',
      message: `container ${r.container_id} has already finished (Cancelled)`,
    });
  });

  it('serves /healthz, /openapi.json and /metrics', async () => {
    expect((await t.app.inject({ url: '/healthz' })).json()).toEqual({ ok: true, database: 'up' });
    const doc = (await t.app.inject({ url: '/openapi.json' })).json();
    expect(
      doc.paths['/v1/requests'].post.requestBody.content['application/json'].schema.properties.ram,
    ).toBeDefined();
    expect(doc.paths['/v1/containers/{id}/complete'].post['x-scopes']).toEqual(['node']);
    const m = await t.app.inject({ url: '/metrics' });
    expect(m.body).toMatch(/berth_containers\{state="Queued"\} \d+/);
  });
});
