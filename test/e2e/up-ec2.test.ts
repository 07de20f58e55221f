// The README's EC2 demo: `berth up --demo --cloud ec2-emulated` runs every demo container through the ec2
// driver and the emulated EC2 (moto, booted instances with their own cloud-init script, agent and IMDS),
// and leaves nothing behind: no instance running in EC2, no process, namespace or cgroup, no moto.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { CGROUP_ROOT } from '../../src/agent/runtimes/cgroup.js';
import { EMU_CGROUP_PARENT } from '../../src/cloud/ec2-emu/booter.js';
import { motoUnavailable } from '../../src/cloud/ec2-emu/moto.js';
import {
  assertBuilt,
  berthDaemon,
  killProcessesMentioning,
  processesMentioning,
  testHome,
  until,
} from '../helpers/cli.js';
import { itIf } from '../helpers/needs.js';

const it = itIf(motoUnavailable());
let home: string;
let env: NodeJS.ProcessEnv;
const daemons: ReturnType<typeof berthDaemon>[] = [];
const homes: string[] = [];

beforeAll(() => {
  assertBuilt();
  ({ home, env } = testHome('berth-up-ec2-'));
});
afterAll(async () => {
  for (const d of daemons) await d.stop('SIGKILL');
  for (const h of [home, ...homes]) {
    killProcessesMentioning(h);
    rmSync(h, { recursive: true, force: true });
  }
});

/** Nothing left: the booted machines' processes, namespaces and cgroups, moto, the servers. */
function expectNothingLeft(out: string, home: string): void {
  const machines = /machines booted in (\S+?)[,)]/.exec(out)?.[1];
  expect(machines, out).toBeTruthy();
  expect(processesMentioning(machines!)).toEqual([]);
  expect(existsSync(machines!)).toBe(false);
  expect(processesMentioning(home)).toEqual([]);
  const motoPid = Number(/moto_server \S+ \(pid (\d+)\)/.exec(out)?.[1]);
  const motoCmd = existsSync(`/proc/${motoPid}/cmdline`)
    ? readFileSync(`/proc/${motoPid}/cmdline`, 'utf8')
    : '';
  expect(motoCmd).not.toContain('moto_server');
  const ids = [...out.matchAll(/booter: (i-[0-9a-f]+) \(/g)].map((m) => m[1]!);
  expect(ids.length).toBeGreaterThan(0);
  const netns = process.getuid?.() === 0 ? execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' }) : '';
  // The emulator's host address (the API and the IMDS endpoints listen there), on a veth of its own.
  const hostAddr = /EC2 emulator at http:\/\/([\d.]+):/.exec(out)?.[1];
  if (hostAddr && hostAddr !== '127.0.0.1')
    expect(execFileSync('ip', ['-o', 'addr'], { encoding: 'utf8' })).not.toContain(`inet ${hostAddr}/`);
  for (const id of ids) {
    expect(netns).not.toContain(`berth-${id.slice(-8)}`);
    expect(existsSync(join(CGROUP_ROOT, 'memory', EMU_CGROUP_PARENT, id))).toBe(false);
  }
}

describe('berth up --demo --cloud ec2-emulated', () => {
  it(
    'runs the demo through the emulated EC2 and leaves no instance, machine or server behind',
    { timeout: 300_000 },
    async () => {
      const up = berthDaemon(['up', '--demo', '--cloud', 'ec2-emulated', '--listen', '127.0.0.1:0'], env);
      daemons.push(up);
      const code = await up.exited;
      const out = up.output();
      expect(code, out).toBe(0);
      expect(out).toMatch(
        /instance types: t3-small \(2 CPUs, 2GiB\), t3-large \(2 CPUs, 8GiB\), t3-small-spot /,
      );
      expect(out).toMatch(/instance i-[0-9a-f]+ \(t3-(small|large)\) booting/);
      expect(out).toMatch(/booter: i-[0-9a-f]+ \(t3\.(small|large)\) booted/);
      expect(out).toMatch(/finished 12\/12/);
      expect(out).toMatch(/demo-fails-once\s+failed\s+3\s+2/);
      expect(out).toMatch(/every instance has shut down/);
      expect(out).toMatch(/the emulated EC2 has no instance left running/);
      expectNothingLeft(out, home);
    },
  );

  it(
    'Ctrl-C while instances run stops everything: exit 130, no instance, machine, namespace or moto left',
    { timeout: 300_000 },
    async () => {
      // A home of its own: in the first test's, the demo is already done.
      const own = testHome('berth-up-ec2-int-');
      homes.push(own.home);
      const up = berthDaemon(['up', '--demo', '--cloud', 'ec2-emulated', '--listen', '127.0.0.1:0'], own.env);
      daemons.push(up);
      await until(
        () =>
          /booter: i-[0-9a-f]+ \(\S+\) booted/.test(up.output()) ||
          (up.child.exitCode !== null && Promise.reject(new Error(up.output()))),
        240_000,
        'an instance to boot',
      );
      const code = await up.stop('SIGINT');
      const out = up.output();
      expect(code, out).toBe(130);
      expect(out).toMatch(/interrupted: stopping/);
      expect(out).toMatch(/the emulated EC2 (has no instance left running|still lists \d+ instance)/);
      expectNothingLeft(out, own.home);
    },
  );
});
