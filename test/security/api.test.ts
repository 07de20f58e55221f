// Security properties of the HTTP API (DESIGN §4), in-process against a real database: secrets are stored
// only as hashes, every route but a short public list needs a token, the management API is admin-only,
// oversized bodies are refused with the one error shape and change nothing, and a used bootstrap secret
// stops a real agent.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, AgentFatalError } from '../../src/agent/agent.js';
import { testApi } from '../helpers/api.js';
import { captureLog } from '../helpers/log.js';
import { dump } from '../helpers/store.js';

let t: Awaited<ReturnType<typeof testApi>>;
let node: Awaited<ReturnType<Awaited<ReturnType<typeof testApi>>['node']>>;
let reqId: string;
let ctrId: string;
const dirs: string[] = [];

beforeAll(async () => {
  t = await testApi();
  node = await t.node('i-sec');
  const r = (
    await t.call(t.tokens.alice, { method: 'POST', url: '/v1/requests', payload: { command: ['true'] } })
  ).json();
  reqId = r.id;
  ctrId = r.container_id;
});

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Every operation the API serves, from its own OpenAPI document. */
async function operations(): Promise<{ method: string; path: string }[]> {
  const doc = (await t.call(null, { method: 'GET', url: '/openapi.json' })).json() as {
    paths: Record<string, Record<string, unknown>>;
  };
  const out: { method: string; path: string }[] = [];
  for (const [path, ops] of Object.entries(doc.paths))
    for (const method of Object.keys(ops)) out.push({ method: method.toUpperCase(), path });
  return out;
}

/** A concrete URL for an OpenAPI path template. */
function concrete(path: string): string {
  return path.replace(/\{(\w+)\}/g, (_m, name: string) => {
    if (name === 'action') return 'hold';
    if (/req/i.test(name)) return reqId;
    if (/node/i.test(name)) return node.id;
    return /instance/.test(path) ? 'i-sec' : ctrId;
  });
}

/** The routes that need no token: health, metrics, the API description, and the agent's registration. */
const PUBLIC = ['GET /healthz', 'GET /metrics', 'GET /openapi.json', 'POST /v1/nodes/register'];

