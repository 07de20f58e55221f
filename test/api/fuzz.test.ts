// Fuzzing the HTTP API: random and malformed JSON to every endpoint must give a 4xx with a field-level
// message, never a 5xx, and change no row.
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { testApi } from '../helpers/api.js';
import { dump } from '../helpers/store.js';

const RUNS = Number(process.env.BERTH_FUZZ_RUNS ?? 400);

let t: Awaited<ReturnType<typeof testApi>>;
let ids: { req: string; ctr: string; node: string; nodeToken: string };

beforeAll(async () => {
  t = await testApi();
  const n = await t.node('i-fuzz');
  const r = (
    await t.call(t.tokens.alice, { method: 'POST', url: '/v1/requests', payload: { command: ['true'] } })
  ).json();
  ids = { req: r.id, ctr: r.container_id, node: n.id, nodeToken: n.token };
});

/** Endpoints with a body, each with a valid example to mutate and the token that may call it. */
const BODY_ENDPOINTS: {
  method: 'POST' | 'PATCH';
  path: string;
  who: 'admin' | 'node' | 'none';
  valid: object;
}[] = [
  {
    method: 'POST',
    path: '/v1/requests',
    who: 'admin',
    valid: { command: ['echo'], ram: '1GiB', vcpus: 1, priority: 5 },
  },
  { method: 'POST', path: '/v1/requests/batch', who: 'admin', valid: { requests: [{ command: ['echo'] }] } },
  { method: 'PATCH', path: '/v1/requests/:req', who: 'admin', valid: { priority: 7 } },
  { method: 'POST', path: '/v1/requests/:req/cancel', who: 'admin', valid: { reason: 'x' } },
  { method: 'POST', path: '/v1/containers/:ctr/cancel', who: 'admin', valid: { class: 'user', reason: 'x' } },
  { method: 'POST', path: '/v1/containers/lock', who: 'admin', valid: { dispatcher_id: 'd-1', ids: [] } },
  {
    method: 'POST',
    path: '/v1/containers/:ctr/unlock',
    who: 'admin',
    valid: { dispatcher_id: 'd-1', reason: 'x' },
  },
  {
    method: 'POST',
    path: '/v1/containers/:ctr/assign',
    who: 'admin',
    valid: { dispatcher_id: 'd-1', instance_id: 'i-1' },
  },
  { method: 'POST', path: '/v1/containers/:ctr/start', who: 'node', valid: { lock_token: '1.x' } },
  {
    method: 'POST',
    path: '/v1/containers/:ctr/complete',
    who: 'node',
    valid: { lock_token: '1.x', exit_code: 0 },
  },
  { method: 'POST', path: '/v1/containers/:ctr/logs', who: 'node', valid: { lock_token: '1.x', chunks: [] } },
  {
    method: 'POST',
    path: '/v1/nodes',
    who: 'admin',
    valid: { cluster: 'c', dispatcher_tag: 't', instance_id: 'i-z', instance_type: 's' },
  },
  { method: 'POST', path: '/v1/nodes/register', who: 'none', valid: { node_id: 'n-x', secret: 'bs_x' } },
  { method: 'POST', path: '/v1/nodes/:node/ping', who: 'node', valid: { state: 'idle' } },
  { method: 'POST', path: '/v1/tokens', who: 'admin', valid: { scope: 'user', owner: 'zed' } },
];

const GET_ENDPOINTS = [
  '/v1/requests',
  '/v1/containers',
  '/v1/containers/:ctr/logs',
  '/v1/requests/:req',
  '/v1/containers/:ctr',
];

function resolve(path: string): string {
  return path.replace(':req', ids.req).replace(':ctr', ids.ctr).replace(':node', ids.node);
}

