// Stopping `berth up` (issue 17) the ways it is stopped for real: Ctrl-C in a terminal (SIGINT to the whole
// foreground process group, PostgreSQL and npm included when they share it), a supervisor's SIGTERM to the
// pid or to the whole group, `npx berth up` and Ctrl-C, and two Ctrl-Cs (the second stops at once even while
// the database hangs). Each time, with a container running on a local instance: `berth up` exits within a
// bound with its exit code, and nothing is left: no process of its group, home or container, no cgroup of
// its instances or containers, no instance listed as running. `berth server` stops the same way.
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isAlive, processGroupMembers, processRef } from '../../src/agent/runtimes/procfs.js';
import { assertBuilt, killProcessesMentioning, readIfExists, testHome, until } from '../helpers/cli.js';
import {
  killGroup,
  leftovers,
  localInstances,
  spawnGroup,
  startSleeper,
  type GroupProcess,
} from '../helpers/up.js';

/** A graceful stop takes a few seconds here; well under the 60 s after which berth up forces it. */
const STOP_BOUND_MS = 30_000;

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** A fresh home with `berth up` running one container on a local instance. */
async function upWithWork(via: 'node' | 'npx' = 'node') {
  assertBuilt();
  const { home, env } = testHome('berth-upstop-');
  const marker = `upstop-${randomBytes(6).toString('hex')}`;
  const up = spawnGroup(['up', '--listen', '127.0.0.1:0'], env, via);
  cleanups.push(() => {
    killGroup(up);
    killProcessesMentioning(home);
    killProcessesMentioning(marker);
    rmSync(home, { recursive: true, force: true });
  });
  await until(
    () =>
      /Berth is up/.test(up.output()) ||
      (up.child.exitCode !== null && Promise.reject(new Error(up.output()))),
    120_000,
    'berth up',
  );
  const url = readIfExists(join(home, 'api-url'))!.trim();
  const token = readFileSync(join(home, 'admin-token'), 'utf8').trim();
  const { container } = await startSleeper(url, token, marker);
  const instances = localInstances(home);
  expect(instances.filter((i) => i.state === 'running')).toHaveLength(1);
  expectOwnGroup(home, up);
  return { home, up, marker, instances, containers: [container] };
}

/** The embedded PostgreSQL is out of the signalled group: a terminal's Ctrl-C reaches berth alone. */
function expectOwnGroup(home: string, p: GroupProcess): void {
  const postmaster = Number(readFileSync(join(home, 'pgdata', 'postmaster.pid'), 'utf8').split('\n')[0]);
  const stat = readFileSync(`/proc/${postmaster}/stat`, 'utf8');
  const pgrp = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
  expect(pgrp).toBe(postmaster);
  expect(pgrp).not.toBe(p.pgid);
}

async function stoppedWithin(up: GroupProcess, sentAt: number, boundMs = STOP_BOUND_MS) {
  const timeout = new Promise<never>((_, rej) =>
    setTimeout(
      () => rej(new Error(`still running ${boundMs} ms after the signal:\n${up.output()}`)),
      boundMs,
    ).unref(),
  );
  const { code, at } = await Promise.race([up.exited, timeout]);
  // The exit of the group leader is not enough: the whole group must be gone too (npx's berth is a grandchild).
  await until(
    async () => (await processGroupMembers(up.pgid)).length === 0,
    Math.max(1, sentAt + boundMs - Date.now()),
    'the process group to be empty',
  );
  return { code, ms: at - sentAt };
}