describe('API security', () => {
  it('stores no token or bootstrap secret in the database, only hashes', async () => {
    const made = (
      await t.call(t.tokens.admin, {
        method: 'POST',
        url: '/v1/tokens',
        payload: { scope: 'user', owner: 'eve' },
      })
    ).json();
    const created = (
      await t.call(t.tokens.dispatcher, {
        method: 'POST',
        url: '/v1/nodes',
        payload: { cluster: 'c', dispatcher_tag: 't', instance_id: 'i-hash', instance_type: 's' },
      })
    ).json();
    const secrets = [
      t.tokens.admin,
      t.tokens.alice,
      t.tokens.bob,
      t.tokens.dispatcher,
      node.token,
      made.token as string,
      created.bootstrap_secret as string,
    ];
    for (const s of secrets) expect(s).toMatch(/^b[ts]_.{20,}/);
    const tables = (
      await t.store.ctx.pool.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
      )
    ).rows.map((r) => r.table_name);
    expect(tables).toContain('tokens');
    const everything: string[] = [];
    for (const table of tables)
      everything.push(JSON.stringify((await t.store.ctx.pool.query(`SELECT * FROM "${table}"`)).rows));
    const text = everything.join('\n');
    for (const s of secrets) {
      expect(text.includes(s), 'a secret is stored in clear').toBe(false);
      // The 7-character prefix (for `berth token list`) is all that remains of it.
      expect(text.includes(s.slice(7))).toBe(false);
    }
    const tokens = (await t.store.ctx.pool.query(`SELECT hash, prefix FROM tokens`)).rows as {
      hash: string;
      prefix: string;
    }[];
    for (const row of tokens) {
      expect(row.hash).toMatch(/^[0-9a-f]{64}$/);
      expect(row.prefix.length).toBeLessThanOrEqual(7);
    }
    // Listing tokens never shows a secret either.
    const listed = (await t.call(t.tokens.admin, { method: 'GET', url: '/v1/tokens' })).body;
    for (const s of secrets) expect(listed.includes(s)).toBe(false);
  });

  it('every route but the public ones refuses a request without a token (401)', async () => {
    const ops = await operations();
    expect(ops.length).toBeGreaterThan(20);
    const open: string[] = [];
    for (const [i, op] of ops.entries()) {
      const res = await t.call(null, {
        method: op.method as 'GET',
        url: concrete(op.path),
        // one client each, so that the failure throttle does not slow the test down (see throttle.test.ts)
        remoteAddress: `192.0.2.${i + 1}`,
        ...(op.method === 'GET' || op.method === 'DELETE' ? {} : { payload: {} }),
      });
      if (res.statusCode !== 401) open.push(`${op.method} ${op.path}`);
      else expect(res.json().error.code).toBe('unauthorized');
    }
    expect(open.sort()).toEqual([...PUBLIC].sort());
  });

  it('the management API (instances, tokens) is admin-only', async () => {
    const ops = (await operations()).filter(
      (op) => /^\/v1\/(instances|tokens)/.test(op.path) && op.path !== '/v1/whoami',
    );
    expect(ops.map((o) => `${o.method} ${o.path}`)).toEqual(
      expect.arrayContaining(['GET /v1/instances', 'GET /v1/tokens', 'POST /v1/tokens']),
    );
    for (const op of ops) {
      for (const [who, token] of [
        ['user', t.tokens.alice],
        ['dispatcher', t.tokens.dispatcher],
        ['node', node.token],
      ] as const) {
        const before = await dump(t.store);
        const res = await t.call(token, {
          method: op.method as 'GET',
          url: concrete(op.path),
          ...(op.method === 'POST' ? { payload: { scope: 'admin', owner: 'mallory' } } : {}),
        });
        expect(res.statusCode, `${op.method} ${op.path} as ${who}`).toBe(403);
        expect(res.json().error.code).toBe('forbidden');
        expect(await dump(t.store)).toBe(before);
      }
      const res = await t.call(t.tokens.admin, { method: op.method as 'GET', url: concrete(op.path) });
      expect([401, 403], `${op.method} ${op.path} as admin`).not.toContain(res.statusCode);
    }
  });

  it('a body over the limit is 413 with the one error shape and changes nothing', async () => {
    const before = await dump(t.store);
    const big = 'x'.repeat(1024 * 1024 + 1);
    const cases = [
      { url: '/v1/requests', token: t.tokens.alice, payload: JSON.stringify({ command: ['echo', big] }) },
      {
        url: `/v1/requests/${reqId}/cancel`,
        token: t.tokens.alice,
        payload: JSON.stringify({ reason: big }),
      },
      { url: '/v1/tokens', token: t.tokens.admin, payload: JSON.stringify({ scope: 'user', owner: big }) },
      // the batch and log routes allow 16 MiB
      {
        url: '/v1/requests/batch',
        token: t.tokens.alice,
        payload: JSON.stringify({ requests: [{ command: ['echo', 'y'.repeat(16 * 1024 * 1024)] }] }),
      },
      {
        url: `/v1/containers/${ctrId}/logs`,
        token: node.token,
        payload: JSON.stringify({
          lock_token: '1.x',
          chunks: [{ seq: 0, stream: 'stdout', data: 'z'.repeat(16 * 1024 * 1024) }],
        }),
      },
    ];
    for (const c of cases) {
      const res = await t.call(c.token, {
        method: 'POST',
        url: c.url,
        payload: c.payload,
        headers: { 'content-type': 'application/json' },
      });
      expect(res.statusCode, c.url).toBe(413);
      const body = res.json();
      expect(Object.keys(body)).toEqual(['error']);
      expect(body.error).toEqual({
        code: expect.any(String),
        message: expect.any(String),
        details: expect.any(Array),
      });
      expect(body.error.message.length).toBeGreaterThan(0);
    }
    expect(await dump(t.store)).toBe(before);
    // The limit is per route: 2 MB is too much for one request but fine for the batch route.
    const ok = await t.call(t.tokens.alice, {
      method: 'POST',
      url: '/v1/requests/batch',
      payload: JSON.stringify({
        requests: Array.from({ length: 1000 }, () => ({ command: ['echo', 'x'.repeat(2000)] })),
      }),
      headers: { 'content-type': 'application/json' },
    });
    expect(ok.statusCode, ok.body.slice(0, 300)).toBe(201);
  });

  it('an agent given an already used bootstrap secret stops with a fatal error and registers nothing', async () => {
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const addr = t.app.server.address() as { port: number };
    const created = (
      await t.call(t.tokens.dispatcher, {
        method: 'POST',
        url: '/v1/nodes',
        payload: { cluster: 'c', dispatcher_tag: 't', instance_id: 'i-used', instance_type: 's' },
      })
    ).json();
    const reg = await t.call(null, {
      method: 'POST',
      url: '/v1/nodes/register',
      payload: { node_id: created.node.id, secret: created.bootstrap_secret },
    });
    expect(reg.statusCode).toBe(201);
    const dir = mkdtempSync(join(tmpdir(), 'berth-sec-agent-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'secret'), created.bootstrap_secret, { mode: 0o600 });
    const { logger, lines } = captureLog();
    const agent = new Agent({
      apiUrl: `http://127.0.0.1:${addr.port}`,
      nodeId: created.node.id,
      bootstrapSecretFile: join(dir, 'secret'),
      workDir: join(dir, 'work'),
      runtime: 'process',
      logger,
    });
    const err = await agent.run().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AgentFatalError);
    expect((err as Error).message).toMatch(/registration of node .* refused.*401/);
    // and nothing of the secret in what it logged
    expect(lines.join('\n').includes(created.bootstrap_secret)).toBe(false);
    const tokens = (
      await t.store.ctx.pool.query(`SELECT count(*)::int AS n FROM tokens WHERE node_id = $1`, [
        created.node.id,
      ])
    ).rows[0].n;
    expect(tokens).toBe(1); // the first registration's, no second one
  });
});