/** A value that is surely invalid for an object-typed body: unknown field, wrong type, or not an object. */
const invalidBody = (valid: object) =>
  fc.oneof(
    // an unknown field next to valid ones
    fc
      .tuple(fc.string({ minLength: 1, maxLength: 12 }), fc.jsonValue())
      .filter(([k]) => !(k in valid))
      .map(([k, v]) => ({ ...valid, [k]: v })),
    // a known field with a value of another JSON type or out of range
    fc
      .tuple(
        fc.constantFrom(...Object.keys(valid)),
        fc.oneof(
          fc.constant(null),
          fc.boolean(),
          fc.double(),
          fc.dictionary(fc.string(), fc.integer()),
          fc.constant(-1),
          fc.constant('∞'),
          fc.string({ maxLength: 5 }).map((s) => [s, 1]),
        ),
      )
      .filter(
        ([k, v]) =>
          typeof v !== typeof (valid as Record<string, unknown>)[k] ||
          v === null ||
          Array.isArray(v) !== Array.isArray((valid as Record<string, unknown>)[k]),
      )
      .map(([k, v]) => ({ ...valid, [k]: v })),
    // not an object at all
    fc.oneof(fc.array(fc.jsonValue(), { maxLength: 3 }), fc.string(), fc.integer(), fc.boolean()),
  );

/** Raw text that is not valid JSON. */
const malformed = fc.oneof(
  fc.constantFrom('{', '{"command": [', '[1,2', 'nul', '{"a":1,}', "{'a':1}", '\u0000', '{"a": NaN}'),
  fc.string({ minLength: 1, maxLength: 30 }).filter((s) => {
    try {
      JSON.parse(s);
      return false;
    } catch {
      return true;
    }
  }),
);

describe('API fuzz', () => {
  it('invalid bodies: 4xx with field-level details, never 5xx, no row changed', async () => {
    const before = await dump(t.store);
    await fc.assert(
      fc.asyncProperty(
        fc
          .nat(BODY_ENDPOINTS.length - 1)
          .chain((i) => fc.tuple(fc.constant(BODY_ENDPOINTS[i]!), invalidBody(BODY_ENDPOINTS[i]!.valid))),
        async ([e, body]) => {
          const token = e.who === 'admin' ? t.tokens.admin : e.who === 'node' ? ids.nodeToken : null;
          const res = await t.call(token, {
            method: e.method,
            url: resolve(e.path),
            payload: JSON.stringify(body),
            headers: { 'content-type': 'application/json' },
          });
          expect(res.statusCode, `${e.path} ${JSON.stringify(body)} → ${res.body}`).toBeGreaterThanOrEqual(
            400,
          );
          expect(res.statusCode, `${e.path} ${JSON.stringify(body)} → ${res.body}`).toBeLessThan(500);
          const err = res.json().error;
          expect(err.message.length).toBeGreaterThan(0);
          if (res.statusCode === 400) expect(err.details.length, res.body).toBeGreaterThan(0);
        },
      ),
      { numRuns: RUNS, seed: 7 },
    );
    expect(await dump(t.store)).toBe(before);
  });

  it('malformed JSON: 400 invalid_json, never 5xx, no row changed', async () => {
    const before = await dump(t.store);
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...BODY_ENDPOINTS), malformed, async (e, text) => {
        const token = e.who === 'admin' ? t.tokens.admin : e.who === 'node' ? ids.nodeToken : null;
        const res = await t.call(token, {
          method: e.method,
          url: resolve(e.path),
          payload: text,
          headers: { 'content-type': 'application/json' },
        });
        expect(res.statusCode, `${e.path} ${JSON.stringify(text)} → ${res.body}`).toBe(400);
        expect(res.json().error.details[0].field).toBe('body');
      }),
      { numRuns: Math.ceil(RUNS / 4), seed: 11 },
    );
    expect(await dump(t.store)).toBe(before);
  });

  it('random query strings on list and read endpoints: never 5xx', async () => {
    const before = await dump(t.store);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...GET_ENDPOINTS),
        fc.dictionary(
          fc.constantFrom('state', 'limit', 'cursor', 'priority_min', 'owner', 'after', 'follow', 'x'),
          fc.string({ maxLength: 8 }),
        ),
        async (path, query) => {
          const qs = new URLSearchParams(query).toString();
          const res = await t.call(t.tokens.admin, { method: 'GET', url: `${resolve(path)}?${qs}` });
          expect(res.statusCode, `${path}?${qs} → ${res.body}`).toBeLessThan(500);
          if (res.statusCode === 400) expect(res.json().error.details.length).toBeGreaterThan(0);
        },
      ),
      { numRuns: Math.ceil(RUNS / 4), seed: 13 },
    );
    expect(await dump(t.store)).toBe(before);
  });
});
