// Every route, every input: a property-based fuzz of each path parameter, query parameter and body field
// of every route the API serves (read from its own /openapi.json, so a new route is fuzzed too) with NUL
// bytes, huge numbers, odd encodings (bad %-escapes, overlong UTF-8, lone surrogates) and RTL or control
// characters, through app.inject(). Never a 5xx; every 4xx in the one error shape, and a 400 names the
// field that was attacked (or "path", "query", "url" or "body" when the encoding itself is wrong).
// Runs: BERTH_FUZZ_RUNS (CI sets 10000).
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { testApi } from '../helpers/api.js';

// More than the other fuzz files' 400 by default: one run attacks one input of one route, and there are
// about 100 inputs (about 2 s per 1,000 runs here; 10,000 in CI take about 20 s under shared load).
const RUNS = Number(process.env.BERTH_FUZZ_RUNS ?? 1500);

let t: Awaited<ReturnType<typeof testApi>>;
let ids: Record<string, string>;

interface Op {
  method: string;
  path: string;
  pathParams: string[];
  queryParams: string[];
  /** Body field paths ("name", "requests.0.ram", "chunks.0.data"). */
  bodyFields: string[];
}

/** A valid call of each route, the base that one input at a time is replaced in. */
interface Example {
  who: 'admin' | 'alice' | 'node' | 'none';
  params?: Record<string, string>;
  query?: Record<string, string>;
  body?: Record<string, unknown>;
}

function examples(): Record<string, Example> {
  const r = { id: ids.req! };
  const c = { id: ids.ctr! };
  const n = { id: ids.node! };
  return {
    'GET /healthz': { who: 'none' },
    'GET /metrics': { who: 'none' },
    'GET /openapi.json': { who: 'none' },
    'GET /v1/whoami': { who: 'alice' },
    'POST /v1/requests': { who: 'alice', body: { command: ['echo', 'hi'], ram: '64MiB', vcpus: 0.5 } },
    'POST /v1/requests/batch': { who: 'alice', body: { requests: [{ command: ['true'], ram: '64MiB' }] } },
    'GET /v1/requests': { who: 'admin', query: { limit: '5', state: 'Committed' } },
    'GET /v1/requests/{id}': { who: 'alice', params: r },
    'PATCH /v1/requests/{id}': { who: 'alice', params: r, body: { priority: 7 } },
    'POST /v1/requests/{id}/cancel': { who: 'alice', params: r, body: { reason: 'fuzz' } },
    'GET /v1/containers': { who: 'admin', query: { limit: '5', request_id: ids.req! } },
    'GET /v1/containers/{id}': { who: 'alice', params: c },
    'GET /v1/containers/{id}/events': { who: 'alice', params: c },
    'GET /v1/containers/{id}/logs': { who: 'alice', params: c, query: { after: '-1', limit: '10' } },
    'POST /v1/containers/{id}/logs': {
      who: 'node',
      params: c,
      body: { lock_token: '1.x', chunks: [{ seq: 0, stream: 'stdout', data: 'x' }] },
    },
    // The checkpoint bodies are tar archives (test/api/checkpoints.test.ts): fuzzed through path and query.
    'PUT /v1/containers/{id}/checkpoint': { who: 'node', params: c, query: { reclaimed: 'true' } },
    'GET /v1/containers/{id}/checkpoint': { who: 'node', params: c },
    'POST /v1/containers/{id}/cancel': { who: 'alice', params: c, body: { class: 'user', reason: 'fuzz' } },
    'POST /v1/containers/{id}/pause': { who: 'alice', params: c },
    'POST /v1/containers/{id}/resume': { who: 'alice', params: c },
    'POST /v1/containers/lock': { who: 'admin', body: { dispatcher_id: 'c1/t1', ids: [ids.ctr!] } },
    'POST /v1/containers/{id}/unlock': {
      who: 'admin',
      params: c,
      body: { dispatcher_id: 'c1/t1', reason: 'fuzz' },
    },
    'POST /v1/containers/{id}/assign': {
      who: 'admin',
      params: c,
      body: { dispatcher_id: 'c1/t1', instance_id: 'i-fuzz', node_id: ids.node! },
    },
    'POST /v1/containers/{id}/start': { who: 'node', params: c, body: { lock_token: '1.x' } },
    'POST /v1/containers/{id}/complete': {
      who: 'node',
      params: c,
      body: {
        lock_token: '1.x',
        exit_code: 0,
        oom_killed: false,
        usage: { peak_ram: 1, cpu_seconds: 0.5, wall_ms: 3 },
        reason: 'done',
      },
    },
    'POST /v1/nodes': {
      who: 'admin',
      body: { cluster: 'c1', dispatcher_tag: 't1', instance_id: 'i-fz', instance_type: 'small' },
    },
    'POST /v1/nodes/register': {
      who: 'none',
      body: {
        node_id: ids.node!,
        secret: 'bs_wrong',
        info: { hostname: 'h', pid: 1, runtimes: ['process'] },
      },
    },
    'GET /v1/nodes': { who: 'admin' },
    'GET /v1/nodes/{id}': { who: 'admin', params: n },
    'POST /v1/nodes/{id}/ping': {
      who: 'node',
      params: n,
      body: { state: 'idle', running: [], usage: {}, paused: [] },
    },
    'POST /v1/nodes/{id}/next': { who: 'node', params: n, body: {} },
    'POST /v1/nodes/{id}/reports': {
      who: 'node',
      params: n,
      body: {
        reports: [
          { kind: 'exit', id: ids.ctr!, lock_token: '1.x', exit_code: 1, usage: null, reason: 'fuzz' },
        ],
      },
    },
    'GET /v1/tokens': { who: 'admin' },
    'POST /v1/tokens': {
      who: 'admin',
      body: { scope: 'user', owner: 'fuzz', description: 'd', max_priority: 9 },
    },
    'DELETE /v1/tokens/{id}': { who: 'admin', params: { id: ids.throwawayToken! } },
    'GET /v1/instances': { who: 'admin' },
    'GET /v1/instances/{id}': { who: 'admin', params: { id: 'i-fuzz' } },
    'POST /v1/instances/{id}/{action}': {
      who: 'admin',
      params: { id: 'i-fuzz', action: 'hold' },
      body: { freeze: true },
    },
    'GET /v1/cost': {
      who: 'alice',
      query: { since: '2020-01-01T00:00:00Z', until: '2030-01-01T00:00:00Z', by: 'label:team', limit: '5' },
    },
    'GET /v1/requests/{id}/cost': { who: 'alice', params: r },
    'POST /v1/dashboard/signin-links': { who: 'alice', body: {} },
    'GET /v1/usage': {
      who: 'admin',
      query: { by: 'owner', owner: 'alice', since: '2026-01-01T00:00:00Z' },
    },
  };
}

