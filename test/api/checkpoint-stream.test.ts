// A checkpoint as large as a vm container's whole state (issue 16: ~90 MiB for a 256 MiB guest) through a
// listening API and the agent's own client: streamed into PostgreSQL as it arrives and out of it chunk by
// chunk (src/api/routes/checkpoints.ts, src/store/checkpoints.ts), byte-exact; a body cut off midway keeps
// nothing of itself (the older checkpoint stays whole); the limit refuses a body, declared or chunked,
// with the field named and nothing kept. Then the agent's side (src/agent/checkpoint.ts) against it: GNU tar
// packs straight into the upload; a tar failing half-way, a refusal (limit, stale token) or a failed
// attempt keeps nothing of itself and leaves no tar running; a retry packs again. The small cases (auth,
// token, format) are checkpoints.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { ApiCheckpoints } from '../../src/agent/checkpoint.js';
import { AbortedError, AgentClient, ApiUnreachableError } from '../../src/agent/client.js';
import { testApi } from '../helpers/api.js';
import { until } from '../helpers/cli.js';

const MIB = 1024 * 1024;
const LIMIT = 128 * MIB;
const t = await testApi({ checkpointLimitBytes: LIMIT });
let url = '';
const dirs: string[] = [];
beforeAll(async () => {
  url = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A tar archive (GNU tar) of one file `state`: `random` random bytes then `zeros` zero bytes. */
function tarOf(random: number, zeros: number): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'berth-ckpt-stream-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'state'), Buffer.concat([randomBytes(random), Buffer.alloc(zeros)]));
  return execFileSync('tar', ['-c', '-f', '-', '-C', dir, 'state'], { maxBuffer: 2 * LIMIT });
}

/** A Running container on a node of its own, and that node's agent client. */
async function running(): Promise<{ rid: string; cid: string; lock: string; client: AgentClient }> {
  const n = await t.node();
  const { rid, cid } = await t.submit({ command: ['true'], ram: '64MiB', opportunistic: true });
  const lock = await t.place(cid, n);
  const client = new AgentClient(url, n.id);
  client.token = n.token;
  await client.start(cid, lock);
  return { rid, cid, lock, client };
}

/** A raw PUT of the checkpoint, its status and answer; `cut`: the socket is destroyed after that many bytes. */
function rawPut(
  c: { cid: string; lock: string; client: AgentClient },
  body: Buffer,
  opts: { declare: boolean; cut?: number },
): Promise<{ status: number; body: string } | 'cut'> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/v1/containers/${c.cid}/checkpoint`, {
      method: 'PUT',
      headers: {
        authorization: `Bearer ${c.client.token}`,
        'content-type': 'application/x-tar',
        'x-berth-lock-token': c.lock,
        // Without a declared length, chunked (else node's end(body) would declare it).
        ...(opts.declare ? { 'content-length': String(body.length) } : { 'transfer-encoding': 'chunked' }),
      },
    });
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => parts.push(b));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString() }));
    });
    req.on('error', (err) => (opts.cut !== undefined ? resolve('cut') : reject(err)));
    if (opts.cut === undefined) return req.end(body);
    req.write(body.subarray(0, opts.cut), () => req.destroy());
  });
}

/** Waits, up to a deadline, until no transaction of this database is open (the API's call ended). */
async function idle(): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await t.db.pool.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`,
    );
    if (r.rows[0].n === 0) return;
    if (Date.now() > deadline) throw new Error('a checkpoint transaction is still open after 30 s');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The agent client's download, gathered (the agent unpacks it as it arrives instead). */
async function download(c: { cid: string; lock: string; client: AgentClient }): Promise<Buffer | null> {
  const parts: Buffer[] = [];
  const got = await c.client.getCheckpoint(c.cid, c.lock, async (body) => {
    for await (const b of body) parts.push(b as Buffer);
  });
  if (got === null) return null;
  expect(got.bytes).toBe(Buffer.concat(parts).length);
  return Buffer.concat(parts);
}

