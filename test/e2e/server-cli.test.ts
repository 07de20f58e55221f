// End to end through real sockets and the real CLI: `berth server` with its embedded PostgreSQL in a
// fresh BERTH_HOME, submit/ps/show/cancel, and a restart that keeps everything.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, berth, readIfExists, startServer, type berthDaemon } from '../helpers/cli.js';

let home: string;
let env: NodeJS.ProcessEnv;
let server: ReturnType<typeof berthDaemon> | null = null;

async function restartServer() {
  ({ server } = await startServer(home, env));
}

beforeAll(() => {
  assertBuilt();
  home = mkdtempSync(join(tmpdir(), 'berth-e2e-'));
  env = { BERTH_HOME: home, BERTH_DATABASE_URL: '', BERTH_API_URL: '', BERTH_TOKEN: '' };
});

afterAll(async () => {
  await server?.stop();
  rmSync(home, { recursive: true, force: true });
});

describe('berth server + CLI', () => {
  // One test: the restart must find what the first start made.
  it(
    'starts its embedded PostgreSQL, creates an admin token, serves the CLI, and keeps everything across a restart',
    { timeout: 180_000 },
    async () => {
      await restartServer();
      expect(server!.output()).toMatch(/initialising PostgreSQL data/);
      expect(server!.output()).toMatch(/created an admin token/);
      expect(statSync(join(home, 'admin-token')).mode & 0o777).toBe(0o600);

      const sub = berth(
        ['submit', '--cpus', '2', '--ram', '4GiB', '--name', 'hello', '--', 'echo', 'hi'],
        env,
      );
      expect(sub.stderr).toBe('');
      expect(sub.code).toBe(0);
      const id = sub.stdout.trim();
      expect(id).toMatch(/^r-[0-9a-z]{16}$/);

      const ps = berth(['ps', '--json'], env);
      const page = JSON.parse(ps.stdout);
      expect(page.items).toHaveLength(1);
      expect(page.items[0]).toMatchObject({
        id,
        state: 'Committed',
        container_state: 'Queued',
        vcpus: 2,
        ram: 4 * 1024 ** 3,
        name: 'hello',
      });
      // the admin token: an OWNER column
      expect(berth(['ps'], env).stdout).toMatch(
        new RegExp(`${id}\\s+admin\\s+hello\\s+Queued\\s+500\\s+2\\s+4GiB`),
      );

      const bad = berth(['submit', '--ram', '4 gigs', '--', 'echo'], env);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/--ram: expected a size such as 4GiB/);
      expect(bad.stdout).toBe('');

      const cancel = berth(['cancel', id], env);
      expect(cancel.code).toBe(0);
      expect(cancel.stdout).toMatch(`${id}: cancelled`);
      const again = berth(['cancel', `c-${'0'.repeat(16)}`], env);
      expect(again.code).toBe(1);
      expect(again.stderr).toMatch(/not found/);
      const shown = JSON.parse(berth(['show', id, '--json'], env).stdout);
      expect(shown).toMatchObject({ state: 'Final', outcome: 'cancelled' });
      expect(shown.containers[0]).toMatchObject({ state: 'Cancelled', failure_class: 'user' });

      // Stops cleanly on SIGINT, and a restart keeps everything.
      expect(await server!.stop('SIGINT')).toBe(0);
      expect(server!.output()).toMatch(/SIGINT: stopping/);
      expect(readIfExists(join(home, 'api-url'))).toBeNull();
      await restartServer();
      expect(server!.output()).not.toMatch(/initialising PostgreSQL data/);
      const all = JSON.parse(berth(['ps', '--all', '--json'], env).stdout);
      expect(all.items).toHaveLength(1);
      expect(all.items[0]).toMatchObject({ state: 'Final', outcome: 'cancelled' });
      // the token saved on the first start still works: no new admin token was made
      expect(server!.output()).not.toMatch(/created an admin token/);
      expect(JSON.parse(berth(['token', 'list', '--json'], env).stdout).items).toHaveLength(1);
    },
  );

  it('explains a missing server instead of crashing', async () => {
    const r = berth(['ps'], { ...env, BERTH_API_URL: 'http://127.0.0.1:9' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/cannot reach the Berth API at http:\/\/127.0.0.1:9/);
    const noToken = berth(['ps'], { ...env, BERTH_HOME: join(home, 'nowhere') });
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toMatch(/no API URL/);
  });
});