/** Body field paths from a JSON schema: top-level fields, and one level into objects and arrays of objects. */
function fieldsOf(schema: Record<string, unknown> | undefined): string[] {
  const props = (schema?.properties ?? {}) as Record<string, Record<string, unknown>>;
  const out: string[] = [];
  for (const [k, s] of Object.entries(props)) {
    out.push(k);
    const inner = (s.items ?? s) as Record<string, unknown>;
    const sub = inner.properties as Record<string, unknown> | undefined;
    if (sub) for (const j of Object.keys(sub)) out.push(s.items ? `${k}.0.${j}` : `${k}.${j}`);
  }
  return out;
}

async function operations(): Promise<Op[]> {
  const doc = (await t.app.inject({ url: '/openapi.json' })).json() as {
    paths: Record<string, Record<string, Record<string, unknown>>>;
  };
  const ops: Op[] = [];
  for (const [path, methods] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(methods)) {
      const params = (op.parameters ?? []) as { name: string; in: string }[];
      const body = (
        op.requestBody as { content: Record<string, { schema: Record<string, unknown> }> } | undefined
      )?.content['application/json']?.schema;
      ops.push({
        method: method.toUpperCase(),
        path,
        pathParams: params.filter((p) => p.in === 'path').map((p) => p.name),
        queryParams: params.filter((p) => p.in === 'query').map((p) => p.name),
        bodyFields: fieldsOf(body),
      });
    }
  return ops;
}

