// Issue 16 in the API: the opportunistic and ram_retry_factor fields (validation, round trip down to the
// agent's start order), and berth pause / resume (who may, when, and how the agent learns of it).
import { beforeAll, describe, expect, it } from 'vitest';
import { PgQueue } from '../../src/dispatch/pg-queue.js';
import { testApi } from '../helpers/api.js';

let t: Awaited<ReturnType<typeof testApi>>;
beforeAll(async () => {
  t = await testApi();
});

const submit = async (payload: object, token = t.tokens.alice) =>
  t.call(token, { method: 'POST', url: '/v1/requests', payload });

/** A Running container of alice's on a fresh node: its id, node and lock token. */
async function running(payload: object = { command: ['sleep', '60'] }) {
  const r = (await submit(payload)).json();
  const n = await t.node();
  const token = await t.place(r.container_id, n);
  const s = await t.call(n.token, {
    method: 'POST',
    url: `/v1/containers/${r.container_id}/start`,
    payload: { lock_token: token },
  });
  expect(s.statusCode).toBe(200);
  return { cid: r.container_id as string, rid: r.id as string, node: n, lock: token };
}

const ping = async (n: { id: string; token: string }, body: object) =>
  (
    await t.call(n.token, {
      method: 'POST',
      url: `/v1/nodes/${n.id}/ping`,
      payload: { state: 'busy', wait_ms: 0, ...body },
    })
  ).json();