const storedBytes = async (rid: string) =>
  Number(
    (
      await t.db.pool.query(
        `SELECT coalesce(sum(length(data)), 0) AS n FROM checkpoint_chunks WHERE request_id = $1`,
        [rid],
      )
    ).rows[0].n,
  );

describe('checkpoints streamed through a listening API', () => {
  it('a 96 MiB archive (more than the old 64 MiB whole-body limit) goes up and comes back byte-exact', async () => {
    const c = await running();
    const tar = tarOf(48 * MIB, 48 * MIB);
    expect(tar.length).toBeGreaterThan(96 * MIB);
    const t0 = performance.now();
    await c.client.putCheckpoint(c.cid, c.lock, Readable.from([tar]), true);
    const t1 = performance.now();
    const back = await download(c);
    const t2 = performance.now();
    console.log(
      `checkpoint of ${(tar.length / MIB).toFixed(1)} MiB: upload ${Math.round(t1 - t0)} ms, download ${Math.round(t2 - t1)} ms`,
    );
    expect(back?.length).toBe(tar.length);
    expect(back!.equals(tar)).toBe(true);
    expect((await t.store.checkpoints.infoOf([c.rid])).get(c.rid)).toMatchObject({ bytes: tar.length });
    expect(await storedBytes(c.rid)).toBe(tar.length);
  });

  it('an upload cut off midway keeps nothing of itself: the older checkpoint stays whole', async () => {
    const c = await running();
    const older = tarOf(3 * MIB, 0);
    await c.client.putCheckpoint(c.cid, c.lock, Readable.from([older]), false);
    const events = async () =>
      (
        await t.db.pool.query(`SELECT count(*)::int AS n FROM container_events WHERE container_id = $1`, [
          c.cid,
        ])
      ).rows[0].n as number;
    const before = await events();
    const newer = tarOf(20 * MIB, 0);
    expect(await rawPut(c, newer, { declare: true, cut: 9 * MIB })).toBe('cut');
    await idle();
    expect((await t.store.checkpoints.infoOf([c.rid])).get(c.rid)).toMatchObject({ bytes: older.length });
    expect(await storedBytes(c.rid)).toBe(older.length);
    expect(await events()).toBe(before);
    expect((await download(c))!.equals(older)).toBe(true);
  });

  it('a download abandoned midway ends its transaction (no migrate event, no connection held); the next one is whole', async () => {
    const c = await running();
    const tar = tarOf(32 * MIB, 0);
    await c.client.putCheckpoint(c.cid, c.lock, Readable.from([tar]), false);
    const migrates = async () =>
      (
        await t.db.pool.query(
          `SELECT count(*)::int AS n FROM container_events WHERE container_id = $1 AND kind = 'migrate'`,
          [c.cid],
        )
      ).rows[0].n as number;
    const before = await migrates();
    // The agent goes away after the first MiB.
    await new Promise<void>((resolve, reject) => {
      const req = http.get(`${url}/v1/containers/${c.cid}/checkpoint`, {
        headers: { authorization: `Bearer ${c.client.token}`, 'x-berth-lock-token': c.lock },
      });
      req.on('response', (res) => {
        expect(res.statusCode).toBe(200);
        let got = 0;
        res.on('data', (b: Buffer) => {
          got += b.length;
          if (got >= MIB) {
            req.destroy();
            resolve();
          }
        });
      });
      req.on('error', () => {});
      req.on('close', () => resolve());
      setTimeout(() => reject(new Error('no first MiB within 30 s')), 30_000).unref();
    });
    await idle();
    expect(await migrates()).toBe(before);
    expect((await download(c))!.equals(tar)).toBe(true);
    expect(await migrates()).toBe(before + 1);
  });

  it('the limit refuses a body declared larger, and a chunked one once it passes the limit, keeping nothing', async () => {
    const c = await running();
    const big = tarOf(LIMIT, 0);
    for (const declare of [true, false]) {
      const res = await rawPut(c, big, { declare });
      expect(res).not.toBe('cut');
      const r = res as { status: number; body: string };
      expect(r.status, r.body).toBe(413);
      const err = JSON.parse(r.body).error;
      expect(err.message).toMatch(/checkpoint is at most 134217728 bytes \(checkpoint_limit\)/);
      expect(err.details).toEqual([{ field: 'body', problem: expect.stringMatching(/checkpoint limit/) }]);
      await idle();
      expect((await t.store.checkpoints.infoOf([c.rid])).size).toBe(0);
      expect(await storedBytes(c.rid)).toBe(0);
    }
  });
});

