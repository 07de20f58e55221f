// The agent's batched endpoint (POST /v1/nodes/:id/reports) and the group commit behind every agent
// report (src/store/reports.ts): many containers in one call, answered per report.
import { describe, expect, it, vi } from 'vitest';
import { AgentClient, ApiHttpError } from '../../src/agent/client.js';
import { buildApi } from '../../src/api/server.js';
import { testApi } from '../helpers/api.js';

const t = await testApi();

/** A container submitted by alice, locked and assigned to node n; its per-lock token. */
async function assigned(n: { id: string; instanceId: string }): Promise<{ id: string; token: string }> {
  const { cid } = await t.submit({ command: ['true'] });
  return { id: cid, token: await t.place(cid, n) };
}

const reports = (n: { id: string; token: string }, body: object) =>
  t.call(n.token, { method: 'POST', url: `/v1/nodes/${n.id}/reports`, payload: body });

describe('batched agent reports', () => {
  it('starts, logs, exits and cancels of several containers in one call; a refused one fails alone', async () => {
    const n = await t.node();
    const other = await t.node();
    const [a, b, c] = [await assigned(n), await assigned(n), await assigned(other)];
    const chunks = [
      { seq: 0, stream: 'stdout', data: 'one\n' },
      { seq: 1, stream: 'stderr', data: 'two\n' },
    ];
    const res = await reports(n, {
      reports: [
        { kind: 'start', id: a.id, lock_token: a.token },
        { kind: 'start', id: b.id, lock_token: b.token },
        { kind: 'logs', id: a.id, lock_token: a.token, chunks },
        { kind: 'exit', id: a.id, lock_token: a.token, exit_code: 0, usage: null },
        { kind: 'cancel', id: b.id, lock_token: b.token, class: 'perm', reason: 'image not found' },
        { kind: 'start', id: c.id, lock_token: c.token }, // another node's container
        { kind: 'logs', id: a.id, lock_token: b.token, chunks }, // the wrong token
      ],
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().results).toEqual([
      { id: a.id, ok: true },
      { id: b.id, ok: true },
      { id: a.id, ok: true, appended: 2 },
      { id: a.id, ok: true },
      { id: b.id, ok: true },
      { id: c.id, ok: false, error: { status: 403, code: 'forbidden', message: expect.any(String) } },
      { id: a.id, ok: false, error: { status: 409, code: 'conflict', message: expect.any(String) } },
    ]);
    expect((await t.store.containers.get(a.id)).state).toBe('Complete');
    const cb = await t.store.containers.get(b.id);
    expect([cb.state, cb.failure_class]).toEqual(['Cancelled', 'perm']);
    expect((await t.store.containers.get(c.id)).state).toBe('Locked');
    expect((await t.store.logs.read(a.id)).map((x) => x.data)).toEqual(['one\n', 'two\n']);
    const events = (await t.store.containerList.events(a.id)).map((e) => e.message);
    expect(events).toEqual(expect.arrayContaining([expect.stringMatching(/^Running on node/)]));
  });

  it('a node token reports only for its own node; bad input is a 400 naming the field, changing nothing', async () => {
    const n = await t.node();
    const other = await t.node();
    const a = await assigned(n);
    const start = { kind: 'start', id: a.id, lock_token: a.token };
    const forbidden = await t.call(other.token, {
      method: 'POST',
      url: `/v1/nodes/${n.id}/reports`,
      payload: { reports: [start] },
    });
    expect(forbidden.statusCode).toBe(403);
    const bad = await reports(n, { reports: [start, { kind: 'exit', id: a.id, lock_token: a.token }] });
    expect(bad.statusCode).toBe(400);
    expect(JSON.stringify(bad.json())).toMatch(/exit_code/);
    expect((await reports(n, { reports: [] })).statusCode).toBe(400);
    expect((await t.store.containers.get(a.id)).state).toBe('Locked');
  });

  it('a cancel for a spot interruption: the retry counts it', async () => {
    const n = await t.node();
    const a = await assigned(n);
    const res = await reports(n, {
      reports: [
        { kind: 'start', id: a.id, lock_token: a.token },
        { kind: 'cancel', id: a.id, lock_token: a.token, class: 'temp', reason: 'spot', interrupted: true },
      ],
    });
    expect(res.json().results).toEqual([
      { id: a.id, ok: true },
      { id: a.id, ok: true },
    ]);
    const retry = await t.store.ctx.pool.query(
      `SELECT spot_interruptions FROM containers WHERE request_id = (SELECT request_id FROM containers WHERE id = $1) AND id <> $1`,
      [a.id],
    );
    expect(retry.rows).toEqual([{ spot_interruptions: 1 }]);
  });

  it('reports of several agents sent together share commits (group commit), each answered', async () => {
    const nodes = await Promise.all(Array.from({ length: 8 }, () => t.node()));
    const work = await Promise.all(nodes.map(async (n) => ({ n, c: await assigned(n) })));
    const before = { ...t.store.reports.stats };
    const res = await Promise.all(
      work.map(({ n, c }) =>
        t.store.reports.send([
          { kind: 'start', id: c.id, node: n.id, token: c.token },
          {
            kind: 'end',
            id: c.id,
            node: n.id,
            token: c.token,
            end: { state: 'Complete', exitCode: 1, oomKilled: false, usage: null },
          },
        ]),
      ),
    );
    expect(res.flat().every((o) => o.ok)).toBe(true);
    const commits = t.store.reports.stats.calls - before.calls;
    expect(t.store.reports.stats.items - before.items).toBe(16);
    expect(commits).toBeLessThan(8); // fewer commits than agents
    for (const { c } of work) expect((await t.store.containers.get(c.id)).state).toBe('Complete');
  });
});

describe('the agent client', () => {
  it('sends the reports of its containers together through the batched endpoint; a refusal is thrown as before', async () => {
    const app = await buildApi({ store: t.store });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const n = await t.node();
      const client = new AgentClient(url, n.id);
      client.token = n.token;
      // The client's one door to the wire: which paths it called.
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const call = vi.spyOn(client as any, 'call');
      const paths = () => call.mock.calls.map((c) => c[1] as string);
      const work = await Promise.all([assigned(n), assigned(n), assigned(n)]);
      await Promise.all(work.map((c) => client.start(c.id, c.token)));
      await Promise.all(
        work.map(async (c, i) => {
          await client.logs(c.id, c.token, [{ seq: 0, stream: 'stdout', data: `out ${i}\n` }]);
          await client.complete(c.id, c.token, { exit_code: 0, usage: null });
        }),
      );
      for (const c of work) expect((await t.store.containers.get(c.id)).state).toBe('Complete');
      expect(paths().every((p) => p === `/v1/nodes/${n.id}/reports`)).toBe(true);
      expect(paths().length).toBeLessThan(9); // 9 reports
      const err = await client.start(work[0]!.id, work[0]!.token).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApiHttpError);
      expect(err).toMatchObject({ status: 409, code: 'conflict' });
    } finally {
      await app.close();
    }
  });
});
