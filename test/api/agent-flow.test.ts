// The agent's side of the API end to end, in-process: register, long-poll ping, start, logs, complete,
// and a reader following the logs over SSE.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApi } from '../../src/api/server.js';
import { Notifier } from '../../src/store/notifier.js';
import { testApi } from '../helpers/api.js';

let t: Awaited<ReturnType<typeof testApi>>;
let notifier: Notifier;
let url: string;
let close: () => Promise<void>;

beforeAll(async () => {
  t = await testApi();
  notifier = new Notifier(t.db.url);
  await notifier.start();
  // A real socket for SSE and long polls.
  const app = await buildApi({ store: t.store, notifier });
  url = await app.listen({ port: 0, host: '127.0.0.1' });
  close = async () => {
    await app.close();
    await notifier.stop();
  };
});
afterAll(async () => close?.());

async function http(token: string | null, method: string, path: string, body?: unknown) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return { status: res.status, json: (await res.json()) as any };
}

describe('agent flow', () => {
  it('register → ping (long poll woken by assign) → start → logs → complete; SSE follower sees all', async () => {
    const n = await t.node('i-flow');
    const r = (
      await t.call(t.tokens.alice, {
        method: 'POST',
        url: '/v1/requests',
        payload: { command: ['echo', 'hi'], env: { A: '1' } },
      })
    ).json();
    const cid = r.container_id as string;

    // The ping waits (long poll) until the dispatcher assigns work.
    const started = Date.now();
    const ping = http(n.token, 'POST', `/v1/nodes/${n.id}/ping`, {
      state: 'idle',
      running: [],
      wait_ms: 20_000,
    });
    const lock = (
      await t.call(t.tokens.dispatcher, {
        method: 'POST',
        url: '/v1/containers/lock',
        payload: { dispatcher_id: 'd-1', ids: [cid] },
      })
    ).json();
    expect(lock.locks).toHaveLength(1);
    await t.call(t.tokens.dispatcher, {
      method: 'POST',
      url: `/v1/containers/${cid}/assign`,
      payload: { dispatcher_id: 'd-1', instance_id: 'i-flow', node_id: n.id },
    });
    const p = await ping;
    expect(p.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(15_000); // woken by the notification, not the 20 s timeout
    expect(p.json.start).toHaveLength(1);
    const order = p.json.start[0];
    expect(order).toMatchObject({
      id: cid,
      command: ['echo', 'hi'],
      env: { A: '1' },
      lock_token: lock.locks[0].token,
    });

    // A reader follows the logs over SSE from before the start to the end.
    const follow = fetch(`${url}/v1/containers/${cid}/logs?follow=true`, {
      headers: { authorization: `Bearer ${t.tokens.alice}` },
    }).then((res) => res.text());

    expect(
      (await http(n.token, 'POST', `/v1/containers/${cid}/start`, { lock_token: order.lock_token })).status,
    ).toBe(200);
    // running containers are not handed out again
    const again = await http(n.token, 'POST', `/v1/nodes/${n.id}/ping`, { state: 'busy', running: [cid] });
    expect(again.json.start).toEqual([]);
    expect(again.json.kill).toEqual([]);

    const lines = Array.from({ length: 300 }, (_, i) => ({
      seq: i,
      stream: i % 3 === 0 ? 'stderr' : 'stdout',
      data: `line ${i}\n`,
    }));
    expect(
      (
        await http(n.token, 'POST', `/v1/containers/${cid}/logs`, {
          lock_token: order.lock_token,
          chunks: lines.slice(0, 150),
        })
      ).json,
    ).toEqual({ appended: 150 });
    // a retried append (same seqs) is idempotent
    expect(
      (
        await http(n.token, 'POST', `/v1/containers/${cid}/logs`, {
          lock_token: order.lock_token,
          chunks: lines.slice(100, 300),
        })
      ).json,
    ).toEqual({ appended: 150 });
    const done = await http(n.token, 'POST', `/v1/containers/${cid}/complete`, {
      lock_token: order.lock_token,
      exit_code: 0,
      usage: { peak_ram: 1048576, cpu_seconds: 0.01, wall_ms: 12 },
    });
    expect(done.status).toBe(200);
    expect(done.json).toMatchObject({ state: 'Complete', exit_code: 0, usage: { peak_ram: 1048576 } });

    const sse = await follow;
    const received = [...sse.matchAll(/^event: log\ndata: (.*)$/gm)].map((m) => JSON.parse(m[1]!));
    expect(received.map((c) => c.seq)).toEqual(lines.map((l) => l.seq));
    expect(received.map((c) => c.data).join('')).toBe(lines.map((l) => l.data).join(''));
    expect(sse).toMatch(/event: end\ndata: \{"state":"Complete","exit_code":0\}/);

    const read = (await http(t.tokens.alice, 'GET', `/v1/containers/${cid}/logs?after=295`)).json;
    expect(read.items.map((c: { seq: number }) => c.seq)).toEqual([296, 297, 298, 299]);
    expect((await t.store.requests.get(r.id)).outcome).toBe('success');
  });

  it('a cancelled container is on the kill list of the node running it', async () => {
    const n = await t.node('i-kill');
    const r = (
      await t.call(t.tokens.alice, {
        method: 'POST',
        url: '/v1/requests',
        payload: { command: ['sleep', '1000'] },
      })
    ).json();
    const cid = r.container_id;
    const lockToken = await t.place(cid, n);
    await http(n.token, 'POST', `/v1/containers/${cid}/start`, { lock_token: lockToken });
    const ping = http(n.token, 'POST', `/v1/nodes/${n.id}/ping`, {
      state: 'busy',
      running: [cid],
      wait_ms: 20_000,
    });
    await t.call(t.tokens.alice, { method: 'POST', url: `/v1/requests/${r.id}/cancel`, payload: {} });
    const p = await ping;
    expect(p.json.kill).toEqual([cid]);
    // The old token is revoked but for the cancel grace: the agent's one report of how the container
    // ended is recorded on the Cancelled container; any later report is refused.
    const report = await http(n.token, 'POST', `/v1/containers/${cid}/complete`, {
      lock_token: lockToken,
      exit_code: 143,
    });
    expect(report.status).toBe(200);
    expect(report.json).toMatchObject({ state: 'Cancelled', exit_code: 143 });
    const late = await http(n.token, 'POST', `/v1/containers/${cid}/complete`, {
      lock_token: lockToken,
      exit_code: 0,
    });
    expect(late.status).toBe(409);
    expect(late.json.error.message).toMatch(/stale lock token/);
  });

  it('a Running container its agent stops reporting is cancelled (temp) and retried after the grace, not before', async () => {
    const n = await t.node('i-forgot');
    const submitted = async () =>
      (
        await t.call(t.tokens.alice, {
          method: 'POST',
          url: '/v1/requests',
          payload: { command: ['sleep', '1000'] },
        })
      ).json() as { id: string; container_id: string };
    const running = async () => {
      const r = await submitted();
      const lock = (
        await t.call(t.tokens.dispatcher, {
          method: 'POST',
          url: '/v1/containers/lock',
          payload: { dispatcher_id: 'd-1', ids: [r.container_id] },
        })
      ).json();
      await t.call(t.tokens.dispatcher, {
        method: 'POST',
        url: `/v1/containers/${r.container_id}/assign`,
        payload: { dispatcher_id: 'd-1', instance_id: 'i-forgot', node_id: n.id },
      });
      const st = await http(n.token, 'POST', `/v1/containers/${r.container_id}/start`, {
        lock_token: lock.locks[0].token,
      });
      expect(st.status).toBe(200);
      return r;
    };
    const forgotten = await running();
    const known = await running();
    const ping = (list: string[] | undefined) =>
      http(n.token, 'POST', `/v1/nodes/${n.id}/ping`, {
        state: 'busy',
        ...(list ? { running: list } : {}),
      });
    const state = async (id: string) => (await t.store.containers.get(id)).state;

    // Within the grace a missing container may simply have started after the ping was sent.
    t.clock.advance(89_000);
    expect((await ping([known.container_id])).status).toBe(200);
    expect(await state(forgotten.container_id)).toBe('Running');
    // A ping without a list says nothing about what runs.
    t.clock.advance(2_000);
    expect((await ping(undefined)).status).toBe(200);
    expect(await state(forgotten.container_id)).toBe('Running');

    // Past the grace, missing from the agent's own list: lost. It is cancelled temp and retried.
    const p = await ping([known.container_id]);
    expect(p.status).toBe(200);
    const c = await t.store.containers.get(forgotten.container_id);
    expect(c.state).toBe('Cancelled');
    expect(c.failure_class).toBe('temp');
    expect(c.runtime_status).toMatch(/no longer reports it running/);
    const req = await t.store.requests.get(forgotten.id);
    expect(req.state).toBe('Committed');
    expect(req.container_id).not.toBe(forgotten.container_id);
    expect(await state(req.container_id!)).toBe('Queued');
    // The container the agent does report is untouched.
    expect(await state(known.container_id)).toBe('Running');
  });
});
