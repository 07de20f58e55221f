// The server's log: one line per HTTP request at debug (none at info), with method, path, route and
// status and its request id, and never the bearer token.
import { describe, expect, it } from 'vitest';
import { buildApi } from '../../src/api/server.js';
import { captureLog } from '../helpers/log.js';
import { testStore } from '../helpers/store.js';

describe('API request log', () => {
  it('one debug line per request, without the token or the query string', async () => {
    const { store } = await testStore();
    const token = (await store.tokens.create({ scope: 'admin', owner: 'root' })).secret;
    const debug = captureLog('debug');
    const info = captureLog('info');
    for (const log of [debug, info]) {
      const app = await buildApi({ store, logger: log.logger });
      try {
        const auth = { authorization: `Bearer ${token}` };
        expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
        expect(
          (await app.inject({ method: 'GET', url: '/v1/requests?limit=5', headers: auth })).statusCode,
        ).toBe(200);
        expect(
          (await app.inject({ method: 'GET', url: '/v1/requests/r-0000000000000000', headers: auth }))
            .statusCode,
        ).toBe(404);
        expect((await app.inject({ method: 'GET', url: '/v1/requests' })).statusCode).toBe(401);
      } finally {
        await app.close();
      }
    }
    const requests = debug.entries().filter((e) => e.msg === 'request');
    expect(requests.map((e) => [e.method, e.path, e.route, e.status])).toEqual([
      ['GET', '/healthz', '/healthz', 200],
      ['GET', '/v1/requests', '/v1/requests', 200],
      ['GET', '/v1/requests/r-0000000000000000', '/v1/requests/:id', 404],
      ['GET', '/v1/requests', '/v1/requests', 401],
    ]);
    for (const e of requests)
      expect(e).toMatchObject({ level: 20, component: 'api', ms: expect.any(Number) });
    // At debug each request's lines carry its own id (a child logger per request; none above debug).
    expect(new Set(requests.map((e) => e.reqId)).size).toBe(requests.length);
    expect(requests.every((e) => typeof e.reqId === 'string')).toBe(true);
    expect(info.entries().filter((e) => e.msg === 'request')).toEqual([]);
    expect(debug.lines.join('')).not.toContain(token);
  });
});
