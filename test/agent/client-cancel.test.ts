// The agent client's cancel sends one body both ways (agent/client.ts): through the node's grouped report
// endpoint and through the container's own cancel endpoint, with the reason cut to the API's 4,096
// characters and only the flags that differ from the defaults. A real HTTP server records what arrives.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentClient } from '../../src/agent/client.js';

const received: { url: string; body: Record<string, unknown> }[] = [];
let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    let text = '';
    req.on('data', (d: Buffer) => (text += d.toString('utf8')));
    req.on('end', () => {
      const body = JSON.parse(text) as Record<string, unknown>;
      received.push({ url: req.url!, body });
      res.setHeader('content-type', 'application/json');
      const reports = body.reports as unknown[] | undefined;
      res.end(JSON.stringify(reports ? { results: reports.map(() => ({ ok: true })) } : {}));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe("the agent client's cancel", () => {
  it('sends the same body through the report endpoint and the cancel endpoint', async () => {
    const reason = 'x'.repeat(5_000);
    received.length = 0;
    await new AgentClient(url).cancel('c-1', '3.t', 'temp', reason, { reclaimed: true, retryable: false });
    await new AgentClient(url, 'n-1').cancel('c-1', '3.t', 'temp', reason, {
      reclaimed: true,
      retryable: false,
    });
    await new AgentClient(url).cancel('c-2', '4.t', 'perm', 'why', { interrupted: true });
    expect(received.map((r) => r.url)).toEqual([
      '/v1/containers/c-1/cancel',
      '/v1/nodes/n-1/reports',
      '/v1/containers/c-2/cancel',
    ]);
    const want = {
      lock_token: '3.t',
      class: 'temp',
      reason: 'x'.repeat(4_096),
      retryable: false,
      reclaimed: true,
    };
    expect(received[0]!.body).toEqual(want);
    expect(received[1]!.body).toEqual({ reports: [{ kind: 'cancel', id: 'c-1', ...want }] });
    expect(received[2]!.body).toEqual({ lock_token: '4.t', class: 'perm', reason: 'why', interrupted: true });
  });
});