describe('stopping berth up', () => {
  const variants: {
    name: string;
    via?: 'node' | 'npx';
    send: (up: GroupProcess) => void;
    code: number;
  }[] = [
    {
      name: 'Ctrl-C: SIGINT to its whole process group',
      send: (up) => process.kill(-up.pgid, 'SIGINT'),
      code: 0,
    },
    { name: 'SIGTERM to its pid', send: (up) => process.kill(up.pgid, 'SIGTERM'), code: 0 },
    {
      name: 'SIGTERM to its whole process group (kill -TERM -- -PGID)',
      send: (up) => process.kill(-up.pgid, 'SIGTERM'),
      code: 0,
    },
    {
      // npm forwards the SIGINT to the `sh -c` it runs berth through, which dies of it; npm then reports 130
      // once berth has stopped (gracefully: its own exit code is not visible through npm).
      name: 'npx berth up, Ctrl-C (npm, its shell and berth all get the SIGINT)',
      via: 'npx',
      send: (up) => process.kill(-up.pgid, 'SIGINT'),
      code: 130,
    },
  ];
  for (const v of variants)
    it(`${v.name}: stops gracefully in bounded time, leaving nothing`, { timeout: 240_000 }, async () => {
      const { home, up, marker, instances, containers } = await upWithWork(v.via);
      const sentAt = Date.now();
      v.send(up);
      const { code } = await stoppedWithin(up, sentAt);
      const out = up.output();
      expect(code, out).toBe(v.code);
      expect(out).toMatch(/(SIGINT|SIGTERM): stopping/);
      expect(out).toMatch(/shut down 1 local instance\(s\); 1 running container\(s\) will be retried/);
      expect(out).not.toMatch(/stopping at once/); // a repeat of the same request is not a second Ctrl-C
      expect(out).not.toMatch(/PostgreSQL exited/); // the database was not signalled: it stopped last, by us
      expect(out).not.toMatch(/still running \d+s after finishing/); // nothing left open at the exit
      expect(await leftovers(home, { pgid: up.pgid, marker, instances, containers })).toEqual([]);
    });

  it(
    'a second Ctrl-C stops at once, even with the database hung, and still leaves nothing',
    { timeout: 240_000 },
    async () => {
      const { home, up, marker, instances, containers } = await upWithWork();
      // Freeze PostgreSQL (its own process group): the graceful stop now waits on the database for good.
      const postmaster = Number(readFileSync(join(home, 'pgdata', 'postmaster.pid'), 'utf8').split('\n')[0]);
      expect(postmaster).toBeGreaterThan(0);
      process.kill(-postmaster, 'SIGSTOP');
      cleanups.unshift(() => {
        try {
          process.kill(-postmaster, 'SIGCONT');
        } catch {
          /* gone */
        }
      });
      process.kill(-up.pgid, 'SIGINT');
      // Repeats within a second are the same request (npx): the second Ctrl-C comes once berth up says so.
      await until(() => /Ctrl-C again stops at once/.test(up.output()), 30_000, 'the second-Ctrl-C hint');
      expect(up.child.exitCode, up.output()).toBeNull(); // still stopping: the database hangs
      const sentAt = Date.now();
      process.kill(-up.pgid, 'SIGINT');
      const { code, ms } = await stoppedWithin(up, sentAt, 15_000);
      expect(code, up.output()).toBe(130);
      expect(up.output()).toMatch(/SIGINT again: stopping at once/);
      expect(ms).toBeLessThan(15_000);
      expect(await leftovers(home, { pgid: up.pgid, marker, instances, containers })).toEqual([]);
      // The database was killed, not left frozen: nothing runs on its data directory.
      expect(readIfExists(join(home, 'pgdata', 'postmaster.pid'))).not.toBeNull(); // killed, so not cleaned up
      const pg = await processRef(postmaster);
      expect(pg === null || !(await isAlive(pg))).toBe(true); // gone, or a zombie waiting for its reaper
    },
  );
});

describe('stopping berth server', () => {
  it(
    'Ctrl-C to its process group stops the API and its PostgreSQL, the database last',
    { timeout: 120_000 },
    async () => {
      assertBuilt();
      const { home, env } = testHome('berth-srvstop-');
      const server = spawnGroup(['server', '--listen', '127.0.0.1:0'], env);
      cleanups.push(() => {
        killGroup(server);
        killProcessesMentioning(home);
        rmSync(home, { recursive: true, force: true });
      });
      await until(() => readIfExists(join(home, 'api-url')), 60_000, 'berth server');
      expectOwnGroup(home, server);
      const sentAt = Date.now();
      process.kill(-server.pgid, 'SIGINT');
      const { code } = await stoppedWithin(server, sentAt);
      expect(code, server.output()).toBe(0);
      expect(server.output()).not.toMatch(/PostgreSQL exited/);
      expect(await leftovers(home, { pgid: server.pgid })).toEqual([]);
    },
  );
});
