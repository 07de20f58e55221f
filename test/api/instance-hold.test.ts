// berth instance hold ID --freeze (issue 16 item 4: "holding an instance can freeze what runs on it"), in
// the API: the hold asks each Running container of the instance to pause through berth pause's flags
// (src/store/pause.ts), marking the ones it asked; the instance's run or drain resumes only those. A
// container its user paused stays paused, and a user's own pause or resume takes a container over.
import { beforeAll, describe, expect, it } from 'vitest';
import { testApi } from '../helpers/api.js';

let t: Awaited<ReturnType<typeof testApi>>;
beforeAll(async () => {
  t = await testApi();
});

/** A live instance with a registered node, as a dispatcher would have published it. */
async function instance() {
  const n = await t.node();
  const now = t.clock.now();
  await t.store.ctx.pool.query(
    `INSERT INTO instances (id, cluster, dispatcher_tag, type, provider_type, price, state, idle_behavior,
       node_id, created_at, state_since, updated_at)
     VALUES ($1, 'c1', 't1', 'small', 'small', 0.1, 'running', 'run', $2, $3, $3, $3)`,
    [n.instanceId, n.id, now],
  );
  return n;
}

/** A Running container of alice's on the node. */
async function running(n: { id: string; token: string; instanceId: string }): Promise<string> {
  const { cid } = await t.submit({ command: ['sleep', '600'] });
  const lock = await t.place(cid, n);
  const s = await t.call(n.token, {
    method: 'POST',
    url: `/v1/containers/${cid}/start`,
    payload: { lock_token: lock },
  });
  expect(s.statusCode, s.body).toBe(200);
  return cid;
}

const act = (id: string, action: string, payload?: object, token = t.tokens.admin) =>
  t.call(token, {
    method: 'POST',
    url: `/v1/instances/${id}/${action}`,
    ...(payload !== undefined ? { payload } : {}),
  });

const ping = async (n: { id: string; token: string }, running: string[], paused: string[]) =>
  (
    await t.call(n.token, {
      method: 'POST',
      url: `/v1/nodes/${n.id}/ping`,
      payload: { state: 'busy', wait_ms: 0, running, paused },
    })
  ).json();

const flags = async (cid: string) => {
  const c = await t.store.containers.get(cid);
  return { pause_wanted: c.pause_wanted, paused_by_hold: c.paused_by_hold };
};

const pauseEvents = async (cid: string) =>
  (await t.store.containerList.events(cid)).filter((e) => e.kind === 'pause').map((e) => e.message);

const sorted = (ids: string[]) => [...ids].sort();

