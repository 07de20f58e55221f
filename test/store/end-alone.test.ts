// A batch of ends whose requests' course needs no read of the request (decideAlone: successes, users'
// cancels) is one statement (src/store/transitions/end.ts, END_ALONE_SQL): it finalises only the current
// attempt's request, and only while it is not Final; a batch with any other end goes the two-statement way.
import { describe, expect, it } from 'vitest';
import { describeExit, oomWarning } from '../../src/model/exit.js';
import type { Store } from '../../src/store/store.js';
import type { EndItem } from '../../src/store/transitions/index.js';
import { runContainer as run, submit, testStore } from '../helpers/store.js';

/** Ends each container as its agent reports it, all in one batch of one transaction. */
async function endAll(
  store: Store,
  ends: { id: string; agent: { nodeId: string; token: string }; exitCode: number; oomKilled?: boolean }[],
) {
  const items: EndItem[] = [];
  for (const e of ends)
    items.push({
      id: e.id,
      actor: await store.transitions.agent({ id: e.id, node: e.agent.nodeId, token: e.agent.token }),
      end: { state: 'Complete', exitCode: e.exitCode, oomKilled: e.oomKilled ?? false, usage: null },
    });
  return store.transitions.end(items);
}

const request = async (store: Store, id: string) =>
  (
    await store.ctx.pool.query(
      `SELECT state, outcome, final_reason, attempts, container_id FROM container_requests WHERE id = $1`,
      [id],
    )
  ).rows[0];

describe('a batch of successes in one statement', () => {
  it("finalises the current attempt's request only, and never a Final one again; the events are written in order", async () => {
    const { store } = await testStore();
    const [current, moved, final] = [await submit(store), await submit(store), await submit(store)];
    const agents = [
      await run(store, current.container_id!),
      await run(store, moved.container_id!),
      await run(store, final.container_id!),
    ];
    // As a retry queued meanwhile would leave it: the request's current attempt is another container.
    await store.ctx.pool.query(`UPDATE container_requests SET container_id = 'c-other' WHERE id = $1`, [
      moved.id,
    ]);
    // As a cancel of the request between attempts would leave it.
    await store.ctx.pool.query(
      `UPDATE container_requests SET state = 'Final', outcome = 'cancelled', final_reason = 'by hand' WHERE id = $1`,
      [final.id],
    );
    const out = await endAll(store, [
      { id: current.container_id!, agent: agents[0]!, exitCode: 0, oomKilled: true },
      { id: moved.container_id!, agent: agents[1]!, exitCode: 0 },
      { id: final.container_id!, agent: agents[2]!, exitCode: 0 },
    ]);
    expect(out.map((o) => [o.ok, o.ok && o.state, o.ok && o.retryId])).toEqual([
      [true, 'Complete', null],
      [true, 'Complete', null],
      [true, 'Complete', null],
    ]);
    expect(await request(store, current.id)).toMatchObject({
      state: 'Final',
      outcome: 'success',
      attempts: 1,
      final_reason: `completed with ${describeExit(0, true)}`,
    });
    expect(await request(store, moved.id)).toMatchObject({
      state: 'Committed',
      outcome: null,
      attempts: 0,
      container_id: 'c-other',
    });
    expect(await request(store, final.id)).toMatchObject({
      state: 'Final',
      outcome: 'cancelled',
      final_reason: 'by hand',
      attempts: 0,
    });
    const kinds = async (id: string) =>
      (await store.containerList.events(id)).map((e) => `${e.kind}: ${e.message}`);
    expect((await kinds(current.container_id!)).slice(-2)).toEqual([
      `state: Complete: completed with ${describeExit(0, true)}`,
      `warning: ${oomWarning(0, true)}`,
    ]);
    expect((await kinds(moved.container_id!)).slice(-1)).toEqual([
      `state: Complete: completed with ${describeExit(0, false)}`,
    ]);
  });

  it('a batch with a failure beside a success goes the two-statement way: the failure is retried', async () => {
    const { store } = await testStore();
    const [ok, failing] = [await submit(store), await submit(store, 'alice', { container_count_max: 2 })];
    const agents = [await run(store, ok.container_id!), await run(store, failing.container_id!)];
    const out = await endAll(store, [
      { id: ok.container_id!, agent: agents[0]!, exitCode: 0 },
      { id: failing.container_id!, agent: agents[1]!, exitCode: 3 },
    ]);
    expect(await request(store, ok.id)).toMatchObject({ state: 'Final', outcome: 'success', attempts: 1 });
    const retried = out[1]!.ok ? out[1]!.retryId : null;
    expect(retried).toMatch(/^c-/);
    expect(await request(store, failing.id)).toMatchObject({
      state: 'Committed',
      attempts: 1,
      container_id: retried,
    });
  });
});
