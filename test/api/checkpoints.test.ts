// Checkpoints through the API (src/api/routes/checkpoints.ts, src/store/checkpoints.ts): the agent of a
// Running container keeps a tar archive for its request's next attempt, which the next attempt's agent (on
// another node) reads back; only under the container's current lock token on its own node; validated;
// users see that it exists, never the bytes; the request's end drops it.
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testApi } from '../helpers/api.js';

const LIMIT = 4 * 1024 * 1024;
const t = await testApi({ checkpointLimitBytes: LIMIT });

/** A real tar archive of one file `count` holding `content`. */
function tarOf(content: string | Buffer): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'berth-ckpt-api-'));
  try {
    writeFileSync(join(dir, 'count'), content);
    return execFileSync('tar', ['-c', '-f', '-', '-C', dir, 'count'], { maxBuffer: 64 * 1024 * 1024 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A submitted request's container, placed on a node and reported started: its lock token. */
async function running(n: { id: string; token: string; instanceId: string }, cid: string): Promise<string> {
  const token = await t.place(cid, n);
  const s = await t.call(n.token, {
    method: 'POST',
    url: `/v1/containers/${cid}/start`,
    payload: { lock_token: token },
  });
  expect(s.statusCode).toBe(200);
  return token;
}

const submit = () => t.submit({ command: ['true'], ram: '64MiB', opportunistic: true });

const put = (
  node: string,
  cid: string,
  lock: string | null,
  body: Buffer | string,
  type = 'application/x-tar',
) =>
  t.call(node, {
    method: 'PUT',
    url: `/v1/containers/${cid}/checkpoint?reclaimed=true`,
    headers: { 'content-type': type, ...(lock ? { 'x-berth-lock-token': lock } : {}) },
    payload: body,
  });
const get = (node: string, cid: string, lock: string) =>
  t.call(node, {
    method: 'GET',
    url: `/v1/containers/${cid}/checkpoint`,
    headers: { 'x-berth-lock-token': lock },
  });

describe('checkpoints through the API', () => {
  it('kept by attempt 1 on node A, read back by attempt 2 on node B (chunked), with migrate events; dropped at the end', async () => {
    const a = await t.node('i-ckpt-a');
    const b = await t.node('i-ckpt-b');
    const { rid, cid } = await submit();
    const lock = await running(a, cid);
    // Over two 1 MiB chunks, with bytes no text encoding would keep.
    const data = tarOf(Buffer.from(Array.from({ length: 2_500_000 }, (_, i) => (i * 7) % 256)));
    const up = await put(a.token, cid, lock, data);
    expect(up.statusCode, up.body).toBe(200);
    expect(up.json()).toMatchObject({ bytes: data.length });

    // The owner sees that it exists (size, time), in the container's JSON.
    const seen = (await t.call(t.tokens.alice, { method: 'GET', url: `/v1/containers/${cid}` })).json();
    expect(seen.checkpoint).toMatchObject({ bytes: data.length, container_id: cid });
    // Another user sees neither the container nor its checkpoint; a user token cannot read the bytes.
    expect((await t.call(t.tokens.bob, { method: 'GET', url: `/v1/containers/${cid}` })).statusCode).toBe(
      404,
    );
    expect((await get(t.tokens.alice, cid, lock)).statusCode).toBe(403);
    expect((await get(t.tokens.bob, cid, lock)).statusCode).toBe(403);

    // Reclaimed: requeued; the retry's start order on node B says it has a checkpoint.
    const c = await t.call(a.token, {
      method: 'POST',
      url: `/v1/containers/${cid}/cancel`,
      payload: { lock_token: lock, class: 'temp', reason: 'reclaimed: memory pressure', reclaimed: true },
    });
    expect(c.statusCode, c.body).toBe(200);
    const retry = (await t.store.requests.get(rid)).container_id!;
    expect(retry).not.toBe(cid);
    const lock2 = await t.place(retry, b);
    const ping = (
      await t.call(b.token, {
        method: 'POST',
        url: `/v1/nodes/${b.id}/ping`,
        payload: { state: 'idle', running: [], wait_ms: 0 },
      })
    ).json();
    expect(ping.start).toMatchObject([{ id: retry, checkpoint: true }]);
    await t.call(b.token, {
      method: 'POST',
      url: `/v1/containers/${retry}/start`,
      payload: { lock_token: lock2 },
    });
    // The old attempt's token and node A cannot read it for the new one.
    expect((await get(a.token, retry, lock)).statusCode).toBe(404);
    expect((await get(b.token, retry, lock)).statusCode).toBe(409);
    const down = await get(b.token, retry, lock2);
    expect(down.statusCode).toBe(200);
    expect(down.headers['content-type']).toBe('application/x-tar');
    expect(Buffer.compare(down.rawPayload, data)).toBe(0);

    const moves = async (id: string) =>
      (await t.store.containerList.events(id)).filter((e) => e.kind === 'migrate').map((e) => e.message);
    expect(await moves(cid)).toEqual([expect.stringMatching(/^migrating: .* on instance i-ckpt-a/)]);
    expect(await moves(retry)).toEqual([
      expect.stringMatching(new RegExp(`checkpoint of ${cid} .*from instance i-ckpt-a to i-ckpt-b`)),
    ]);

    // The request ends (success): its checkpoint is gone.
    await t.call(b.token, {
      method: 'POST',
      url: `/v1/containers/${retry}/complete`,
      payload: { lock_token: lock2, exit_code: 0, oom_killed: false, usage: null },
    });
    expect((await t.store.requests.get(rid)).state).toBe('Final');
    expect((await t.store.checkpoints.infoOf([rid])).size).toBe(0);
    const rows = await t.db.pool.query(
      `SELECT count(*)::int AS n FROM checkpoint_chunks WHERE request_id = $1`,
      [rid],
    );
    expect(rows.rows[0].n).toBe(0);
  });

  it('a newer checkpoint replaces the older one; none kept reads as 204', async () => {
    const a = await t.node();
    const { rid, cid } = await submit();
    const lock = await running(a, cid);
    expect((await get(a.token, cid, lock)).statusCode).toBe(204);
    expect((await put(a.token, cid, lock, tarOf('1'))).statusCode).toBe(200);
    const newer = tarOf('22');
    expect((await put(a.token, cid, lock, newer)).statusCode).toBe(200);
    expect(Buffer.compare((await get(a.token, cid, lock)).rawPayload, newer)).toBe(0);
    expect((await t.store.checkpoints.infoOf([rid])).get(rid)).toMatchObject({ bytes: newer.length });
  });

  it('refuses, with the field named and nothing stored: no token, stale token, other node, not tar, wrong type, over the limit', async () => {
    const a = await t.node();
    const other = await t.node();
    const { rid, cid } = await submit();
    const lock = await running(a, cid);
    const tar = tarOf('5');
    const cases: [Awaited<ReturnType<typeof put>>, number, RegExp][] = [
      [await put(a.token, cid, null, tar), 400, /x-berth-lock-token/],
      [await put(a.token, cid, '1.bogus', tar), 409, /stale lock token/],
      [await put(other.token, cid, lock, tar), 404, /not found/],
      [await put(a.token, cid, lock, Buffer.alloc(2048, 1)), 400, /body: expected a tar archive/],
      [await put(a.token, cid, lock, Buffer.alloc(700)), 400, /512-byte blocks/],
      [await put(a.token, cid, lock, JSON.stringify({ a: 1 }), 'application/json'), 415, /content-type/],
      [await put(a.token, cid, lock, Buffer.alloc(LIMIT + 512)), 413, /./],
      [await put(t.tokens.alice, cid, lock, tar), 403, /./],
    ];
    for (const [res, status, msg] of cases) {
      expect(res.statusCode, res.body).toBe(status);
      expect(res.json().error.message).toMatch(msg);
    }
    expect((await t.store.checkpoints.infoOf([rid])).size).toBe(0);
    // A query that is not true/false is refused by name.
    const q = await t.call(a.token, {
      method: 'PUT',
      url: `/v1/containers/${cid}/checkpoint?reclaimed=yes`,
      headers: { 'content-type': 'application/x-tar', 'x-berth-lock-token': lock },
      payload: tar,
    });
    expect(q.statusCode).toBe(400);
    expect(q.json().error.message).toMatch(/reclaimed/);
  });

  it('keeps which runtime saved a checkpoint whole, and says so on the download; a container’s own says nothing', async () => {
    const a = await t.node('i-ckpt-whole');
    const { cid } = await submit();
    const lock = await running(a, cid);
    const tar = tarOf('7');
    const putWhole = (whole: string) =>
      t.call(a.token, {
        method: 'PUT',
        url: `/v1/containers/${cid}/checkpoint?reclaimed=true&whole=${encodeURIComponent(whole)}`,
        headers: { 'content-type': 'application/x-tar', 'x-berth-lock-token': lock },
        payload: tar,
      });
    expect((await putWhole('process')).statusCode).toBe(200);
    expect((await get(a.token, cid, lock)).headers['x-berth-whole-state']).toBe('process');
    // A name that is not a runtime's is refused by name, and keeps nothing of itself.
    const bad = await putWhole('../vm');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.message).toMatch(/whole/);
    expect((await get(a.token, cid, lock)).headers['x-berth-whole-state']).toBe('process');
    // What the container wrote itself (no `whole`) replaces it, and the download says nothing of a runtime.
    expect((await put(a.token, cid, lock, tar)).statusCode).toBe(200);
    const own = await get(a.token, cid, lock);
    expect(own.statusCode).toBe(200);
    expect(own.headers['x-berth-whole-state']).toBeUndefined();
  });
});