describe('berth instance hold --freeze', () => {
  it('freezes the Running containers; run resumes what the hold froze, not what a user paused', async () => {
    const n = await instance();
    const [a, b, c] = [await running(n), await running(n), await running(n)];
    // b was paused by its user before the hold.
    expect(
      (await t.call(t.tokens.alice, { method: 'POST', url: `/v1/containers/${b}/pause` })).statusCode,
    ).toBe(200);

    const held = await act(n.instanceId, 'hold', { freeze: true });
    expect(held.statusCode, held.body).toBe(200);
    expect(held.json()).toMatchObject({
      id: n.instanceId,
      requested_idle_behavior: 'hold',
      frozen: sorted([a, c]),
      resumed: [],
    });
    expect(await flags(a)).toEqual({ pause_wanted: true, paused_by_hold: true });
    expect(await flags(b)).toEqual({ pause_wanted: true, paused_by_hold: false });
    expect(await flags(c)).toEqual({ pause_wanted: true, paused_by_hold: true });
    expect(await pauseEvents(a)).toEqual([
      `pause requested by root: instance ${n.instanceId} held with --freeze`,
    ]);
    // The agent is told through the pause machinery, and reports them frozen.
    const orders = await ping(n, [a, b, c], [b]);
    expect(sorted(orders.pause)).toEqual(sorted([a, c]));
    expect(orders.resume).toEqual([]);
    await ping(n, [a, b, c], [a, b, c]);
    expect((await t.store.containers.get(a)).paused).toBe(true);
    expect(await pauseEvents(a)).toContain('paused: frozen by its agent');

    // Asking again asks nothing more.
    expect((await act(n.instanceId, 'hold', { freeze: true })).json().frozen).toEqual([]);

    const run = await act(n.instanceId, 'run');
    expect(run.statusCode, run.body).toBe(200);
    expect(run.json()).toMatchObject({ requested_idle_behavior: 'run', frozen: [], resumed: sorted([a, c]) });
    expect(await flags(a)).toEqual({ pause_wanted: false, paused_by_hold: false });
    expect(await flags(b)).toEqual({ pause_wanted: true, paused_by_hold: false }); // the user's own pause
    expect((await pauseEvents(c)).at(-1)).toBe(
      `resume requested by root: instance ${n.instanceId} set to run`,
    );
    const back = await ping(n, [a, b, c], [a, b, c]);
    expect(sorted(back.resume)).toEqual(sorted([a, c]));
    expect(back.pause).toEqual([]);
    // A second run resumes nothing more.
    expect((await act(n.instanceId, 'run')).json().resumed).toEqual([]);
  });

  it("a hold without --freeze freezes nothing; drain resumes too; a user's own pause takes a container over", async () => {
    const n = await instance();
    const [a, c] = [await running(n), await running(n)];
    const plain = await act(n.instanceId, 'hold', {});
    expect(plain.json()).toMatchObject({ requested_idle_behavior: 'hold', frozen: [], resumed: [] });
    expect(await flags(a)).toEqual({ pause_wanted: false, paused_by_hold: false });

    expect((await act(n.instanceId, 'hold', { freeze: true })).json().frozen).toEqual(sorted([a, c]));
    // Alice resumes a, then pauses it again herself: it is hers now, and the drain leaves it paused.
    await t.call(t.tokens.alice, { method: 'POST', url: `/v1/containers/${a}/resume` });
    await t.call(t.tokens.alice, { method: 'POST', url: `/v1/containers/${a}/pause` });
    expect(await flags(a)).toEqual({ pause_wanted: true, paused_by_hold: false });
    const drain = await act(n.instanceId, 'drain');
    expect(drain.json()).toMatchObject({ requested_idle_behavior: 'drain', resumed: [c] });
    expect(await flags(a)).toEqual({ pause_wanted: true, paused_by_hold: false });
    expect(await flags(c)).toEqual({ pause_wanted: false, paused_by_hold: false });
  });

  it('the hold and its freezes are one transaction: a failed freeze leaves the instance unheld', async () => {
    const n = await instance();
    const a = await running(n);
    // A fault in the freeze's second half (its pause event) after the instance's row was updated.
    await t.store.ctx.pool.query(
      `CREATE FUNCTION fail_pause_event() RETURNS trigger LANGUAGE plpgsql AS
         $$ BEGIN RAISE EXCEPTION 'injected: pause event refused'; END $$;
       CREATE TRIGGER fail_pause_event BEFORE INSERT ON container_events
         FOR EACH ROW WHEN (NEW.kind = 'pause') EXECUTE FUNCTION fail_pause_event();`,
    );
    try {
      const held = await act(n.instanceId, 'hold', { freeze: true });
      expect(held.statusCode, held.body).toBe(500);
    } finally {
      await t.store.ctx.pool.query(
        'DROP TRIGGER fail_pause_event ON container_events; DROP FUNCTION fail_pause_event();',
      );
    }
    expect((await t.store.instances.get(n.instanceId)).requested_idle_behavior).toBeNull();
    expect(await flags(a)).toEqual({ pause_wanted: false, paused_by_hold: false });
    // The same request succeeds once the fault is gone.
    expect((await act(n.instanceId, 'hold', { freeze: true })).json()).toMatchObject({
      requested_idle_behavior: 'hold',
      frozen: [a],
    });
  });

  it('bad input names the field; only admins; a refusal changes nothing', async () => {
    const n = await instance();
    const a = await running(n);
    const cases: [string, unknown][] = [
      ['drain', { freeze: true }],
      ['run', { freeze: true }],
      ['kill', { freeze: true }],
      ['hold', { freeze: 'yes' }],
      ['hold', { freeze: true, colour: 'red' }],
    ];
    for (const [action, payload] of cases) {
      const res = await act(n.instanceId, action, payload as object);
      expect(res.statusCode, `${action} ${JSON.stringify(payload)}: ${res.body}`).toBe(400);
      const fields = res.json().error.details.map((d: { field: string }) => d.field);
      expect(
        fields.some((f: string) => f === 'freeze' || f === 'colour'),
        res.body,
      ).toBe(true);
    }
    const user = await act(n.instanceId, 'hold', { freeze: true }, t.tokens.alice);
    expect(user.statusCode).toBe(403);
    expect(await flags(a)).toEqual({ pause_wanted: false, paused_by_hold: false });
    expect((await t.store.instances.get(n.instanceId)).requested_idle_behavior).toBeNull();
    // No body at all is a plain request, as before.
    expect((await act(n.instanceId, 'hold')).statusCode).toBe(200);
    expect(await flags(a)).toEqual({ pause_wanted: false, paused_by_hold: false });
    expect((await act('i-nope', 'hold', { freeze: true })).statusCode).toBe(404);
  });
});