describe('opportunistic and ram_retry_factor', () => {
  it('are stored on the request and its container, and reach the agent', async () => {
    const r = (await submit({ command: ['true'], opportunistic: true, ram_retry_factor: 1.5 })).json();
    expect(r).toMatchObject({ opportunistic: true, ram_retry_factor: 1.5, preemptible: false });
    const c = await t.call(t.tokens.alice, { method: 'GET', url: `/v1/containers/${r.container_id}` });
    expect(c.json()).toMatchObject({ opportunistic: true, pause_wanted: false, paused: false });
    const n = await t.node();
    await t.place(r.container_id, n);
    const p = await ping(n, { state: 'idle', running: [] });
    expect(p.start[0]).toMatchObject({ id: r.container_id, opportunistic: true });

    const plain = (await submit({ command: ['true'] })).json();
    expect(plain).toMatchObject({ opportunistic: false, ram_retry_factor: null });
  });

  it("the agent's usage samples reach the scheduler's snapshot as measured use, with opportunistic", async () => {
    const { cid, node } = await running({ command: ['sleep', '60'], opportunistic: true });
    const queue = new PgQueue(t.store, t.db.url);
    const mine = async () => (await queue.containers('d-1', t.clock.now())).find((c) => c.id === cid)!;
    expect(await mine()).toMatchObject({ opportunistic: true });
    expect((await mine()).usage).toBeUndefined(); // not measured yet
    t.clock.advance(600_000);
    await ping(node, { running: [cid], usage: { [cid]: { cpu_seconds: 300, ram: 1024, peak_ram: 4096 } } });
    expect((await mine()).usage).toEqual({ ram: 4096, vcpus: 0.5, observedMs: 600_000 });
  });

  it("a reclaimed container's retry reaches the snapshot with the instance that reclaimed it (kept off it for a while)", async () => {
    const { cid, rid, node, lock } = await running({ command: ['sleep', '60'], opportunistic: true });
    const queue = new PgQueue(t.store, t.db.url);
    const c = await t.store.containers.get(cid);
    const res = await t.call(node.token, {
      method: 'POST',
      url: `/v1/containers/${cid}/cancel`,
      payload: { lock_token: lock, class: 'temp', reason: 'reclaimed: memory pressure', reclaimed: true },
    });
    expect(res.statusCode, res.body).toBe(200);
    const retry = (await t.store.requests.get(rid)).container_id!;
    const seen = (await queue.containers('d-1', t.clock.now())).find((x) => x.id === retry)!;
    expect(seen.reclaimedFrom).toEqual({ instance: c.instance_id, at: expect.any(Number) });
    // A guaranteed container's retry carries nothing.
    const g = await running({ command: ['sleep', '60'] });
    expect(
      (await queue.containers('d-1', t.clock.now())).find((x) => x.id === g.cid)?.reclaimedFrom,
    ).toBeUndefined();
  });

  it("whether the node's agent can claim lent room back is stored from its ping and reaches the dispatcher", async () => {
    const n = await t.node();
    const queue = new PgQueue(t.store, t.db.url);
    const stored = async () => (await t.store.nodes.get(n.id)).reclaims;
    const viewed = async () =>
      (await queue.nodes('c1', 't1', t.clock.now())).find((x) => x.id === n.id)?.reclaims === true;
    expect([await stored(), await viewed()]).toEqual([false, false]); // until it says so
    await ping(n, { running: [], reclaims: true });
    expect([await stored(), await viewed()]).toEqual([true, true]);
    await ping(n, { running: [] }); // a ping that does not say changes nothing
    expect(await stored()).toBe(true);
    const bad = await t.call(n.token, {
      method: 'POST',
      url: `/v1/nodes/${n.id}/ping`,
      payload: { state: 'idle', wait_ms: 0, reclaims: 'yes' },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details.map((d: { field: string }) => d.field)).toContain('reclaims');
    expect(await stored()).toBe(true);
    await ping(n, { running: [], reclaims: false }); // its watcher stopped
    expect([await stored(), await viewed()]).toEqual([false, false]);
  });

  it('bad values are refused naming the field, and change nothing', async () => {
    const before = await t.store.ctx.pool.query('SELECT count(*)::int AS n FROM container_requests');
    const cases: [object, string][] = [
      [{ command: ['x'], opportunistic: 'yes' }, 'opportunistic'],
      [{ command: ['x'], ram_retry_factor: 0.5 }, 'ram_retry_factor'],
      [{ command: ['x'], ram_retry_factor: 9 }, 'ram_retry_factor'],
      [{ command: ['x'], ram_retry_factor: '2' }, 'ram_retry_factor'],
    ];
    for (const [payload, field] of cases) {
      const res = await submit(payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error.details.map((d: { field: string }) => d.field)).toContain(field);
    }
    const after = await t.store.ctx.pool.query('SELECT count(*)::int AS n FROM container_requests');
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });
});

describe('pause and resume', () => {
  it('the owner pauses a Running container; its agent is told, reports it frozen, then resumes it', async () => {
    const { cid, rid, node } = await running();
    const res = await t.call(t.tokens.alice, { method: 'POST', url: `/v1/containers/${cid}/pause` });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ state: 'Running', pause_wanted: true, paused: false });

    // Its agent, reporting it not frozen, is asked to freeze it; once it reports it frozen, nothing more.
    expect(await ping(node, { running: [cid], paused: [] })).toMatchObject({ pause: [cid], resume: [] });
    expect(await ping(node, { running: [cid], paused: [cid] })).toMatchObject({ pause: [], resume: [] });
    const c = (await t.call(t.tokens.alice, { method: 'GET', url: `/v1/containers/${cid}` })).json();
    expect(c).toMatchObject({ state: 'Running', paused: true });
    const r = (await t.call(t.tokens.alice, { method: 'GET', url: `/v1/requests/${rid}` })).json();
    expect(r).toMatchObject({ container_state: 'Running', container_paused: true });

    const back = await t.call(t.tokens.admin, { method: 'POST', url: `/v1/containers/${cid}/resume` });
    expect(back.json()).toMatchObject({ pause_wanted: false, paused: true });
    expect(await ping(node, { running: [cid], paused: [cid] })).toMatchObject({ pause: [], resume: [cid] });
    await ping(node, { running: [cid], paused: [] });
    // A ping the agent sent before its thaw finished, arriving late, does not make it paused again.
    await ping(node, { running: [cid], paused: [cid] });
    expect(
      (await t.call(t.tokens.alice, { method: 'GET', url: `/v1/containers/${cid}` })).json(),
    ).toMatchObject({
      paused: false,
    });
    const events = (
      await t.call(t.tokens.alice, { method: 'GET', url: `/v1/containers/${cid}/events` })
    ).json().items;
    expect(
      events.filter((e: { kind: string }) => e.kind === 'pause').map((e: { message: string }) => e.message),
    ).toEqual([
      'pause requested by alice',
      'paused: frozen by its agent',
      'resume requested by root',
      'resumed: running again',
    ]);
  });

  it('only Running containers, only the owner or an admin; refusals change nothing', async () => {
    const queued = (await submit({ command: ['true'] })).json().container_id;
    const res = await t.call(t.tokens.alice, { method: 'POST', url: `/v1/containers/${queued}/pause` });
    expect(res.statusCode).toBe(409);
    expect(res.json().error.message).toBe(
      `container ${queued} is Queued: only a Running container can be paused`,
    );
    const { cid } = await running();
    const bob = await t.call(t.tokens.bob, { method: 'POST', url: `/v1/containers/${cid}/pause` });
    expect(bob.statusCode).toBe(404);
    const disp = await t.call(t.tokens.dispatcher, { method: 'POST', url: `/v1/containers/${cid}/pause` });
    expect(disp.statusCode).toBe(403);
    const bad = await t.call(t.tokens.alice, { method: 'POST', url: `/v1/containers/c-nope/pause` });
    expect(bad.statusCode).toBe(400);
    const c = (await t.call(t.tokens.alice, { method: 'GET', url: `/v1/containers/${cid}` })).json();
    expect(c).toMatchObject({ pause_wanted: false, paused: false });
  });
});
