// A minimal Docker registry (the v2 HTTP API's answers an engine sees when an image is missing or the
// registry fails), for what cannot run here: no registry is reachable from this machine. It answers the
// version check (GET /v2/ → 200) and every manifest request with the registry's own "manifest unknown"
// (404, MANIFEST_UNKNOWN), or, with `fail: true`, with 503 (a registry in trouble). It records the
// requests it saw. On 127.0.0.1 an engine talks plain HTTP to it (docker treats 127.0.0.0/8 as insecure).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeRegistry {
  host: string;
  requests: string[];
  fail: boolean;
  close(): Promise<void>;
}

export async function fakeRegistry(): Promise<FakeRegistry> {
  const reg: FakeRegistry = { host: '', requests: [], fail: false, close: async () => {} };
  const server: Server = createServer((req, res) => {
    reg.requests.push(`${req.method} ${req.url}`);
    res.setHeader('docker-distribution-api-version', 'registry/2.0');
    res.setHeader('content-type', 'application/json');
    if (reg.fail) {
      res.statusCode = 503;
      res.end(JSON.stringify({ errors: [{ code: 'UNAVAILABLE', message: 'service unavailable' }] }));
    } else if (req.url === '/v2/' || req.url === '/v2') {
      res.end('{}');
    } else {
      res.statusCode = 404;
      res.end(JSON.stringify({ errors: [{ code: 'MANIFEST_UNKNOWN', message: 'manifest unknown' }] }));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  reg.host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  reg.close = () => new Promise((r) => server.close(() => r()));
  return reg;
}