/** Percent-encodes every byte of s as WTF-8 (so a lone surrogate becomes %ED%A0%80, as a hostile client may send). */
function percent(s: string): string {
  let out = '';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (/[A-Za-z0-9_.~-]/.test(ch)) {
      out += ch;
      continue;
    }
    const bytes =
      cp < 0x80
        ? [cp]
        : cp < 0x800
          ? [0xc0 | (cp >> 6), 0x80 | (cp & 63)]
          : cp < 0x10000
            ? [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63)]
            : [0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63)];
    out += bytes.map((b) => `%${b.toString(16).padStart(2, '0').toUpperCase()}`).join('');
  }
  return out;
}

/** Hostile text as it appears in a URL (already encoded, or deliberately not). */
const hostileUrlText = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '%00',
      'a%00b',
      '%ff',
      '%',
      '%zz',
      '%c0%af', // overlong "/"
      '%ed%a0%80', // a lone surrogate, encoded
      '%e2%80%ae', // RTL override (valid UTF-8)
      '%1b%5b2J', // ESC [2J
      '%0d%0aX-Injected:%201',
      '..%2f..%2fetc',
      '1e16',
      '-1',
      '99999999999999999999',
      'x'.repeat(300),
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 12 }).map(percent) },
);

/** Hostile JSON values for a body field. */
const hostileJson: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      '\u0000',
      'a\u0000b',
      '\ud800',
      'x\udfffy',
      '\u202efdp.exe',
      '\u001b[2J\u001b]0;pwned\u0007',
      '\u0085\u2028\u2029',
      '𝒳',
      '',
      'x'.repeat(5000),
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 16 }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      1e16,
      1e300,
      -1e16,
      2 ** 63,
      -(2 ** 63),
      1.5,
      -1,
      0,
      2 ** 53 + 2,
      2 ** 31,
      4294967296,
    ),
  },
  { weight: 1, arbitrary: fc.double() },
  {
    weight: 2,
    arbitrary: fc.constantFrom(null, true, false, [], {}, [null], { '\u0000': 1 }, ['\u0000'], [1e300]),
  },
);

/** Raw bytes spliced into a JSON string of the body: invalid or overlong UTF-8, a raw NUL. */
const RAW_BYTES: number[][] = [
  [0xc0, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xff],
  [0xe2, 0x80],
  [0x00],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
];
const RAW_MARK = '@@RAW@@';

function setPath(obj: Record<string, unknown>, path: string, value: unknown): Record<string, unknown> {
  const copy = structuredClone(obj);
  const parts = path.split('.');
  let cur: Record<string, unknown> = copy;
  for (const p of parts.slice(0, -1)) {
    const next = cur[p];
    if (typeof next !== 'object' || next === null) cur[p] = p === '0' ? [] : {};
    cur = cur[p] as Record<string, unknown>;
  }
  cur[parts.at(-1)!] = value;
  return copy;
}

type Attack =
  | { where: 'path' | 'query'; name: string; text: string }
  | { where: 'body'; name: string; value: unknown; raw: number[] | null };

function token(who: Example['who']): string | null {
  return { admin: t.tokens.admin, alice: t.tokens.alice, node: ids.nodeToken!, none: null }[who];
}

beforeAll(async () => {
  t = await testApi();
  const n = await t.node('i-fuzz-routes');
  const r = (
    await t.call(t.tokens.alice, { method: 'POST', url: '/v1/requests', payload: { command: ['true'] } })
  ).json();
  // Final at once: a log follow returns immediately, and nothing the fuzz does can start it.
  await t.call(t.tokens.alice, { method: 'POST', url: `/v1/requests/${r.id}/cancel`, payload: {} });
  const throwaway = await t.store.tokens.create({ scope: 'user', owner: 'throwaway' });
  ids = {
    req: r.id,
    ctr: r.container_id,
    node: n.id,
    nodeToken: n.token,
    throwawayToken: String(throwaway.info.id),
  };
});

