// The auth matrix (DESIGN §4): each scope × each endpoint → 401/403/allowed, plus ownership rules.
import { beforeAll, describe, expect, it } from 'vitest';
import { testApi } from '../helpers/api.js';

let t: Awaited<ReturnType<typeof testApi>>;
let node: { id: string; token: string; instanceId: string };
let reqId: string;
let containerId: string;

beforeAll(async () => {
  t = await testApi();
  node = await t.node();
  const r = (
    await t.call(t.tokens.alice, { method: 'POST', url: '/v1/requests', payload: { command: ['true'] } })
  ).json();
  reqId = r.id;
  containerId = r.container_id;
});

type Who = 'none' | 'admin' | 'user' | 'dispatcher' | 'node';
const WHO: Who[] = ['none', 'admin', 'user', 'dispatcher', 'node'];

function token(w: Who): string | null {
  return {
    none: null,
    admin: t.tokens.admin,
    user: t.tokens.alice,
    dispatcher: t.tokens.dispatcher,
    node: node.token,
  }[w];
}

const ENDPOINTS: {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  body?: () => object;
  allowed: Who[];
}[] = [
  { method: 'POST', path: '/v1/requests', body: () => ({ command: ['true'] }), allowed: ['admin', 'user'] },
  {
    method: 'POST',
    path: '/v1/requests/batch',
    body: () => ({ requests: [{ command: ['true'] }] }),
    allowed: ['admin', 'user'],
  },
  { method: 'GET', path: '/v1/requests', allowed: ['admin', 'user'] },
  { method: 'GET', path: '/v1/requests/:req', allowed: ['admin', 'user'] },
  { method: 'PATCH', path: '/v1/requests/:req', body: () => ({ priority: 600 }), allowed: ['admin', 'user'] },
  { method: 'GET', path: '/v1/containers', allowed: ['admin', 'user', 'dispatcher'] },
  { method: 'GET', path: '/v1/containers/:ctr/events', allowed: ['admin', 'user', 'dispatcher'] },
  { method: 'GET', path: '/v1/containers/:ctr/logs', allowed: ['admin', 'user'] },
  {
    method: 'POST',
    path: '/v1/containers/lock',
    body: () => ({ dispatcher_id: 'd-x', ids: [] }),
    allowed: ['admin', 'dispatcher'],
  },
  {
    method: 'POST',
    path: '/v1/containers/:ctr/unlock',
    body: () => ({ dispatcher_id: 'd-x', reason: 'r' }),
    allowed: ['admin', 'dispatcher'],
  },
  {
    method: 'POST',
    path: '/v1/containers/:ctr/assign',
    body: () => ({ dispatcher_id: 'd-x', instance_id: 'i-1' }),
    allowed: ['admin', 'dispatcher'],
  },
  {
    method: 'POST',
    path: '/v1/containers/:ctr/start',
    body: () => ({ lock_token: '1.x' }),
    allowed: ['node'],
  },
  {
    method: 'POST',
    path: '/v1/containers/:ctr/complete',
    body: () => ({ lock_token: '1.x', exit_code: 0 }),
    allowed: ['node'],
  },
  {
    method: 'POST',
    path: '/v1/containers/:ctr/logs',
    body: () => ({ lock_token: '1.x', chunks: [] }),
    allowed: ['node'],
  },
  {
    method: 'POST',
    path: '/v1/nodes',
    body: () => ({
      cluster: 'c',
      dispatcher_tag: 't',
      instance_id: `i-${Math.random()}`,
      instance_type: 's',
    }),
    allowed: ['admin', 'dispatcher'],
  },
  { method: 'GET', path: '/v1/nodes', allowed: ['admin', 'dispatcher'] },
  { method: 'POST', path: '/v1/nodes/:node/ping', body: () => ({ state: 'idle' }), allowed: ['node'] },
  { method: 'POST', path: '/v1/nodes/:node/next', body: () => ({}), allowed: ['node'] },
  { method: 'POST', path: '/v1/tokens', body: () => ({ scope: 'user', owner: 'carol' }), allowed: ['admin'] },
  { method: 'GET', path: '/v1/tokens', allowed: ['admin'] },
  { method: 'DELETE', path: '/v1/tokens/999999', allowed: ['admin'] },
  { method: 'GET', path: '/v1/whoami', allowed: ['admin', 'user', 'dispatcher', 'node'] },
];

