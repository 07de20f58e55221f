// max_dispatch_attempts has one owner: the server stores it in the database, and the store's unlock and
// every dispatcher's scheduler read it from there. A container whose N-th lock ends without a start is
// cancelled perm, whichever way the lock ended: N-1 times it goes back to the queue, the N-th time not.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/declare.js';
import { loadConfig } from '../../src/config/options.js';
import { PgQueue } from '../../src/dispatch/pg-queue.js';
import { startServer } from '../../src/server/server.js';
import { Store } from '../../src/store/store.js';
import { testDb } from '../helpers/db.js';
import { submit, testStore } from '../helpers/store.js';
import { harness } from './harness.js';

const home = mkdtempSync(join(tmpdir(), 'berth-max-attempts-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

describe('max_dispatch_attempts', () => {
  it('is the declared default until a server stores one; then the store and every dispatcher read that', async () => {
    const { store, db } = await testStore();
    const queue = new PgQueue(store, db.url);
    expect(await store.settings.maxDispatchAttempts()).toBe(10);
    expect(await queue.maxDispatchAttempts()).toBe(10);
    await store.settings.setMaxDispatchAttempts(4);
    // Another process on the same database (its own Store and pool) sees the same value.
    const other = new Store(db.pool);
    expect(await other.settings.maxDispatchAttempts()).toBe(4);
    expect(await new PgQueue(other, db.url).maxDispatchAttempts()).toBe(4);
    await expect(store.settings.setMaxDispatchAttempts(0)).rejects.toThrow(ConfigError);
    await expect(store.settings.setMaxDispatchAttempts(0)).rejects.toThrow(
      'max_dispatch_attempts: expected a whole number >= 1, got 0',
    );
    expect(await store.settings.maxDispatchAttempts()).toBe(4);
  });

  it('the server stores its option at start', async () => {
    const db = await testDb();
    const cfg = loadConfig(
      { home, listen: '127.0.0.1:0', log_level: 'silent', database_url: db.url, max_dispatch_attempts: '3' },
      {},
    );
    const server = await startServer(cfg);
    try {
      expect(await new Store(db.pool).settings.maxDispatchAttempts()).toBe(3);
    } finally {
      await server.stop();
    }
  });

  it('the store: unlocked N-1 times the container is Queued, the N-th unlock cancels it perm', async () => {
    const { store } = await testStore({ maxDispatchAttempts: 2 });
    const req = await submit(store, 'alice', { container_count_max: 1 });
    const id = req.container_id!;
    await store.containers.lock([id], 'd1');
    expect(await store.containers.unlock(id, 'd1', 'no room')).toBe('Queued');
    await store.containers.lock([id], 'd1');
    expect(await store.containers.unlock(id, 'd1', 'no room')).toBe('Cancelled');
    expect(await store.containers.get(id)).toMatchObject({
      state: 'Cancelled',
      failure_class: 'perm',
      lock_count: 2,
    });
  });

  it('a lock ended by a lost node counts too: the store cancels it when the node fails, as for an unlock', async () => {
    const h = await harness({ bootMs: 10_000 });
    await h.store.settings.setMaxDispatchAttempts(2);
    const d = h.make();
    const [id] = await h.submit({ vcpus: 1, ram: '1GiB' });
    /** The dispatcher locks and places the container; the node registers and then never pings again. */
    const loseNode = async () => {
      await h.pass(d); // locks it, creates an instance
      await h.advance(10_000); // boots, the agent registers
      await h.pass(d); // places it on the node
      expect(await h.state(id!)).toBe('Locked');
      await h.advance(61_000); // past node_lost_after without a ping
      await h.pass(d); // the node is failed: its Locked container goes back to the queue
    };
    await loseNode();
    const first = await h.store.containers.get(id!);
    expect(first.lock_count).toBe(1);
    expect(first.state).toBe('Queued');
    await h.advance(61_000);
    await loseNode();
    // Every Locked → Queued goes through the store's one requeue transition, which applies the rule.
    const c = await h.store.containers.get(id!);
    expect(c).toMatchObject({ state: 'Cancelled', failure_class: 'perm', lock_count: 2 });
    expect(c.runtime_status).toMatch(
      /^locked and unlocked 2 times \(max_dispatch_attempts=2\); last: node \S+ failed before starting it \(no ping for \d+s \(node_lost_after 60s\)\)$/,
    );
  });
});
