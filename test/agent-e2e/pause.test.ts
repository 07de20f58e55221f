// berth pause / resume end to end: a real API server, a real agent with the process runtime, a counter that
// must not advance while its container is paused and must go on (not restart) after the resume; the same
// through a hold of its instance with --freeze (berth instance hold ID --freeze, then run).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alice, Harness, until } from './harness.js';

let h: Harness;
let node: Awaited<ReturnType<Harness['node']>>;

beforeAll(async () => {
  h = await Harness.create();
  node = await h.node();
  h.startAgent(node);
});
afterAll(async () => h?.cleanup());

const COUNTER = ['sh', '-c', 'i=0; while :; do i=$((i+1)); echo $i; sleep 0.05; done'];

/**
 * The last number a counter container printed: the runtime keeps its stdout in the node's work dir as it
 * comes (no shipping delay).
 */
const lastCount = (workDir: string, cid: string) => async (): Promise<number> => {
  const out = join(workDir, 'containers', cid, 'run', 'stdout');
  const lines = (await readFile(out, 'utf8').catch(() => '')).split('\n').filter((l) => /^\d+$/.test(l));
  return lines.length ? Number(lines[lines.length - 1]) : 0;
};

/** Cancels the counter and its witness, waits until both ended, and gives the counter's pause events in order. */
async function endWithPauseEvents(id: string, witness: string): Promise<(string | null)[]> {
  for (const cid of [id, witness])
    await h.store.containers.cancel(cid, { kind: 'user', owner: null }, 'user', 'test done');
  await h.waitState(id, ['Cancelled']);
  await h.waitState(witness, ['Cancelled']);
  return (await h.store.containerList.events(id)).filter((e) => e.kind === 'pause').map((e) => e.message);
}

describe('pause and resume (agent in-process, process runtime)', () => {
  it('a paused counter does not advance; after the resume it goes on where it stopped', async () => {
    const id = await h.submitAndAssign(node, { command: COUNTER });
    // A second counter, never paused, on the same node: the clock the paused one is watched by.
    const witness = await h.submitAndAssign(node, { command: COUNTER });
    const counted = (cid: string) => lastCount(node.workDir, cid);
    const last = counted(id);
    const stdout = join(node.workDir, 'containers', id, 'run', 'stdout');
    await until(async () => (await last()) >= 3, 30_000, 'the counter to count');

    await h.store.pauses.request(id, true, alice);
    await until(
      async () => (await h.store.containers.get(id)).paused,
      30_000,
      'the agent to report it frozen',
    );
    const frozenAt = await last();
    // Watch while the witness counts 20 more (a second of its time, however slow the machine): the
    // paused counter must not count once meanwhile.
    const w0 = await counted(witness)();
    await until(async () => (await counted(witness)()) >= w0 + 20, 60_000, 'the witness to count on');
    expect(await last()).toBe(frozenAt);
    const c = await h.store.containers.get(id);
    expect(c).toMatchObject({ state: 'Running', paused: true, pause_wanted: true });

    await h.store.pauses.request(id, false, alice);
    await until(async () => (await last()) > frozenAt, 30_000, 'the resumed counter to go on');
    await until(
      async () => !(await h.store.containers.get(id)).paused,
      30_000,
      'the agent to report it running',
    );
    // It went on, not over: every number once, in order, from 1.
    const all = (await readFile(stdout, 'utf8'))
      .split('\n')
      .filter((l) => /^\d+$/.test(l))
      .map(Number);
    expect(all).toEqual(all.map((_, i) => i + 1));

    const kinds = await endWithPauseEvents(id, witness);
    expect(kinds).toEqual([
      'pause requested by alice',
      'paused: frozen by its agent',
      'resume requested by alice',
      'resumed: running again',
    ]);
  });

  it('an agent restarted while its container is paused still knows it, and the resume thaws it', async () => {
    const other = await h.node();
    const first = h.spawnAgent(other);
    const id = await h.submitAndAssign(other, { command: COUNTER });
    const last = lastCount(other.workDir, id);
    await until(async () => (await last()) >= 3, 30_000, 'the counter to count');
    await h.store.pauses.request(id, true, alice);
    await until(
      async () => (await h.store.containers.get(id)).paused,
      30_000,
      'the agent to report it frozen',
    );
    first.child.kill('SIGKILL');
    await first.exited;
    // Resumed while no agent runs: the new agent learns it from its pings, and must know the container is
    // frozen (its journal) to report it so and to thaw it.
    await h.store.pauses.request(id, false, alice);
    const frozenAt = await last();
    h.spawnAgent(other);
    await until(async () => (await last()) > frozenAt, 30_000, 'the resumed counter to go on');
    await until(
      async () => !(await h.store.containers.get(id)).paused,
      30_000,
      'the agent to report it running',
    );
    await h.store.containers.cancel(id, { kind: 'user', owner: null }, 'user', 'test done');
    await h.waitState(id, ['Cancelled']);
  });

  it('holding its instance with --freeze freezes what runs there; run lets it go on where it stopped', async () => {
    const held = await h.node();
    h.startAgent(held);
    const now = new Date();
    await h.store.ctx.pool.query(
      `INSERT INTO instances (id, cluster, dispatcher_tag, type, provider_type, price, state, idle_behavior,
         node_id, created_at, state_since, updated_at)
       VALUES ($1, 'c1', 't1', 'small', 'small', 0.1, 'running', 'run', $2, $3, $3, $3)`,
      [held.instanceId, held.id, now],
    );
    const id = await h.submitAndAssign(held, { command: COUNTER });
    const witness = await h.submitAndAssign(node, { command: COUNTER });
    const last = lastCount(held.workDir, id);
    await until(async () => (await last()) >= 3, 30_000, 'the counter to count');

    const asked = await h.store.instances.request(
      held.instanceId,
      { idleBehavior: 'hold', freeze: true },
      'root',
    );
    expect(asked.frozen).toEqual([id]);
    await until(
      async () => (await h.store.containers.get(id)).paused,
      30_000,
      'the agent to report it frozen',
    );
    const frozenAt = await last();
    const w0 = await lastCount(node.workDir, witness)();
    await until(
      async () => (await lastCount(node.workDir, witness)()) >= w0 + 20,
      60_000,
      'the witness to count on',
    );
    expect(await last()).toBe(frozenAt);

    expect(
      (await h.store.instances.request(held.instanceId, { idleBehavior: 'run' }, 'root')).resumed,
    ).toEqual([id]);
    await until(async () => (await last()) > frozenAt, 30_000, 'the resumed counter to go on');
    await until(
      async () => !(await h.store.containers.get(id)).paused,
      30_000,
      'the agent to report it running',
    );
    const kinds = await endWithPauseEvents(id, witness);
    expect(kinds).toEqual([
      `pause requested by root: instance ${held.instanceId} held with --freeze`,
      'paused: frozen by its agent',
      `resume requested by root: instance ${held.instanceId} set to run`,
      'resumed: running again',
    ]);
  });
});
