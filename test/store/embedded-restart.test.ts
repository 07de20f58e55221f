// The embedded PostgreSQL under `berth server` / `berth up` is supervised: killed with SIGKILL, it is
// started again on the same port and data, and the API carries on without an operator.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/options.js';
import { startServer, type RunningServer } from '../../src/server/server.js';

let home: string;
let server: RunningServer;
const progress: string[] = [];

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'berth-pgkill-'));
  chmodSync(home, 0o711);
  server = await startServer(loadConfig({ home, listen: '127.0.0.1:0', log_level: 'silent' }, {}), {
    onProgress: (l) => progress.push(l),
  });
});

afterAll(async () => {
  await server?.stop();
  rmSync(home, { recursive: true, force: true });
});

async function submit(): Promise<number> {
  const r = await fetch(`${server.url}/v1/requests`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.createdAdminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ command: ['true'] }),
  });
  await r.arrayBuffer();
  return r.status;
}

describe('embedded PostgreSQL supervision', () => {
  it(
    'a SIGKILLed PostgreSQL is started again and the API recovers; nothing committed is lost',
    { timeout: 120_000 },
    async () => {
      expect(await submit()).toBe(201);
      const before = server.db.embedded!.pid;
      process.kill(before, 'SIGKILL');
      // Requests fail (503) while it is down, then succeed again: wait for that with a deadline.
      const deadline = Date.now() + 90_000;
      let status = 0;
      while (status !== 201 && Date.now() < deadline) {
        status = await submit().catch(() => 0);
        if (status !== 201) {
          expect([0, 503]).toContain(status);
          await new Promise((r) => setTimeout(r, 200));
        }
      }
      expect(status).toBe(201);
      expect(server.db.embedded!.pid).not.toBe(before);
      expect(progress.join('\n')).toMatch(/PostgreSQL exited unexpectedly \(SIGKILL\); starting it again/);
      const n = await server.store.ctx.pool.query('SELECT count(*)::int AS n FROM container_requests');
      expect(n.rows[0].n).toBe(2);
    },
  );
});