describe('fuzz of every route', () => {
  it('every route has a valid example to attack (a new route must be added here)', async () => {
    const known = examples();
    const missing = (await operations()).map((o) => `${o.method} ${o.path}`).filter((k) => !(k in known));
    expect(missing).toEqual([]);
  });

  it('NUL, huge numbers and odd encodings in any path, query or body input: never 5xx, 4xx in the one shape naming the field', async () => {
    const ops = (await operations()).filter(
      (o) => o.pathParams.length + o.queryParams.length + o.bodyFields.length > 0,
    );
    const known = examples();
    const attack = (op: Op): fc.Arbitrary<Attack> =>
      fc.oneof(
        ...[
          ...op.pathParams.map((name) =>
            hostileUrlText.map((text): Attack => ({ where: 'path', name, text })),
          ),
          ...[...op.queryParams, 'unknown_param'].map((name) =>
            hostileUrlText.map((text): Attack => ({ where: 'query', name, text })),
          ),
          ...op.bodyFields.map((name) =>
            fc.oneof(
              {
                weight: 4,
                arbitrary: hostileJson.map((value): Attack => ({ where: 'body', name, value, raw: null })),
              },
              {
                weight: 1,
                arbitrary: fc
                  .constantFrom(...RAW_BYTES)
                  .map((raw): Attack => ({ where: 'body', name, value: RAW_MARK, raw })),
              },
            ),
          ),
        ],
      );
    const started = Date.now();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...ops).chain((op) => fc.tuple(fc.constant(op), attack(op))),
        async ([op, a]) => {
          const ex = known[`${op.method} ${op.path}`]!;
          const params = { ...ex.params };
          const query: Record<string, string> = Object.fromEntries(
            Object.entries(ex.query ?? {}).map(([k, v]) => [k, encodeURIComponent(v)]),
          );
          let body = ex.body;
          if (a.where === 'path') params[a.name] = a.text;
          if (a.where === 'query') query[a.name] = a.text;
          if (a.where === 'body') body = setPath(body ?? {}, a.name, a.value);
          const url =
            op.path.replace(/\{(\w+)\}/g, (_m, p: string) =>
              a.where === 'path' && a.name === p ? params[p]! : encodeURIComponent(params[p]!),
            ) +
            (Object.keys(query).length
              ? `?${Object.entries(query)
                  .map(([k, v]) => `${k}=${v}`)
                  .join('&')}`
              : '');
          let payload: string | Buffer | undefined = body === undefined ? undefined : JSON.stringify(body);
          if (a.where === 'body' && a.raw && payload !== undefined) {
            const [before, after] = payload.split(RAW_MARK) as [string, string];
            payload = Buffer.concat([Buffer.from(before), Buffer.from(a.raw), Buffer.from(after)]);
          }
          const tok = token(ex.who);
          const res = await t.app.inject({
            method: op.method as 'GET',
            url,
            headers: {
              ...(tok ? { authorization: `Bearer ${tok}` } : {}),
              ...(payload !== undefined ? { 'content-type': 'application/json' } : {}),
            },
            ...(payload !== undefined ? { payload } : {}),
          });
          const what = `${op.method} ${url.slice(0, 200)} ${typeof payload === 'string' ? payload.slice(0, 200) : ''} → ${res.statusCode} ${res.body.slice(0, 300)}`;
          expect(res.statusCode, what).toBeLessThan(500);
          if (res.statusCode < 400) return;
          const e = res.json().error as {
            code: unknown;
            message: unknown;
            details: { field: unknown; problem: unknown }[];
          };
          expect(typeof e.code, what).toBe('string');
          expect(typeof e.message, what).toBe('string');
          expect(Array.isArray(e.details), what).toBe(true);
          for (const d of e.details) {
            expect(typeof d.field, what).toBe('string');
            expect(typeof d.problem, what).toBe('string');
          }
          if (res.statusCode !== 400) return;
          const named = e.details.some((d) => {
            const f = d.field as string;
            return (
              f === a.name ||
              f.startsWith(`${a.name}.`) ||
              a.name.startsWith(`${f}.`) ||
              ['path', 'query', 'url', 'body'].includes(f)
            );
          });
          expect(named, `400 without a detail naming ${a.where} ${a.name}: ${what}`).toBe(true);
        },
      ),
      { numRuns: RUNS, seed: Number(process.env.BERTH_FUZZ_SEED ?? 17) },
    );
    console.log(`fuzz of every route: ${RUNS} runs over ${ops.length} routes in ${Date.now() - started} ms`);
  });
});
