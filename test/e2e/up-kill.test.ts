// `berth up` killed with SIGKILL in the middle of the demo and started again finishes the demo with every
// container run exactly once (the agents, detached like VMs, keep running; the new dispatcher adopts their
// instances). And, with `berth up` running, a container past its memory limit is OOM-killed and reported so.
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/store/embedded.js';
import {
  assertBuilt,
  testHome,
  berth,
  berthDaemon,
  killProcessesMentioning,
  processesMentioning,
  until,
} from '../helpers/cli.js';
import { itIf } from '../helpers/needs.js';

let home: string;
let env: NodeJS.ProcessEnv;
let listen: string;
const daemons: ReturnType<typeof berthDaemon>[] = [];

beforeAll(async () => {
  assertBuilt();
  ({ home, env } = testHome('berth-upkill-'));
  // The agents keep the API URL from their boot data: a restarted `berth up` must listen where they look.
  listen = `127.0.0.1:${await freePort()}`;
});

afterAll(async () => {
  for (const d of daemons) await d.stop('SIGKILL');
  killProcessesMentioning(home);
  rmSync(home, { recursive: true, force: true });
});

const python = spawnSync('python3', ['-c', 'print(1)']).status === 0 ? null : 'python3 is not installed';

describe('berth up across a SIGKILL', () => {
  it('finishes the demo with every container run exactly once', { timeout: 300_000 }, async () => {
    const first = berthDaemon(['up', '--demo', '--listen', listen], env);
    daemons.push(first);
    await until(() => /running [1-9]/.test(first.output()), 120_000, 'demo containers to run');
    first.child.kill('SIGKILL');
    await first.exited;
    expect(processesMentioning(join(home, 'instances')).length).toBeGreaterThan(0); // the instances survive

    const second = berthDaemon(['up', '--demo', '--listen', listen], env);
    daemons.push(second);
    const code = await second.exited;
    const out = second.output();
    expect(code, out).toBe(0);
    expect(out).toMatch(/resuming the demo/);
    const rows = out.split('\n').filter((l) => /^r-[0-9a-z]{16}\s+demo-/.test(l));
    expect(rows).toHaveLength(12);
    // On a mismatch the message carries both runs' output: what happened to the container, and when.
    const both = `--- first berth up ---\n${first.output()}\n--- second berth up ---\n${out}`;
    for (const row of rows) {
      const [, name, outcome, exit, attempts, retries] = row.split(/\s+/);
      if (name === 'demo-fails-once')
        expect([outcome, exit, attempts, retries], `${row}\n${both}`).toEqual(['failed', '3', '2', '0']);
      else expect([outcome, exit, attempts, retries], `${row}\n${both}`).toEqual(['success', '0', '1', '0']);
    }
    expect(processesMentioning(join(home, 'instances'))).toEqual([]);
  });

  itIf(python)(
    'a container past its memory limit is OOM-killed: berth submit --wait exits non-zero, berth show says so',
    { timeout: 180_000 },
    async () => {
      const up = berthDaemon(['up', '--listen', listen], env);
      daemons.push(up);
      await until(() => /Berth is up/.test(up.output()), 120_000, 'berth up');
      const cliEnv = { ...env, BERTH_API_URL: `http://${listen}` };
      const r = berth(
        [
          'submit',
          '--wait',
          '--ram',
          '64MiB',
          '--max-attempts',
          '1',
          '--',
          'python3',
          '-c',
          'bytearray(512*1024*1024)',
        ],
        cliEnv,
      );
      expect(r.code, r.stderr).not.toBe(0);
      expect(r.stderr).toMatch(/OOM-killed/);
      const id = r.stdout.trim().split('\n')[0]!;
      const shown = JSON.parse(berth(['show', id, '--json'], cliEnv).stdout);
      expect(shown.containers[0]).toMatchObject({ state: 'Complete', oom_killed: true, exit_code: 137 });
      expect(shown.containers[0].usage.peak_ram).toBeGreaterThan(32 * 1024 ** 2);
      const text = berth(['show', id], cliEnv).stdout;
      expect(text).toMatch(/exit code 137 \(OOM-killed: the container reached its memory limit\)/);
      expect(text).toMatch(/usage: peak memory [\d.]+MiB of 64MiB requested, CPU time [\d.]+s/);
      expect(await up.stop('SIGINT')).toBe(0);
    },
  );
});