/** A temp directory of this file's (removed after it). */
function temp(): string {
  const dir = mkdtempSync(join(tmpdir(), 'berth-ckpt-stream-'));
  dirs.push(dir);
  return dir;
}

/** The tar processes this test process started that still run (or wait to be reaped). */
function tarChildren(): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // "pid (comm) state ppid ...": comm may hold spaces, so split after its closing parenthesis.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const [comm, rest] = [
        stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
        stat.slice(stat.lastIndexOf(')') + 2),
      ];
      if (comm === 'tar' && Number(rest.split(' ')[1]) === process.pid) pids.push(Number(name));
    } catch {
      // ended meanwhile
    }
  }
  return pids;
}

/** Waits, up to a deadline, until no tar started here is left. */
async function noTarLeft(): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (tarChildren().length > 0) {
    if (Date.now() > deadline) throw new Error(`tar still running after 30 s: ${tarChildren().join(' ')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The agent's checkpoints over the container's client; `put` may stand in front of its upload. */
function agentSide(
  c: { cid: string; lock: string; client: AgentClient },
  limit: number,
  put?: (tar: Readable, real: () => Promise<void>) => Promise<void>,
  stop?: AbortSignal,
) {
  const client = {
    putCheckpoint: (id: string, token: string, tar: Readable, reclaimed: boolean, signal?: AbortSignal) => {
      const real = () => c.client.putCheckpoint(id, token, tar, reclaimed, signal);
      return put ? put(tar, real) : real();
    },
    getCheckpoint: c.client.getCheckpoint.bind(c.client),
  };
  return { owner: { id: c.cid, lockToken: c.lock }, store: new ApiCheckpoints(client, limit, stop) };
}

/**
 * A TCP proxy in front of the API, standing for the network between it and the agent. `trickle`: it reads
 * the agent's bytes slowly (64 KiB per 20 ms). `holdAnswer`: the API's answer reaches the agent only after
 * that many more of the agent's bytes went to the API (a slow return path); a reset from the API reaches the
 * agent as a reset, and what the proxy held of the answer is lost with it (as on a real network).
 */
async function proxy(o: { trickle?: boolean; holdAnswer?: number } = {}) {
  const target = new URL(url);
  const sockets = new Set<net.Socket>();
  const p = { url: '', toApi: 0, open: () => sockets.size, resets: 0 };
  const server = net.createServer((agent) => {
    const api = net.connect(Number(target.port), target.hostname);
    sockets.add(agent).add(api);
    let held: Buffer[] | null = o.holdAnswer === undefined ? null : [];
    let sinceAnswer = -1;
    const release = () => {
      if (held === null) return;
      for (const b of held) agent.write(b);
      held = null;
    };
    agent.on('data', (b: Buffer) => {
      p.toApi += b.length;
      api.write(b);
      if (sinceAnswer >= 0 && (sinceAnswer += b.length) >= o.holdAnswer!) release();
      if (o.trickle) {
        agent.pause();
        setTimeout(() => agent.resume(), 20);
      }
    });
    api.on('data', (b: Buffer) => {
      if (held === null) return agent.write(b);
      held.push(b);
      if (sinceAnswer < 0) sinceAnswer = 0;
    });
    api.on('end', () => {
      release();
      agent.end();
    });
    api.on('error', () => {
      p.resets++;
      held = null;
      agent.resetAndDestroy();
    });
    agent.on('error', () => api.destroy());
    agent.on('close', () => (api.destroy(), sockets.delete(agent)));
    api.on('close', () => (agent.destroy(), sockets.delete(api)));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  p.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return {
    ...p,
    get toApi() {
      return p.toApi;
    },
    get resets() {
      return p.resets;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

/** The container's agent client, through `via` (a proxy). */
function through(c: { cid: string; lock: string; client: AgentClient }, via: string) {
  const client = new AgentClient(via, c.client.nodeId);
  client.token = c.client.token;
  return { ...c, client };
}

/** Rejects after `ms`: a deadline far beyond what the awaited thing needs, far below its own timeout. */
const deadline = (ms: number, what: string) =>
  new Promise<never>((_, reject) => {
    setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms).unref();
  });

describe("the agent's checkpoint packed into its upload (tar's output is the body)", () => {
  it('a directory goes up as tar packs it, and the next attempt unpacks the same files', async () => {
    const c = await running();
    const from = temp();
    const state = Buffer.concat([randomBytes(8 * MIB), Buffer.alloc(8 * MIB)]);
    writeFileSync(join(from, 'state'), state);
    writeFileSync(join(from, 'machine.json'), '{"ram":224}');
    const a = agentSide(c, LIMIT);
    const k = await a.store.keep(a.owner, from, true);
    expect(k).toEqual({
      kept: true,
      line: expect.stringMatching(/^checkpoint kept: 2 file\(s\), 16777227 bytes \(a \d+-byte archive/),
    });
    const bytes = Number(/a (\d+)-byte archive/.exec(k!.line)![1]);
    expect((await t.store.checkpoints.infoOf([c.rid])).get(c.rid)).toMatchObject({ bytes });
    const into = join(temp(), 'next');
    expect((await a.store.restore(a.owner, into, true))?.bytes).toBe(bytes);
    expect(readFileSync(join(into, 'state')).equals(state)).toBe(true);
    expect(readFileSync(join(into, 'machine.json'), 'utf8')).toBe('{"ram":224}');
    await noTarLeft();
  });

  it('a tar that fails half-way (a file vanished) cuts its upload off: the older checkpoint stays, whole', async () => {
    const c = await running();
    const older = tarOf(MIB, 0);
    await c.client.putCheckpoint(c.cid, c.lock, Readable.from([older]), false);
    const from = temp();
    // tar blocks in the middle of "a" (the upload reads it no faster than it goes out) when "b" vanishes.
    writeFileSync(join(from, 'a'), randomBytes(16 * MIB));
    writeFileSync(join(from, 'b'), 'gone before tar reaches it');
    let sent = 0;
    const a = agentSide(c, LIMIT, async (tar, real) => {
      unlinkSync(join(from, 'b'));
      tar.on('data', (b: Buffer) => (sent += b.length));
      return real();
    });
    await expect(a.store.keep(a.owner, from, true)).rejects.toThrow(/tar -c failed \(2\): .*b: Cannot stat/);
    expect(sent).toBeGreaterThan(MIB); // it did fail half-way, with bytes sent
    await idle();
    expect((await t.store.checkpoints.infoOf([c.rid])).get(c.rid)).toMatchObject({ bytes: older.length });
    expect(await storedBytes(c.rid)).toBe(older.length);
    expect((await download(c))!.equals(older)).toBe(true);
    await noTarLeft();
  });

  it('an upload that fails on the way is retried with a new tar, and the archive kept is whole', async () => {
    const c = await running();
    const from = temp();
    const state = randomBytes(12 * MIB);
    writeFileSync(join(from, 'state'), state);
    let calls = 0;
    const a = agentSide(c, LIMIT, async (tar, real) => {
      if (++calls > 1) return real();
      // The first attempt's connection breaks after a MiB: its stream is dropped (its tar must end).
      let got = 0;
      for await (const b of tar) if ((got += (b as Buffer).length) >= MIB) break;
      throw new ApiUnreachableError('cut off');
    });
    expect((await a.store.keep(a.owner, from, false))?.kept).toBe(true);
    expect(calls).toBe(2);
    const into = join(temp(), 'next');
    await a.store.restore(a.owner, into, true);
    expect(readFileSync(join(into, 'state')).equals(state)).toBe(true);
    await noTarLeft();
  });

  it('a stale lock token is refused before any byte is stored: a 409, tar stopped, nothing kept', async () => {
    const c = await running();
    const from = temp();
    // Sparse, 64 GiB: sent on after the refusal, it would keep tar reading for minutes.
    writeFileSync(join(from, 'state'), '');
    truncateSync(join(from, 'state'), 64 * 1024 * MIB);
    const a = agentSide({ ...c, lock: `${c.lock}0` }, 128 * 1024 * MIB);
    await expect(a.store.keep(a.owner, from, true)).rejects.toMatchObject({ status: 409 });
    await idle();
    expect((await t.store.checkpoints.infoOf([c.rid])).size).toBe(0);
    await noTarLeft();
  });

  it("the API's limit refuses the agent's stream once it passes it: a 413, nothing kept, tar stopped", async () => {
    const c = await running();
    const from = temp();
    // Sparse: tar reads zeros without a disk behind them.
    writeFileSync(join(from, 'state'), '');
    truncateSync(join(from, 'state'), LIMIT + 8 * MIB);
    const a = agentSide(c, 4 * LIMIT);
    await expect(a.store.keep(a.owner, from, true)).rejects.toMatchObject({
      status: 413,
      message: expect.stringMatching(/checkpoint is at most 134217728 bytes \(checkpoint_limit\)/),
    });
    await idle();
    expect((await t.store.checkpoints.infoOf([c.rid])).size).toBe(0);
    expect(await storedBytes(c.rid)).toBe(0);
    await noTarLeft();
  });

  it('the agent stopping cuts an upload in flight off at once (a slow network): tar ended, the older checkpoint stays', async () => {
    const c = await running();
    const older = tarOf(MIB, 0);
    await c.client.putCheckpoint(c.cid, c.lock, Readable.from([older]), false);
    const from = temp();
    // Sparse, 64 GiB: at the proxy's pace its upload would run past the client's 120 s call timeout.
    writeFileSync(join(from, 'state'), '');
    truncateSync(join(from, 'state'), 64 * 1024 * MIB);
    const slow = await proxy({ trickle: true });
    try {
      const stop = new AbortController();
      const a = agentSide(through(c, slow.url), 128 * 1024 * MIB, undefined, stop.signal);
      const keeping = a.store.keep(a.owner, from, true);
      keeping.catch(() => {});
      await until(() => slow.toApi > MIB, 30_000, 'the upload under way');
      stop.abort();
      await expect(Promise.race([keeping, deadline(20_000, 'the upload cut off')])).rejects.toBeInstanceOf(
        AbortedError,
      );
      await until(() => slow.open() === 0, 30_000, 'the upload connection closed');
      await idle();
      expect((await t.store.checkpoints.infoOf([c.rid])).get(c.rid)).toMatchObject({ bytes: older.length });
      expect((await download(c))!.equals(older)).toBe(true);
      // (Last: the download's connection is idle by the time the file's server closes.)
      await noTarLeft();
    } finally {
      await slow.close();
    }
  });

  it('an early refusal reaches the agent even when its answer comes back after more of the upload went out (no reset, no retry)', async () => {
    const c = await running();
    const from = temp();
    // Sparse: the agent would send on for minutes; the refusals come before (409) or once past the limit (413).
    writeFileSync(join(from, 'state'), '');
    truncateSync(join(from, 'state'), 64 * 1024 * MIB);
    const late = await proxy({ holdAnswer: 16 * MIB });
    try {
      for (const [lock, status] of [
        [`${c.lock}0`, 409],
        [c.lock, 413],
      ] as const) {
        let calls = 0;
        const a = agentSide({ ...through(c, late.url), lock }, 128 * 1024 * MIB, async (_tar, real) => {
          if (++calls > 1) throw new Error('the upload was tried again: the refusal was not read');
          return real();
        });
        await expect(a.store.keep(a.owner, from, true)).rejects.toMatchObject({ status });
        expect(calls).toBe(1);
        expect(late.resets).toBe(0);
        await noTarLeft();
      }
      await idle();
      expect((await t.store.checkpoints.infoOf([c.rid])).size).toBe(0);
    } finally {
      await late.close();
    }
  });
});
