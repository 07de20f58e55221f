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
  it('Ctrl-C in the middle stops everything cleanly', { timeout: 240_000 }, async () => {
    const up = berthDaemon(['up', '--demo', '--listen', '127.0.0.1:0'], env);
    daemons.push(up);
    await until(() => /running [1-9]/.test(up.output()), 120_000, 'demo containers to run');
    expect(await up.stop('SIGINT')).toBe(130);
    expect(up.output()).toMatch(/interrupted: stopping/);
    expect(up.output()).toMatch(/shut down \d+ local instance/);
    expect(processesMentioning(home)).toEqual([]);
    expect(liveInstances()).toBe(0);
  });

  it(
    'starting again resumes the demo and runs it to completion, leaving no process or instance',
    { timeout: 240_000 },
    async () => {
      const up = berthDaemon(['up', '--demo', '--listen', '127.0.0.1:0'], env);
      daemons.push(up);
      const code = await up.exited;
      const out = up.output();
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
