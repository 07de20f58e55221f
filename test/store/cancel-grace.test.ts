// Issue 10 item 8: a container cancelled while Running keeps its last output and its exit: the token it
// ran under may still append logs and report the exit once (recorded on the Cancelled container, nothing
// else changes), within the cancel grace; every other stale write is refused as before (DESIGN §3.2).
import { beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../src/model/clock.js';
import { CANCEL_GRACE_MS } from '../../src/store/containers.js';
import { ConflictError, ForbiddenError } from '../../src/store/errors.js';
import type { Store } from '../../src/store/store.js';
import { dump, submit, testStore } from '../helpers/store.js';

let store: Store;
let clock: ManualClock;
const D = 'd-dispatcher00001';

beforeAll(async () => {
  ({ store, clock } = await testStore());
});

async function running(start = true) {
  const req = await submit(store, 'alice', { container_count_max: 3 });
  const id = req.container_id!;
  const { node } = await store.nodes.create({
    cluster: 'c',
    dispatcherTag: 't',
    instanceId: `i-${id}`,
    instanceType: 't1',
  });
  const [lock] = await store.containers.lock([id], D);
  await store.containers.assign(id, D, `i-${id}`, node.id);
  if (start) await store.containers.start(id, node.id, lock!.token);
  return { id, requestId: req.id, nodeId: node.id, token: lock!.token };
}

const exit = { exitCode: 3, oomKilled: false, usage: { peak_ram: 1024, cpu_seconds: 0.5, wall_ms: 1200 } };

describe('cancel grace', () => {
  it('a cancelled Running container: its logs and one exit report are kept; its state and request stay cancelled', async () => {
    const c = await running();
    await store.containers.cancel(c.id, { kind: 'user', owner: 'alice' }, 'user', 'cancelled by alice');
    expect(await store.containers.tokenValid(c.id, c.token)).toBe(true);
    const chunks = [{ seq: 0, stream: 'stdout' as const, data: 'bye\n' }];
    const [logged] = await store.reports.send([
      { kind: 'logs', id: c.id, node: c.nodeId, token: c.token, chunks },
    ]);
    expect(logged).toEqual({ id: c.id, ok: true, appended: 1 });
    const r = await store.containers.complete(c.id, c.nodeId, c.token, exit);
    expect(r).toEqual({ retryId: null, afterCancel: true });
    const after = await store.containers.get(c.id);
    expect(after).toMatchObject({
      state: 'Cancelled',
      failure_class: 'user',
      exit_code: 3,
      oom_killed: false,
    });
    expect(after.usage).toMatchObject(exit.usage);
    const req = await store.requests.get(c.requestId);
    expect(req).toMatchObject({ state: 'Final', outcome: 'cancelled', container_id: c.id });
    const events = (
      await store.ctx.pool.query(`SELECT kind, message FROM container_events WHERE container_id = $1`, [c.id])
    ).rows;
    expect(events).toContainEqual({ kind: 'exit', message: 'after the cancel: exit code 3' });
    // The report closed the grace: the token is stale for everything now, and nothing changes.
    expect(await store.containers.tokenValid(c.id, c.token)).toBe(false);
    const before = await dump(store);
    await expect(store.containers.complete(c.id, c.nodeId, c.token, exit)).rejects.toBeInstanceOf(
      ConflictError,
    );
    expect(await dump(store)).toBe(before);
  });

  it('a cancel that retries the request: the late report lands on the cancelled attempt, the retry is untouched', async () => {
    const c = await running();
    const { retryId } = await store.containers.cancel(c.id, { kind: 'system' }, 'temp', 'instance preempted');
    expect(retryId).not.toBeNull();
    await store.containers.complete(c.id, c.nodeId, c.token, { ...exit, exitCode: 143 });
    expect(await store.containers.get(c.id)).toMatchObject({ state: 'Cancelled', exit_code: 143 });
    expect(await store.containers.get(retryId!)).toMatchObject({ state: 'Queued', exit_code: null });
    expect((await store.requests.get(c.requestId)).container_id).toBe(retryId);
  });

  it('refused: after the grace, from another node or a failed one, with another token, or for a container that never ran', async () => {
    const late = await running();
    await store.containers.cancel(late.id, { kind: 'user', owner: null }, 'user', 'x');
    clock.advance(CANCEL_GRACE_MS + 1);
    expect(await store.containers.tokenValid(late.id, late.token)).toBe(false);
    await expect(store.containers.complete(late.id, late.nodeId, late.token, exit)).rejects.toBeInstanceOf(
      ConflictError,
    );

    const other = await running();
    await store.containers.cancel(other.id, { kind: 'user', owner: null }, 'user', 'x');
    const stranger = await running();
    await expect(
      store.containers.complete(other.id, stranger.nodeId, other.token, exit),
    ).rejects.toBeInstanceOf(ForbiddenError);
    await expect(
      store.containers.complete(other.id, other.nodeId, stranger.token, exit),
    ).rejects.toBeInstanceOf(ConflictError);

    // A node declared failed is the partitioned agent DESIGN §3.2 refuses: its containers get no grace.
    const lost = await running();
    await store.nodes.fail(lost.nodeId, 'stopped pinging');
    expect((await store.containers.get(lost.id)).state).toBe('Cancelled');
    expect(await store.containers.tokenValid(lost.id, lost.token)).toBe(false);
    await expect(store.containers.complete(lost.id, lost.nodeId, lost.token, exit)).rejects.toBeInstanceOf(
      ConflictError,
    );

    const locked = await running(false);
    await store.containers.cancel(locked.id, { kind: 'user', owner: null }, 'user', 'x');
    expect(await store.containers.tokenValid(locked.id, locked.token)).toBe(false);
    await expect(
      store.containers.complete(locked.id, locked.nodeId, locked.token, exit),
    ).rejects.toBeInstanceOf(ConflictError);
    expect((await store.containers.get(locked.id)).exit_code).toBeNull();
  });
});
