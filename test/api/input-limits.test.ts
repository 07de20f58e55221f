// Input the database or the runtimes cannot take is refused at the API with a 400 naming the field, in the
// one error shape, changing nothing (issue 10, items 6, 12 and 15): NUL bytes, numbers past a column's
// range, requests no runtime could run, and URLs or headers outside what the server reads.
import { connect } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { testApi } from '../helpers/api.js';
import { dump } from '../helpers/store.js';

let t: Awaited<ReturnType<typeof testApi>>;
let reqId: string;
let ctrId: string;

beforeAll(async () => {
  t = await testApi();
  const r = (
    await t.call(t.tokens.alice, { method: 'POST', url: '/v1/requests', payload: { command: ['true'] } })
  ).json();
  reqId = r.id;
  ctrId = r.container_id;
});

/** Asserts the one error shape with a detail naming `field`; returns the detail's problem. */
function refused(res: { statusCode: number; body: string }, status: number, field: string): string {
  expect(res.statusCode, res.body).toBe(status);
  const e = JSON.parse(res.body).error;
  expect(typeof e.code).toBe('string');
  expect(typeof e.message).toBe('string');
  const d = (e.details as { field: string; problem: string }[]).find((x) => x.field === field);
  expect(d, `no detail for ${field} in ${res.body}`).toBeDefined();
  return d!.problem;
}

const submit = (payload: object, token = t.tokens.alice) =>
  t.call(token, { method: 'POST', url: '/v1/requests', payload });

describe('input the database cannot hold', () => {
  it('a NUL byte in any id of a path is a 400 naming the id, not a 500', async () => {
    const before = await dump(t.store);
    for (const url of [
      `/v1/requests/r-%00`,
      `/v1/requests/${reqId}%00`,
      `/v1/containers/c-%00/events`,
      `/v1/containers/%00`,
      `/v1/instances/i-%00`,
      `/v1/nodes/n-%00`,
    ]) {
      const res = await t.call(t.tokens.admin, { method: 'GET', url });
      refused(res, 400, 'id');
    }
    expect(await dump(t.store)).toBe(before);
  });

  it('a NUL byte in a query parameter is a 400 naming it', async () => {
    for (const [url, field] of [
      ['/v1/requests?owner=al%00ice', 'owner'],
      ['/v1/requests?name=x%00', 'name'],
      ['/v1/containers?request_id=r-%00', 'request_id'],
      ['/v1/containers?node_id=%00', 'node_id'],
      [`/v1/containers/${ctrId}/logs?after=%00`, 'after'],
      ['/v1/requests?cursor=%00', 'cursor'],
    ] as const) {
      const problem = refused(await t.call(t.tokens.admin, { method: 'GET', url }), 400, field);
      expect(problem).not.toMatch(/internal/);
    }
    expect(
      refused(await t.call(t.tokens.admin, { method: 'GET', url: '/v1/requests?name=x%00' }), 400, 'name'),
    ).toBe('must not contain a NUL character (\\u0000)');
  });

  it('a NUL in any string of a body is a 400 naming the field', async () => {
    const before = await dump(t.store);
    const cases: [object, string][] = [
      [{ command: ['echo', 'a\u0000b'] }, 'command.1'],
      [{ command: ['true'], name: 'n\u0000' }, 'name'],
      [{ command: ['true'], env: { A: 'x\u0000' } }, 'env.A'],
      [{ command: ['true'], cwd: '/tmp/\u0000' }, 'cwd'],
      [{ command: ['true'], image: 'busybox\u0000' }, 'image'],
      [{ command: ['true'], run_after: '2026\u0000' }, 'run_after'],
    ];
    for (const [payload, field] of cases) refused(await submit(payload), 400, field);
    const cancel = await t.call(t.tokens.alice, {
      method: 'POST',
      url: `/v1/requests/${reqId}/cancel`,
      payload: { reason: 'because\u0000' },
    });
    refused(cancel, 400, 'reason');
    expect(await dump(t.store)).toBe(before);
  });

  it('numbers a column cannot hold are a 400 naming the field (max_run_time 1e16 was a bigint overflow)', async () => {
    const before = await dump(t.store);
    for (const [payload, field] of [
      [{ command: ['true'], max_run_time: 1e16 }, 'max_run_time'],
      [{ command: ['true'], max_run_time: '99999999999999999999h' }, 'max_run_time'],
      [{ command: ['true'], ram: 1e300 }, 'ram'],
      [{ command: ['true'], ram: '9999999TiB' }, 'ram'],
      [{ command: ['true'], scratch: 2 ** 63 }, 'scratch'],
      [{ command: ['true'], vcpus: 1e16 }, 'vcpus'],
      [{ command: ['true'], priority: 2 ** 31 }, 'priority'],
    ] as const) {
      refused(await submit(payload), 400, field);
    }
    const log = await t.call(t.tokens.admin, {
      method: 'GET',
      url: `/v1/containers/${ctrId}/logs?after=9999999999`,
    });
    refused(log, 400, 'after');
    expect(await dump(t.store)).toBe(before);
  });
});

