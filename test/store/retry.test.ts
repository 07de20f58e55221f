import { describe, expect, it } from 'vitest';
import { runContainer as run, submit, testStore, TEST_DISPATCHER as D } from '../helpers/store.js';

describe('retries (DESIGN §3.3)', () => {
  it("a retry counts its request's spot interruptions: the agent's interrupted cancels, not other temp failures", async () => {
    const { store, clock } = await testStore();
    const req = await submit(store, 'alice', { max_temp_retries: 5 });
    const count = async (id: string) =>
      (await store.ctx.pool.query(`SELECT spot_interruptions FROM containers WHERE id = $1`, [id])).rows[0]
        .spot_interruptions as number;
    let cid = req.container_id!;
    expect(await count(cid)).toBe(0);
    const seen: number[] = [];
    for (const interrupted of [true, false, true]) {
      const a = await run(store, cid);
      const { retryId } = await store.containers.cancel(
        cid,
        { kind: 'node', nodeId: a.nodeId, token: a.token },
        'temp',
        interrupted ? 'spot interruption: the cloud will terminate this instance' : 'node lost',
        { interrupted },
      );
      cid = retryId!;
      seen.push(await count(cid));
      clock.advance(3_600_000); // past the retry's backoff
    }
    expect(seen).toEqual([1, 1, 2]);
  });

  it('a reclaimed opportunistic container is retried at once and spends no retry: its events say so', async () => {
    const { store } = await testStore();
    const req = await submit(store, 'alice', { max_temp_retries: 1 });
    let cid = req.container_id!;
    const first = cid;
    // More reclaims than max_temp_retries allows temp failures: none of them counts.
    for (let i = 0; i < 3; i++) {
      const a = await run(store, cid);
      const { retryId } = await store.containers.cancel(
        cid,
        { kind: 'node', nodeId: a.nodeId, token: a.token },
        'temp',
        'reclaimed: memory pressure',
        { reclaimed: true },
      );
      expect(retryId).toBeTruthy();
      const retry = await store.containers.get(retryId!);
      expect(retry).toMatchObject({ state: 'Queued', run_after: null });
      cid = retryId!;
    }
    expect(await store.requests.get(req.id)).toMatchObject({
      state: 'Committed',
      attempts: 0,
      temp_failures: 0,
    });
    const ev = await store.ctx.pool.query(
      `SELECT kind, message FROM container_events WHERE container_id = $1 AND kind = 'reclaim'`,
      [first],
    );
    expect(ev.rows).toEqual([
      {
        kind: 'reclaim',
        message: 'reclaimed: memory pressure',
      },
    ]);
    // The retry's words are the reclaim's own, said once ("reclaimed: reclaimed: …" before).
    const retried = await store.ctx.pool.query(
      `SELECT message FROM container_events WHERE container_id = $1 AND kind = 'retry'`,
      [first],
    );
    expect(retried.rows).toEqual([
      { message: expect.stringMatching(/^retried as \S+: reclaimed: memory pressure$/) },
    ]);
    // A plain temp failure still counts.
    const a = await run(store, cid);
    await store.containers.cancel(
      cid,
      { kind: 'node', nodeId: a.nodeId, token: a.token },
      'temp',
      'node lost',
    );
    expect(await store.requests.get(req.id)).toMatchObject({ temp_failures: 1 });
  });

  it('exit 0 makes the request Final/success', async () => {
    const { store } = await testStore();
    const req = await submit(store);
    const a = await run(store, req.container_id!);
    await store.containers.complete(req.container_id!, a.nodeId, a.token, {
      exitCode: 0,
      oomKilled: false,
      usage: { peak_ram: 1, cpu_seconds: 0.1, wall_ms: 5 },
    });
    const r = await store.requests.get(req.id);
    expect(r).toMatchObject({ state: 'Final', outcome: 'success', attempts: 1 });
    const c = await store.containers.get(req.container_id!);
    expect(c.usage).toEqual({ peak_ram: 1, cpu_seconds: 0.1, wall_ms: 5 });
  });

  it('non-zero exits retry with a new container until container_count_max, then Final/failed', async () => {
    const { store } = await testStore();
    const req = await submit(store, 'alice', { container_count_max: 3 });
    const seen: string[] = [];
    let cid = req.container_id!;
    for (let i = 1; i <= 3; i++) {
      seen.push(cid);
      const a = await run(store, cid);
      const { retryId } = await store.containers.complete(cid, a.nodeId, a.token, {
        exitCode: 2,
        oomKilled: false,
        usage: null,
      });
      const r = await store.requests.get(req.id);
      if (i < 3) {
        expect(retryId).not.toBeNull();
        expect(r).toMatchObject({ state: 'Committed', attempts: i, container_id: retryId });
        const next = await store.containers.get(retryId!);
        expect(next).toMatchObject({ state: 'Queued', attempt: i + 1, run_after: null });
        cid = retryId!;
      } else {
        expect(retryId).toBeNull();
        expect(r).toMatchObject({ state: 'Final', outcome: 'failed', attempts: 3 });
        expect(r.final_reason).toMatch(/exit code 2 \(after 3 of 3 attempts\)/);
      }
    }
    expect(new Set(seen).size).toBe(3);
  });

  it('retry_on_failure=false makes the first failure final', async () => {
    const { store } = await testStore();
    const req = await submit(store, 'alice', { retry_on_failure: false });
    const a = await run(store, req.container_id!);
    await store.containers.complete(req.container_id!, a.nodeId, a.token, {
      exitCode: 1,
      oomKilled: false,
      usage: null,
    });
    expect(await store.requests.get(req.id)).toMatchObject({ state: 'Final', outcome: 'failed' });
  });

  it('temp failures retry with jittered exponential backoff through run_after, bounded by max_temp_retries', async () => {
    const { store, clock } = await testStore();
    const req = await submit(store, 'alice', { max_temp_retries: 3, container_count_max: 1 });
    let cid = req.container_id!;
    const delays: number[] = [];
    for (let i = 1; i <= 4; i++) {
      await run(store, cid);
      const { retryId } = await store.containers.cancel(cid, { kind: 'system' }, 'temp', 'node lost');
      if (i <= 3) {
        const next = await store.containers.get(retryId!);
        const delay = next.run_after!.getTime() - clock.now().getTime();
        delays.push(delay);
        // base 10 s doubling, ±20% jitter
        const base = 10_000 * 2 ** (i - 1);
        expect(delay).toBeGreaterThanOrEqual(base * 0.8);
        expect(delay).toBeLessThanOrEqual(base * 1.2);
        // not lockable before run_after
        expect(await store.containers.lock([retryId!], D)).toEqual([]);
        clock.advance(delay);
        cid = retryId!;
      } else {
        expect(retryId).toBeNull();
      }
    }
    const r = await store.requests.get(req.id);
    expect(r).toMatchObject({ state: 'Final', outcome: 'failed', temp_failures: 4, attempts: 0 });
    expect(r.final_reason).toMatch(/4 infrastructure failures/);
  });

  it('a user cancel is final and never retried', async () => {
    const { store } = await testStore();
    const req = await submit(store);
    await run(store, req.container_id!);
    const r = await store.requests.cancel(req.id, 'alice');
    expect(r).toMatchObject({ state: 'Final', outcome: 'cancelled' });
    expect((await store.containers.get(req.container_id!)).state).toBe('Cancelled');
  });

  it('another owner cannot see or cancel a request', async () => {
    const { store } = await testStore();
    const req = await submit(store, 'alice');
    await expect(store.requests.cancel(req.id, 'mallory')).rejects.toThrow(/not found/);
    expect((await store.requests.get(req.id)).state).toBe('Committed');
  });

  it('priority 0 withdraws a Queued request without cancelling it: not lockable until raised again', async () => {
    const { store } = await testStore();
    const req = await submit(store);
    const r = await store.requests.setPriority(req.id, null, 0);
    expect(r).toMatchObject({ state: 'Committed', priority: 0, container_state: 'Queued' });
    expect(await store.containers.get(req.container_id!)).toMatchObject({ state: 'Queued', priority: 0 });
    expect(await store.containers.lock([req.container_id!], D)).toEqual([]);
    expect(await store.containers.lockNext(D, 10)).toEqual([]);
    const raised = await store.requests.setPriority(req.id, null, 900);
    expect(raised.priority).toBe(900);
    expect((await store.containers.get(req.container_id!)).priority).toBe(900);
    expect((await store.containers.lock([req.container_id!], D)).map((l) => l.id)).toEqual([
      req.container_id,
    ]);
    const events = await store.containerList.events(req.container_id!);
    expect(events.map((e) => e.message)).toEqual(
      expect.arrayContaining([
        'priority 500 → 0 (withdrawn: not scheduled; killed if running)',
        'priority 0 → 900',
      ]),
    );
  });

  it('a Running container whose priority goes to 0 ends the request cancelled when it is killed', async () => {
    const { store } = await testStore();
    const req = await submit(store);
    const a = await run(store, req.container_id!);
    await store.requests.setPriority(req.id, null, 0);
    expect((await store.containers.get(req.container_id!)).state).toBe('Running');
    // the dispatcher's kill action (src/dispatch/dispatcher.ts)
    await store.containers.cancel(
      req.container_id!,
      { kind: 'dispatcher', dispatcherId: D },
      'user',
      'priority is 0 (withdrawn)',
    );
    expect(await store.requests.get(req.id)).toMatchObject({
      state: 'Final',
      outcome: 'cancelled',
      priority: 0,
    });
    // The agent's one report after the kill (the cancel grace: cancel-grace.test.ts) is recorded on the
    // Cancelled container and changes neither it nor the request; a second one is a stale writer.
    const exit = { exitCode: 0, oomKilled: false, usage: null };
    expect(await store.containers.complete(req.container_id!, a.nodeId, a.token, exit)).toEqual({
      retryId: null,
      afterCancel: true,
    });
    expect(await store.containers.get(req.container_id!)).toMatchObject({ state: 'Cancelled', exit_code: 0 });
    expect(await store.requests.get(req.id)).toMatchObject({ state: 'Final', outcome: 'cancelled' });
    await expect(store.containers.complete(req.container_id!, a.nodeId, a.token, exit)).rejects.toThrow(
      /stale lock token/,
    );
  });

  it('a Final request keeps its priority: a change is a 409-style conflict', async () => {
    const { store } = await testStore();
    const req = await submit(store);
    await store.requests.cancel(req.id, null);
    await expect(store.requests.setPriority(req.id, null, 7)).rejects.toThrow(
      /has already finished \(cancelled\)/,
    );
  });

  it('a cancel that no retry can fix (retryable: false) ends the request at once, whatever attempts are left', async () => {
    const { store } = await testStore();
    const req = await submit(store, 'alice', { container_count_max: 5 });
    await store.containers.cancel(
      req.container_id!,
      { kind: 'system' },
      'perm',
      'needs 1 gpus; largest configured type has 0',
      { retryable: false },
    );
    const r = await store.requests.get(req.id);
    expect(r).toMatchObject({ state: 'Final', outcome: 'failed', attempts: 1 });
    expect(r.final_reason).toBe('needs 1 gpus; largest configured type has 0 (not retryable)');
    const c = await store.containers.get(req.container_id!);
    expect(c).toMatchObject({ state: 'Cancelled', failure_class: 'perm' });
    // the same perm cancel, retryable, is retried
    const other = await submit(store, 'alice', { container_count_max: 5 });
    const { retryId } = await store.containers.cancel(
      other.container_id!,
      { kind: 'system' },
      'perm',
      'flaky',
    );
    expect(retryId).not.toBeNull();
  });

  it('a request that fails permanently says why once: no "failed: failed:"', async () => {
    const { store } = await testStore();
    const req = await submit(store, 'alice', { container_count_max: 1 });
    await store.containers.cancel(req.container_id!, { kind: 'system' }, 'perm', 'image not found');
    const r = await store.requests.get(req.id);
    expect(r).toMatchObject({ state: 'Final', outcome: 'failed' });
    expect(r.final_reason).toBe('image not found (after 1 of 1 attempts)');
  });

  it('a container unlocked max_dispatch_attempts times is cancelled perm', async () => {
    const { store } = await testStore({ maxDispatchAttempts: 3 });
    const req = await submit(store, 'alice', { container_count_max: 1 });
    const id = req.container_id!;
    for (let i = 0; i < 2; i++) {
      await store.containers.lock([id], D);
      expect(await store.containers.unlock(id, D, 'no room')).toBe('Queued');
    }
    await store.containers.lock([id], D);
    expect(await store.containers.unlock(id, D, 'no room')).toBe('Cancelled');
    const c = await store.containers.get(id);
    expect(c).toMatchObject({ state: 'Cancelled', failure_class: 'perm' });
    expect(c.runtime_status).toMatch(/locked and unlocked 3 times \(max_dispatch_attempts=3\)/);
    expect((await store.requests.get(req.id)).state).toBe('Final');
  });
});
