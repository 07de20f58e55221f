// `berth instance hold ID --freeze` and `berth instance run|drain ID` (issue 16 item 4), in-process against
// a real API server: the hold freezes the instance's Running containers through berth pause's flags and
// says which; run resumes what the hold froze (not a container its user paused); --json prints the
// instance with the containers asked; refusals are one line naming the field, with a non-zero exit.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { cliWorld } from '../helpers/cli-inproc.js';

let w: Awaited<ReturnType<typeof cliWorld>>;

beforeAll(async () => {
  w = await cliWorld();
  const now = w.t.clock.now();
  await w.t.store.ctx.pool.query(
    `INSERT INTO instances (id, cluster, dispatcher_tag, type, provider_type, price, state, idle_behavior,
       node_id, created_at, state_since, updated_at)
     VALUES ($1, 'c1', 't1', 'small', 'small', 0.1, 'running', 'run', $2, $3, $3, $3)`,
    [w.node.instanceId, w.node.id, now],
  );
});
afterAll(() => w?.close());
afterEach(() => vi.restoreAllMocks());

async function runningContainer(): Promise<string> {
  const r = await w.berth(['submit', '--', 'sleep', '600']);
  expect(r.stderr, r.stderr).toBe('');
  const cid = await w.current(r.stdout.trim());
  await w.startAttempt(cid);
  return cid;
}

const admin = (args: string[]) => w.berth(args, w.t.tokens.admin);

describe('berth instance hold --freeze', () => {
  it('freezes what runs, says which; run resumes only what the hold froze; --json prints the instance', async () => {
    const i = w.node.instanceId;
    const [a, b] = [await runningContainer(), await runningContainer()];
    expect(await w.berth(['pause', b])).toMatchObject({ code: 0 }); // alice's own pause

    const held = await admin(['instance', 'hold', i, '--freeze']);
    expect(held).toMatchObject({ code: 0, stderr: '' });
    expect(held.stdout).toBe(
      `${i}: hold --freeze requested (applied at the dispatcher's next pass); freezing ${a}\n`,
    );
    expect(await w.t.store.containers.get(a)).toMatchObject({ pause_wanted: true, paused_by_hold: true });
    const shown = await w.berth(['show', a]);
    expect(shown.stdout).toContain('Running (pausing)');

    const again = await admin(['instance', 'hold', i, '--freeze', '--json']);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({
      id: i,
      requested_idle_behavior: 'hold',
      frozen: [],
      resumed: [],
    });

    const run = await admin(['instance', 'run', i, '--json']);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ id: i, requested_idle_behavior: 'run', resumed: [a] });
    expect(await w.t.store.containers.get(a)).toMatchObject({ pause_wanted: false, paused_by_hold: false });
    expect(await w.t.store.containers.get(b)).toMatchObject({ pause_wanted: true, paused_by_hold: false });
    const plain = await admin(['instance', 'run', i]);
    expect(plain).toMatchObject({
      code: 0,
      stdout: `${i}: run requested (applied at the dispatcher's next pass)\n`,
    });
  });

  it('refuses users, --freeze on another action, and an unknown instance, in one line', async () => {
    const i = w.node.instanceId;
    const user = await w.berth(['instance', 'hold', i, '--freeze']);
    expect(user.code).not.toBe(0);
    expect(user.stderr).toMatch(/^berth: .*admin.*\n$/);
    const drain = await admin(['instance', 'drain', i, '--freeze']);
    expect(drain.code).not.toBe(0);
    // Only hold has --freeze: commander's one line, as for any unknown option.
    expect(drain.stderr).toMatch(/^error: unknown option '--freeze'\n/);
    const gone = await admin(['instance', 'hold', 'i-nope', '--freeze']);
    expect(gone.code).not.toBe(0);
    expect(gone.stderr).toBe('berth: instance i-nope not found\n');
  });
});