describe('requests no runtime can run (issue 10 item 12)', () => {
  it('refuses tiny CPUs and memory, a relative cwd and an empty program, each with what is accepted', async () => {
    const before = await dump(t.store);
    expect(refused(await submit({ command: ['true'], vcpus: 0.0000001 }), 400, 'vcpus')).toMatch(
      /0\.01 to 100000/,
    );
    expect(refused(await submit({ command: ['true'], vcpus: '0.001' }), 400, 'vcpus')).toMatch(
      /expected from 0.01 to 100000 CPUs/,
    );
    expect(refused(await submit({ command: ['true'], ram: 1 }), 400, 'ram')).toMatch(/at least 16MiB/);
    expect(refused(await submit({ command: ['true'], ram: '1MiB' }), 400, 'ram')).toMatch(/at least 16MiB/);
    expect(refused(await submit({ command: ['true'], cwd: 'work/dir' }), 400, 'cwd')).toMatch(
      /expected an absolute path/,
    );
    expect(refused(await submit({ command: [''] }), 400, 'command.0')).toMatch(/the program to run/);
    expect(refused(await submit({ command: [] }), 400, 'command')).toMatch(/at least 1|a list/);
    expect(await dump(t.store)).toBe(before);
    // The smallest accepted values run.
    expect((await submit({ command: ['true'], vcpus: 0.01, ram: '16MiB', cwd: '/tmp' })).statusCode).toBe(
      201,
    );
  });

  it('a value given as a number or a string is one problem, in one line (no ajv branch noise)', async () => {
    const res = await submit({ command: ['true'], vcpus: 0 });
    const e = res.json().error;
    expect(e.details).toHaveLength(1);
    expect(e.details[0].field).toBe('vcpus');
    expect(e.message.split('\n')).toHaveLength(1);
    expect(e.message).toBe(
      'vcpus: expected CPUs from 0.01 to 100000 such as 1 or 0.5 (a number or a string), got 0',
    );
  });
});

describe('errors outside the routes come back in the one error shape (item 15)', () => {
  it('bad percent-encoding in the path or the query: 400 naming where', async () => {
    refused(await t.call(t.tokens.admin, { method: 'GET', url: '/v1/requests/%ff' }), 400, 'path');
    refused(await t.call(t.tokens.admin, { method: 'GET', url: '/v1/requests/r-%' }), 400, 'path');
    refused(await t.call(t.tokens.admin, { method: 'GET', url: '/v1/requests?name=%ff' }), 400, 'query');
    // overlong UTF-8 for "/" and an encoded lone surrogate are not UTF-8 either
    refused(await t.call(t.tokens.admin, { method: 'GET', url: '/v1/requests?name=%c0%af' }), 400, 'query');
    refused(
      await t.call(t.tokens.admin, { method: 'GET', url: '/v1/requests?name=%ed%a0%80' }),
      400,
      'query',
    );
  });

  it('a URL or a path parameter that is too long: 414', async () => {
    refused(
      await t.call(t.tokens.admin, { method: 'GET', url: `/v1/requests?name=${'a'.repeat(9000)}` }),
      414,
      'url',
    );
    refused(
      await t.call(t.tokens.admin, { method: 'GET', url: `/v1/requests/${'a'.repeat(300)}` }),
      414,
      'path',
    );
  });

  it('through a real socket: headers past 16 KiB are 431, broken HTTP is 400, both in the one shape', async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as { port: number };
    const raw = (text: string) =>
      new Promise<string>((resolve, reject) => {
        const s = connect(port, '127.0.0.1', () => s.write(text));
        let out = '';
        s.on('data', (d) => (out += d));
        s.on('close', () => resolve(out));
        s.on('error', reject);
      });
    const parse = (text: string) => {
      const [head, body] = text.split('\r\n\r\n');
      return { statusCode: Number(head!.split(' ')[1]), body: body! };
    };
    const big = await raw(`GET /v1/requests HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    refused(parse(big), 431, 'headers');
    const longUrl = await raw(`GET /v1/requests?name=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
    refused(parse(longUrl), 431, 'headers');
    const broken = await raw(`GET /v1/requests HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n`);
    refused(parse(broken), 400, 'request');
  });
});

describe('cancelling what has finished (item 15)', () => {
  it('is a 409 already_finished with the state, not an illegal transition', async () => {
    const r = (await submit({ command: ['true'] })).json();
    await t.call(t.tokens.alice, { method: 'POST', url: `/v1/requests/${r.id}/cancel`, payload: {} });
    const again = await t.call(t.tokens.alice, {
      method: 'POST',
      url: `/v1/containers/${r.container_id}/cancel`,
      payload: {},
    });
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toEqual({
      code: 'already_finished',
      message: `container ${r.container_id} has already finished (Cancelled)`,
      details: [],
    });
  });
});
