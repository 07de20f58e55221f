// What a user may ask of the API beyond resources (issue 10, "also expected by SLURM and AWS Batch users"):
// secret environment values that are stored and handed to the container's agent but never shown back,
// and the highest priority a token may set.
import { beforeAll, describe, expect, it } from 'vitest';
import { testApi } from '../helpers/api.js';
import { dump } from '../helpers/store.js';

let t: Awaited<ReturnType<typeof testApi>>;
const SECRET = 's3cr3t-value-9f8e7d';

beforeAll(async () => {
  t = await testApi();
});

describe('secret environment values', () => {
  it('are stored and given to the agent with its start order, and never shown back by any other answer', async () => {
    const sub = await t.call(t.tokens.alice, {
      method: 'POST',
      url: '/v1/requests',
      payload: {
        command: ['sh', '-c', 'echo $API_KEY'],
        env: { PLAIN: 'p' },
        secret_env: { API_KEY: SECRET },
      },
    });
    expect(sub.statusCode).toBe(201);
    const r = sub.json();
    expect(r.secret_env_keys).toEqual(['API_KEY']);
    expect(r.env).toEqual({ PLAIN: 'p' });
    const batch = await t.call(t.tokens.alice, {
      method: 'POST',
      url: '/v1/requests/batch',
      payload: { requests: [{ command: ['true'], secret_env: { B: SECRET } }] },
    });
    expect(batch.statusCode).toBe(201);

    // The agent gets it: lock, assign and ping as the dispatcher and the node would.
    const node = await t.node();
    await t.place(r.container_id, node);
    const ping = await t.call(node.token, {
      method: 'POST',
      url: `/v1/nodes/${node.id}/ping`,
      payload: { state: 'idle', running: [] },
    });
    const order = ping.json().start.find((s: { id: string }) => s.id === r.container_id);
    expect(order.env).toEqual({ PLAIN: 'p' });
    expect(order.secret_env).toEqual({ API_KEY: SECRET });

    // Nothing else shows it: the answers of submit, get, list, containers, events, as owner and as admin.
    const answers = [sub.body, batch.body];
    for (const token of [t.tokens.alice, t.tokens.admin])
      for (const url of [
        `/v1/requests/${r.id}`,
        '/v1/requests?limit=1000',
        `/v1/containers/${r.container_id}`,
        `/v1/containers/${r.container_id}/events`,
        '/v1/containers?limit=1000',
      ])
        answers.push((await t.call(token, { method: 'GET', url })).body);
    for (const a of answers) expect(a.includes(SECRET), a.slice(0, 200)).toBe(false);
  });

  it('a name given both as env and as secret_env is refused, naming it', async () => {
    const before = await dump(t.store);
    const res = await t.call(t.tokens.alice, {
      method: 'POST',
      url: '/v1/requests',
      payload: { command: ['true'], env: { K: 'a' }, secret_env: { K: 'b', 'bad-name': 'c' } },
    });
    expect(res.statusCode).toBe(400);
    const fields = res.json().error.details.map((d: { field: string }) => d.field);
    expect(fields).toEqual(expect.arrayContaining(['secret_env.K', 'secret_env.bad-name']));
    expect(await dump(t.store)).toBe(before);
  });
});

describe('the highest priority a token may set', () => {
  it('is set by an admin at token creation; a higher priority on submit or change is a 400 naming priority', async () => {
    const made = await t.call(t.tokens.admin, {
      method: 'POST',
      url: '/v1/tokens',
      payload: { scope: 'user', owner: 'carol', max_priority: 100 },
    });
    expect(made.statusCode).toBe(201);
    expect(made.json().info.maxPriority).toBe(100);
    const carol = made.json().token as string;
    expect((await t.call(carol, { method: 'GET', url: '/v1/whoami' })).json().max_priority).toBe(100);

    const before = await dump(t.store);
    const high = await t.call(carol, {
      method: 'POST',
      url: '/v1/requests',
      payload: { command: ['true'], priority: 101 },
    });
    expect(high.statusCode).toBe(400);
    expect(high.json().error.details).toEqual([
      {
        field: 'priority',
        problem: 'expected at most 100: the highest priority your token may set (an admin sets it), got 101',
      },
    ]);
    const batch = await t.call(carol, {
      method: 'POST',
      url: '/v1/requests/batch',
      payload: { requests: [{ command: ['true'] }, { command: ['true'], priority: 500 }] },
    });
    expect(batch.statusCode).toBe(400);
    expect(batch.json().error.details[0].field).toBe('requests.1.priority');
    expect(await dump(t.store)).toBe(before);

    // Without a priority, the default (500) is lowered to the limit; at the limit it is accepted.
    const dflt = (
      await t.call(carol, { method: 'POST', url: '/v1/requests', payload: { command: ['true'] } })
    ).json();
    expect(dflt.priority).toBe(100);
    const patch = await t.call(carol, {
      method: 'PATCH',
      url: `/v1/requests/${dflt.id}`,
      payload: { priority: 900 },
    });
    expect(patch.statusCode).toBe(400);
    expect(patch.json().error.details[0].field).toBe('priority');
    expect(
      (
        await t.call(carol, { method: 'PATCH', url: `/v1/requests/${dflt.id}`, payload: { priority: 40 } })
      ).json().priority,
    ).toBe(40);
    // Other tokens are not limited.
    const alice = await t.call(t.tokens.alice, {
      method: 'POST',
      url: '/v1/requests',
      payload: { command: ['true'], priority: 1000 },
    });
    expect(alice.statusCode).toBe(201);
    expect(
      (await t.call(t.tokens.admin, { method: 'GET', url: '/v1/tokens' }))
        .json()
        .items.find((i: { owner: string }) => i.owner === 'carol').maxPriority,
    ).toBe(100);
  });
});

describe('priority 0 through the API', () => {
  it('PATCH to 0 keeps the request (Committed, Queued, priority 0) and shows the new priority', async () => {
    const r = (
      await t.call(t.tokens.alice, { method: 'POST', url: '/v1/requests', payload: { command: ['true'] } })
    ).json();
    const p = await t.call(t.tokens.alice, {
      method: 'PATCH',
      url: `/v1/requests/${r.id}`,
      payload: { priority: 0 },
    });
    expect(p.statusCode).toBe(200);
    expect(p.json()).toMatchObject({ state: 'Committed', priority: 0, container_state: 'Queued' });
    const c = (
      await t.call(t.tokens.alice, { method: 'GET', url: `/v1/containers/${r.container_id}` })
    ).json();
    expect(c).toMatchObject({ state: 'Queued', priority: 0 });
    // submitted at 0: accepted (held until raised)
    const held = await t.call(t.tokens.alice, {
      method: 'POST',
      url: '/v1/requests',
      payload: { command: ['true'], priority: 0 },
    });
    expect(held.json()).toMatchObject({ state: 'Committed', priority: 0 });
  });
});