describe('auth matrix', () => {
  const rows = ENDPOINTS.flatMap((e) => WHO.map((w) => [`${e.method} ${e.path}`, w, e] as const));
  it.each(rows)('%s as %s', async (_name, w, e) => {
    const url = e.path.replace(':req', reqId).replace(':ctr', containerId).replace(':node', node.id);
    const res = await t.call(token(w), { method: e.method, url, ...(e.body ? { payload: e.body() } : {}) });
    if (w === 'none') expect(res.statusCode).toBe(401);
    else if (!e.allowed.includes(w)) expect(res.statusCode).toBe(403);
    else {
      // allowed by scope: anything but an auth refusal (a node may still be refused a container that is
      // not assigned to it, which is a 403 about the container, not about the scope)
      expect(res.statusCode).not.toBe(401);
      if (res.statusCode === 403) expect(res.json().error.message).not.toMatch(/needs a token with scope/);
    }
    if (res.statusCode >= 400) expect(res.json().error.code).toEqual(expect.any(String));
    expect(res.statusCode).toBeLessThan(500);
  });

  it('an unknown or revoked token is 401', async () => {
    expect((await t.call('bt_nope', { method: 'GET', url: '/v1/requests' })).statusCode).toBe(401);
    const made = (
      await t.call(t.tokens.admin, {
        method: 'POST',
        url: '/v1/tokens',
        payload: { scope: 'user', owner: 'dave' },
      })
    ).json();
    expect((await t.call(made.token, { method: 'GET', url: '/v1/requests' })).statusCode).toBe(200);
    expect(
      (await t.call(t.tokens.admin, { method: 'DELETE', url: `/v1/tokens/${made.info.id}` })).statusCode,
    ).toBe(204);
    expect((await t.call(made.token, { method: 'GET', url: '/v1/requests' })).statusCode).toBe(401);
  });

  it("a user never sees another user's requests or containers", async () => {
    expect((await t.call(t.tokens.bob, { method: 'GET', url: `/v1/requests/${reqId}` })).statusCode).toBe(
      404,
    );
    expect(
      (await t.call(t.tokens.bob, { method: 'GET', url: `/v1/containers/${containerId}` })).statusCode,
    ).toBe(404);
    expect(
      (await t.call(t.tokens.bob, { method: 'POST', url: `/v1/requests/${reqId}/cancel`, payload: {} }))
        .statusCode,
    ).toBe(404);
    expect((await t.call(t.tokens.bob, { method: 'GET', url: `/v1/requests?owner=alice` })).statusCode).toBe(
      403,
    );
    const list = (await t.call(t.tokens.bob, { method: 'GET', url: '/v1/requests' })).json();
    expect(list.items.every((r: { owner: string }) => r.owner === 'bob')).toBe(true);
    const all = (await t.call(t.tokens.admin, { method: 'GET', url: '/v1/requests?owner=alice' })).json();
    expect(all.items.length).toBeGreaterThan(0);
  });

  it('a node token never touches a container not assigned to it', async () => {
    const other = await t.node();
    const { cid } = await t.submit({ command: ['true'] });
    const tok = await t.place(cid, other);
    // node (not the assignee) with the right lock token: refused on every operation
    for (const [url, payload] of [
      [`/v1/containers/${cid}/start`, { lock_token: tok }],
      [`/v1/containers/${cid}/complete`, { lock_token: tok, exit_code: 0 }],
      [`/v1/containers/${cid}/logs`, { lock_token: tok, chunks: [{ seq: 0, stream: 'stdout', data: 'x' }] }],
      [`/v1/containers/${cid}/cancel`, { lock_token: tok, class: 'temp' }],
    ] as const) {
      const res = await t.call(node.token, { method: 'POST', url, payload });
      expect([403, 404], url).toContain(res.statusCode);
    }
    expect((await t.call(node.token, { method: 'GET', url: `/v1/containers/${cid}` })).statusCode).toBe(404);
    expect(
      (
        await t.call(node.token, {
          method: 'POST',
          url: `/v1/nodes/${other.id}/ping`,
          payload: { state: 'idle' },
        })
      ).statusCode,
    ).toBe(403);
    // the assignee can
    expect(
      (
        await t.call(other.token, {
          method: 'POST',
          url: `/v1/containers/${cid}/start`,
          payload: { lock_token: tok },
        })
      ).statusCode,
    ).toBe(200);
  });

  it('a bootstrap secret works once', async () => {
    const created = (
      await t.call(t.tokens.dispatcher, {
        method: 'POST',
        url: '/v1/nodes',
        payload: { cluster: 'c', dispatcher_tag: 't', instance_id: 'i-once', instance_type: 's' },
      })
    ).json();
    const body = { node_id: created.node.id, secret: created.bootstrap_secret };
    expect(
      (await t.call(null, { method: 'POST', url: '/v1/nodes/register', payload: body })).statusCode,
    ).toBe(201);
    expect(
      (await t.call(null, { method: 'POST', url: '/v1/nodes/register', payload: body })).statusCode,
    ).toBe(401);
    expect(
      (
        await t.call(null, {
          method: 'POST',
          url: '/v1/nodes/register',
          payload: { ...body, secret: 'bs_wrong' },
        })
      ).statusCode,
    ).toBe(401);
  });
});
