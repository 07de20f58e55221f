// `berth pause ID` / `berth resume ID` (issue 16 item 4) run in-process against a real API server: a
// request id means its current container, --json prints the container, and refusals (not Running, someone
// else's container) are one line with a non-zero exit. The agent's side is test/agent-e2e/pause.test.ts.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { cliWorld } from '../helpers/cli-inproc.js';

let w: Awaited<ReturnType<typeof cliWorld>>;

beforeAll(async () => {
  w = await cliWorld();
});
afterAll(() => w?.close());
afterEach(() => vi.restoreAllMocks());

async function submit(): Promise<string> {
  const r = await w.berth(['submit', '--', 'sleep', '600']);
  expect(r.stderr, r.stderr).toBe('');
  return r.stdout.trim();
}

describe('berth pause / resume', () => {
  it('pauses the current container of a request, prints it as pausing, and resumes it; --json prints the container', async () => {
    const rid = await submit();
    const cid = await w.current(rid);
    await w.startAttempt(cid);

    const paused = await w.berth(['pause', rid]);
    expect(paused).toMatchObject({ code: 0, stderr: '' });
    expect(paused.stdout).toBe(`${cid}: Running (pausing)\n`);
    expect(await w.t.store.containers.get(cid)).toMatchObject({ pause_wanted: true, paused: false });

    const again = await w.berth(['pause', cid, '--json']);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ id: cid, state: 'Running', pause_wanted: true });

    const resumed = await w.berth(['resume', cid]);
    expect(resumed).toMatchObject({ code: 0, stdout: `${cid}: Running (running)\n` });
    expect(await w.t.store.containers.get(cid)).toMatchObject({ pause_wanted: false });
  });

  it('refuses a container that is not Running, and one of another user, in one line, changing nothing', async () => {
    const rid = await submit();
    const cid = await w.current(rid);
    const queued = await w.berth(['pause', cid]);
    expect(queued.code).not.toBe(0);
    expect(queued.stderr).toBe(`berth: container ${cid} is Queued: only a Running container can be paused\n`);

    await w.startAttempt(cid);
    const bob = await w.berth(['pause', cid], w.t.tokens.bob);
    expect(bob.code).not.toBe(0);
    // Someone else's container looks absent, as everywhere in the API.
    expect(bob.stderr).toBe(`berth: container ${cid} not found\n`);
    expect(await w.t.store.containers.get(cid)).toMatchObject({ pause_wanted: false });
  });
});
