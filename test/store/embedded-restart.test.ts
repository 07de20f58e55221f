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
let accepted = 0; // submissions the API acknowledged

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
  if (r.status === 201) accepted++;
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
      // Backends of a killed postmaster may serve a few more queries before they notice: wait (with a
      // deadline) for the supervisor to have started a new server, then for the API to answer again.
      const deadline = Date.now() + 90_000;
      while (!progress.some((l) => /PostgreSQL is back/.test(l)) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
      }
      let status = 0;
      while (status !== 201 && Date.now() < deadline) {
        status = await submit().catch(() => 0);
        if (status !== 201) {
          expect([0, 503]).toContain(status); // unavailable while pools reconnect, never a 500
          await new Promise((r) => setTimeout(r, 200));
        }
      }
      expect(status).toBe(201);
      expect(server.db.embedded!.pid).not.toBe(before);
      expect(progress.join('\n')).toMatch(/PostgreSQL exited unexpectedly \(SIGKILL\); starting it again/);
      const n = await server.store.ctx.pool.query('SELECT count(*)::int AS n FROM container_requests');
      expect(n.rows[0].n).toBe(accepted); // every acknowledged submission survived the crash
    },
  );
});
