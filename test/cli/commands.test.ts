// The user commands (issue 10 items 5-9, 11, 13, 15) run in-process against a real API server:
// following every attempt, why from the data, output safe for a terminal, cancel and priority, and the
// submit flags SLURM and AWS Batch users expect.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RequestRecord } from '../../src/store/records.js';
import { cliWorld } from '../helpers/cli-inproc.js';
import { until } from '../helpers/cli.js';

let w: Awaited<ReturnType<typeof cliWorld>>;

beforeAll(async () => {
  w = await cliWorld();
});
afterAll(() => w?.close());
afterEach(() => vi.restoreAllMocks());

/** Submits through the CLI and returns the request id it printed. */
async function submit(...args: string[]): Promise<string> {
  const r = await w.berth(['submit', ...args]);
  expect(r.stderr, r.stderr).toBe('');
  expect(r.code).toBe(0);
  return r.stdout.trim();
}

const request = (id: string) => w.t.store.requests.get(id);

describe('following every attempt (item 7)', () => {
  it('logs -f r-… prints the output of every attempt in order, also when all ended before it started', async () => {
    const id = await submit('--max-attempts', '3', '--', 'sh', '-c', 'exit 1');
    for (const n of [1, 2, 3]) await w.runAttempt(await w.current(id), `attempt ${n}\n`, 1);
    expect((await request(id)).state).toBe('Final');
    const r = await w.berth(['logs', '-f', id]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('attempt 1\nattempt 2\nattempt 3\n');
    expect(r.stderr).toMatch(/attempt 2 \(c-.*\)\n.*attempt 3 \(c-/s);
    // without -f: the same, every attempt so far
    expect((await w.berth(['logs', id])).stdout).toBe('attempt 1\nattempt 2\nattempt 3\n');
  });

  it('logs -f r-… keeps following across retries until the request is Final', async () => {
    const id = await submit('--max-attempts', '3', '--', 'sh', '-c', 'exit 1');
    await w.runAttempt(await w.current(id), 'one\n', 1);
    const live = { code: -1, stdout: '', stderr: '' };
    const following = w.berth(['logs', '-f', id], undefined, live);
    await until(() => live.stdout.includes('one\n'), 10_000, 'the first attempt printed');
    await w.runAttempt(await w.current(id), 'two\n', 1);
    await w.runAttempt(await w.current(id), 'three\n', 0);
    const r = await following;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('one\ntwo\nthree\n');
  });

  it('submit --wait prints attempts 1, 2 and 3 when they end faster than it follows, and exits with the last code', async () => {
    const live = { code: -1, stdout: '', stderr: '' };
    const waiting = w.berth(
      ['submit', '--wait', '--max-attempts', '3', '--', 'sh', '-c', 'exit 4'],
      undefined,
      live,
    );
    const id = await until(() => /r-[0-9a-z]{16}/.exec(live.stdout)?.[0], 10_000, 'the id');
    for (const n of [1, 2, 3]) await w.runAttempt(await w.current(id), `try ${n}\n`, 4);
    const r = await waiting;
    expect(r.code).toBe(4);
    expect(r.stdout).toBe(`${id}\ntry 1\ntry 2\ntry 3\n`);
    expect(r.stderr).toMatch(`berth: ${id}: failed: exit code 4 (after 3 of 3 attempts)`);
  });
});

describe('why (item 9)', () => {
  it('says "not scheduled: priority is 0" for a withdrawn request, from the data', async () => {
    const id = await submit('--priority', '0', '--', 'true');
    const r = await w.berth(['why', id]);
    expect(r.stdout).toMatch(/: Queued: not scheduled: priority is 0 \(raise it with `berth priority r-/);
  });

  it('says until when a run-after request waits', async () => {
    const id = await submit('--run-after', '+2h', '--', 'true');
    const r = await w.berth(['why', id]);
    expect(r.stdout).toMatch(
      /: Queued: waits until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(in (1h59m|2h)\) \(run-after\)/,
    );
  });
});

describe('terminal escapes in user text (item 11)', () => {
  const NAME = 'evil\u001b]0;pwned\u0007\u001b[2J\u202etxt.exe';
  it('ps, show and why print them escaped; --json keeps them exact', async () => {
    const id = await submit('--name', NAME, '--env', 'X=\u001b[31mred', '--', 'echo', '\u001b[2J');
    for (const args of [['ps'], ['show', id], ['why', id]]) {
      const r = await w.berth(args);
      for (const raw of ['\u001b', '\u0007', '\u202e'])
        expect(r.stdout.includes(raw), args.join(' ')).toBe(false);
    }
    expect((await w.berth(['ps'])).stdout).toContain('evil\\u001b]0;pwned\\u0007\\u001b[2J\\u202etxt.exe');
    const json = JSON.parse((await w.berth(['ps', '--json'])).stdout) as { items: RequestRecord[] };
    expect(json.items.find((r) => r.id === id)!.name).toBe(NAME);
    expect(JSON.parse((await w.berth(['show', id, '--json'])).stdout).env.X).toBe('\u001b[31mred');
  });

  it('an error quoting user text is escaped too', async () => {
    const r = await w.berth(['show', 'x\u001b[2J']);
    expect(r.code).toBe(2);
    expect(r.stderr).not.toContain('\u001b');
    expect(r.stderr).toContain('\\u001b[2J');
  });
});

describe('clear messages (item 15)', () => {
  it('--cpus 0 is one line naming the flag', async () => {
    const r = await w.berth(['submit', '--cpus', '0', '--', 'true']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'berth: --cpus: expected CPUs from 0.01 to 100000 such as 1 or 0.5 (a number or a string), got 0\n',
    );
  });

  it('cancelling a finished container or request says it has finished, and exits 0', async () => {
    const id = await submit('--', 'true');
    const cid = await w.current(id);
    await w.runAttempt(cid, 'done\n', 0);
    const c = await w.berth(['cancel', cid]);
    expect(c).toMatchObject({ code: 0, stdout: `${cid}: already finished (Complete)\n`, stderr: '' });
    const r = await w.berth(['cancel', id]);
    expect(r).toMatchObject({ code: 0, stdout: `${id}: already finished (success)\n` });
    const missing = await w.berth(['cancel', `c-${'0'.repeat(16)}`]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/not found/);
  });
});

describe('cancel by name or owner', () => {
  it('--name GLOB cancels only the matching active requests, after --yes; without it, nothing (exit 2)', async () => {
    const a = await submit('--name', 'sweep-1', '--', 'true');
    const b = await submit('--name', 'sweep-2', '--', 'true');
    const keep = await submit('--name', 'other', '--', 'true');
    const refused = await w.berth(['cancel', '--name', 'sweep-*']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/2 active requests match --name sweep-\*; not cancelled \(add --yes/);
    expect((await request(a)).state).toBe('Committed');
    const r = await w.berth(['cancel', '--name', 'sweep-*', '--yes', '--json']);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.matched.sort()).toEqual([a, b].sort());
    expect(out.outcomes.map((o: { result: string }) => o.result)).toEqual(['cancelled', 'cancelled']);
    expect((await request(a)).outcome).toBe('cancelled');
    expect((await request(keep)).state).toBe('Committed');
    const none = await w.berth(['cancel', '--name', 'sweep-*', '--yes']);
    expect(none).toMatchObject({ code: 0, stderr: 'berth: no active request matches --name sweep-*\n' });
  });

  it("--owner is for admins: an admin cancels bob's requests; alice may not", async () => {
    const [bobs] = await w.t.store.requests.create('bob', [
      (await import('../../src/model/request.js')).normalizeRequest({ command: ['true'] }),
    ]);
    const denied = await w.berth(['cancel', '--owner', 'bob', '--yes']);
    expect(denied.code).toBe(2);
    expect(denied.stderr).toMatch(/may only list its own requests/);
    const r = await w.berth(['cancel', '--owner', 'bob', '--yes'], w.t.tokens.admin);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`${bobs!.id}: cancelled`);
    expect((await request(bobs!.id)).outcome).toBe('cancelled');
  });
});

describe('priority (item 13)', () => {
  it('berth priority ID N changes it, 0 withdraws without cancelling, and show prints the new value', async () => {
    const id = await submit('--', 'true');
    const r = await w.berth(['priority', id, '0']);
    expect(r.stdout).toBe(`${id}: priority 500 → 0 (withdrawn: not scheduled; killed if running)\n`);
    expect(await request(id)).toMatchObject({ state: 'Committed', priority: 0 });
    expect((await w.berth(['show', id])).stdout).toMatch(/priority: 0 \(withdrawn: not scheduled\)/);
    const cid = await w.current(id);
    expect((await w.berth(['priority', cid, '700'])).stdout).toBe(`${id}: priority 0 → 700\n`);
    const bad = await w.berth(['priority', id, '2000']);
    expect(bad).toMatchObject({ code: 2 });
    expect(bad.stderr).toMatch(/priority: expected a whole number from 0 to 1000/);
  });

  it('a token with --max-priority is refused above it, with the limit in the message', async () => {
    const made = await w.berth(
      ['token', 'create', '--scope', 'user', '--owner', 'dave', '--max-priority', '50'],
      w.t.tokens.admin,
    );
    const dave = made.stdout.trim();
    const r = await w.berth(['submit', '--priority', '60', '--', 'true'], dave);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--priority: expected at most 50: the highest priority your token may set/);
    expect((await w.berth(['token', 'list'], w.t.tokens.admin)).stdout).toMatch(/dave\s+50\s/);
  });
});

describe('submit flags SLURM and AWS Batch users expect', () => {
  it('--chdir, --run-after (relative and local), --secret-env (value or from the environment), --priority 0', async () => {
    const before = Date.now();
    process.env.BERTH_TEST_TOKEN_VALUE = 'from-env-42';
    const id = await submit(
      '--chdir',
      '/srv/data',
      '--run-after',
      '+20m',
      '--secret-env',
      'A=explicit',
      '--secret-env',
      'BERTH_TEST_TOKEN_VALUE',
      '--priority',
      '0',
      '--',
      'true',
    );
    delete process.env.BERTH_TEST_TOKEN_VALUE;
    const r = await request(id);
    expect(r).toMatchObject({
      cwd: '/srv/data',
      priority: 0,
      secret_env_keys: ['A', 'BERTH_TEST_TOKEN_VALUE'],
    });
    const after = new Date(r.run_after!).getTime();
    expect(after).toBeGreaterThanOrEqual(before + 20 * 60_000 - 1000);
    expect(after).toBeLessThanOrEqual(Date.now() + 20 * 60_000 + 1000);
    const show = (await w.berth(['show', id])).stdout;
    expect(show).toMatch(/run after: \d{4}-\d\d-\d\d \d\d:\d\d UTC \(in (19m\d*s?|20m)\)/);
    expect(show).toContain('working directory: /srv/data');
    expect(show).toContain('A=(secret, not shown) BERTH_TEST_TOKEN_VALUE=(secret, not shown)');
    expect(show).not.toMatch(/explicit|from-env-42/);

    const local = await submit('--run-after', '2031-11-23 08:00', '--', 'true');
    expect(new Date((await request(local)).run_after!).getTime()).toBe(
      new Date(2031, 10, 23, 8, 0).getTime(),
    );
    const ps = (await w.berth(['ps'])).stdout;
    expect(ps.split('\n')[0]).toMatch(/RUN AFTER/);
    expect(ps).toMatch(new RegExp(`${local}.*2031-11-23`));

    const missing = await w.berth(['submit', '--secret-env', 'BERTH_SURELY_UNSET_VAR', '--', 'true']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--secret-env: BERTH_SURELY_UNSET_VAR is not set in this environment/);
    const relative = await w.berth(['submit', '--chdir', 'rel/dir', '--', 'true']);
    expect(relative.stderr).toMatch(/--chdir: expected an absolute path/);
  });

  it('ps shows an OWNER column to admins only', async () => {
    const admin = (await w.berth(['ps'], w.t.tokens.admin)).stdout.split('\n')[0]!;
    const user = (await w.berth(['ps'])).stdout.split('\n')[0]!;
    expect(admin).toMatch(/^ID\s+OWNER\s+NAME/);
    expect(user).toMatch(/^ID\s+NAME/);
  });
});

describe('checkpoints (issue 16)', () => {
  it('show says a container has a kept checkpoint (size, time, which attempt), and --json carries it', async () => {
    const id = await submit('--', 'true');
    const cid = await w.current(id);
    expect((await w.berth(['show', cid])).stdout).not.toContain('checkpoint:');
    const lock = await w.t.place(cid, w.node);
    await w.t.call(w.node.token, {
      method: 'POST',
      url: `/v1/containers/${cid}/start`,
      payload: { lock_token: lock },
    });
    // A real (empty) tar archive: two zero blocks after a header with the ustar magic.
    const tar = Buffer.alloc(2048);
    tar.write('ustar', 257, 'latin1');
    await w.t.store.checkpoints.put({ id: cid, node: w.node.id, token: lock }, [tar], false);
    expect((await w.berth(['show', cid])).stdout).toMatch(
      new RegExp(`checkpoint: 2(\\.0)? ?KiB kept \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z by ${cid}`),
    );
    const json = JSON.parse((await w.berth(['show', cid, '--json'])).stdout);
    expect(json.checkpoint).toMatchObject({ bytes: 2048, container_id: cid });
  });
});
