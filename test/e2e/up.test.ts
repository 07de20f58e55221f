// `berth up --demo` end to end: embedded PostgreSQL, server, dispatcher, local instances running real
// processes; Ctrl-C in the middle stops everything cleanly and a new start resumes; nothing is left behind.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  assertBuilt,
  testHome,
  berthDaemon,
  until,
  killProcessesMentioning,
  processesMentioning,
} from '../helpers/cli.js';

let home: string;
let env: NodeJS.ProcessEnv;
const daemons: ReturnType<typeof berthDaemon>[] = [];

beforeAll(() => {
  assertBuilt();
  ({ home, env } = testHome('berth-up-'));
  // Errors logged, so that the check for internal errors below can see one.
  env.BERTH_LOG_LEVEL = 'error';
});

afterAll(async () => {
  for (const d of daemons) await d.stop('SIGKILL');
  killProcessesMentioning(home);
  rmSync(home, { recursive: true, force: true });
});

function liveInstances(): number {
  const list = JSON.parse(readFileSync(join(home, 'instances.json'), 'utf8')) as {
    instances: { state: string }[];
  };
  return list.instances.filter((i) => i.state !== 'terminated').length;
}

describe('berth up --demo', () => {
  // One test: the second start resumes what the interrupted first one left in the same BERTH_HOME.
  it(
    'Ctrl-C in the middle stops everything cleanly; starting again resumes the demo and runs it to the end',
    { timeout: 480_000 },
    async () => {
      const first = berthDaemon(['up', '--demo', '--listen', '127.0.0.1:0'], env);
      daemons.push(first);
      await until(() => /running [1-9]/.test(first.output()), 120_000, 'demo containers to run');
      expect(await first.stop('SIGINT')).toBe(130);
      expect(first.output()).toMatch(/interrupted: stopping/);
      expect(first.output()).toMatch(/shut down \d+ local instance/);
      expect(processesMentioning(home)).toEqual([]);
      expect(liveInstances()).toBe(0);

      const again = berthDaemon(['up', '--demo', '--listen', '127.0.0.1:0'], env);
      daemons.push(again);
      const code = await again.exited;
      const out = again.output();
      expect(out, out).toMatch(/resuming the demo/);
      expect(code, out).toBe(0);
      expect(out).toMatch(/finished 12\/12/);
      expect(out).toMatch(/demo-fails-once\s+failed\s+3\s+2/);
      expect(out).toMatch(/every instance has shut down/);
      expect(out).not.toMatch(/internal error/);
      expect(processesMentioning(home)).toEqual([]);
      expect(liveInstances()).toBe(0);
    },
  );
});
