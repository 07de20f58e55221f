// A one-shot agent's registration (`once`: the container a SLURM job was started for): the answer carries
// that container's start order, already started, when it is Locked to the node; otherwise no order and
// nothing changed. The lock token and every later check are those of the ordinary start report.
import { describe, expect, it, vi } from 'vitest';
import { testApi } from '../helpers/api.js';

const t = await testApi();

/** A node recorded by the dispatcher, not yet registered: its id and one-time secret. */
async function newNode(instanceId = `i-${Math.random().toString(36).slice(2, 10)}`) {
  const created = await t.call(t.tokens.dispatcher, {
    method: 'POST',
    url: '/v1/nodes',
    payload: { cluster: 'c1', dispatcher_tag: 't1', instance_id: instanceId, instance_type: 'small' },
  });
  const { node, bootstrap_secret: secret } = created.json();
  return { id: node.id as string, secret: secret as string, instanceId };
}

async function submit(): Promise<string> {
  const r = await t.call(t.tokens.alice, {
    method: 'POST',
    url: '/v1/requests',
    payload: { command: ['echo', 'hi'], env: { A: '1' } },
  });
  return r.json().container_id as string;
}

const register = (n: { id: string; secret: string }, extra: Record<string, unknown> = {}) =>
  t.call(null, {
    method: 'POST',
    url: '/v1/nodes/register',
    payload: { node_id: n.id, secret: n.secret, ...extra },
  });

const stateOf = async (cid: string) => (await t.store.containers.get(cid)).state;

describe('POST /v1/nodes/register with once', () => {
  it('answers with the Locked container’s order, started; its lock token then reports, a wrong one is refused', async () => {
    const n = await newNode();
    const cid = await submit();
    const token = await t.place(cid, n);
    expect(await stateOf(cid)).toBe('Locked');
    const r = await register(n, { once: cid });
    expect(r.statusCode, r.body).toBe(201);
    const body = r.json();
    expect(body.start).toHaveLength(1);
    expect(body.start[0]).toMatchObject({
      id: cid,
      lock_token: token,
      command: ['echo', 'hi'],
      env: { A: '1' },
      started: true,
    });
    expect(await stateOf(cid)).toBe('Running');
    const call = (url: string, payload: unknown) =>
      t.call(body.token, { method: 'POST', url, payload: payload as object }).then((x) => x.statusCode);
    // A start report sent anyway (an agent that did not read `started`): refused as a second start.
    expect(await call(`/v1/containers/${cid}/start`, { lock_token: token })).toBe(409);
    const wrong = `${token.slice(0, -1)}${token.endsWith('0') ? '1' : '0'}`;
    const exit = { exit_code: 0, usage: { peak_ram: 1, cpu_seconds: 0, wall_ms: 1 } };
    expect(await call(`/v1/containers/${cid}/complete`, { lock_token: wrong, ...exit })).toBe(409);
    expect(await stateOf(cid)).toBe('Running');
    expect(await call(`/v1/containers/${cid}/complete`, { lock_token: token, ...exit })).toBe(200);
    expect(await stateOf(cid)).toBe('Complete');
  });

  it('no order when the container is not Locked to this node (queued, or another node’s); nothing changes', async () => {
    const queued = await submit();
    const n1 = await newNode();
    const r1 = await register(n1, { once: queued });
    expect(r1.statusCode, r1.body).toBe(201);
    expect(r1.json().start).toEqual([]);
    expect(await stateOf(queued)).toBe('Queued');

    const other = await newNode();
    const elsewhere = await submit();
    await t.place(elsewhere, other);
    const n2 = await newNode();
    const r2 = await register(n2, { once: elsewhere });
    expect(r2.json().start).toEqual([]);
    expect(await stateOf(elsewhere)).toBe('Locked');
  });

  it("reads only the one container's start order: workFor's answer for a Locked one, none otherwise", async () => {
    const n = await newNode();
    await register(n);
    const [mine, queued, elsewhere] = [await submit(), await submit(), await submit()];
    await t.place(mine, n);
    await t.place(elsewhere, await newNode());
    const whole = (await t.store.containers.workFor(n.id, [])).start;
    expect(whole.map((o) => o.id)).toEqual([mine]);
    expect(await t.store.containers.startOrderFor(n.id, mine)).toEqual(whole[0]);
    for (const id of [queued, elsewhere, 'c-nope'])
      expect(await t.store.containers.startOrderFor(n.id, id), id).toBeNull();
    // The registration asks for that one order, never the node's whole work.
    const n2 = await newNode();
    const cid = await submit();
    await t.place(cid, n2);
    const workFor = vi.spyOn(t.store.containers, 'workFor');
    try {
      const r = await register(n2, { once: cid });
      expect(r.json().start.map((o: { id: string }) => o.id)).toEqual([cid]);
      expect(workFor).not.toHaveBeenCalled();
    } finally {
      workFor.mockRestore();
    }
  });

  it('without once the answer is as before: no start', async () => {
    const n = await newNode();
    const cid = await submit();
    await t.place(cid, n);
    const r = await register(n);
    expect(r.statusCode).toBe(201);
    expect(r.json()).not.toHaveProperty('start');
    expect(await stateOf(cid)).toBe('Locked');
  });

  it('a malformed once is refused naming the field, and the secret is not used up', async () => {
    const n = await newNode();
    for (const bad of ['nope', 42, '', null]) {
      const r = await register(n, { once: bad });
      expect(r.statusCode, JSON.stringify(bad)).toBe(400);
      expect(r.body).toMatch(/once/);
    }
    expect((await register(n)).statusCode).toBe(201);
  });
});
