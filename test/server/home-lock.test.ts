// The BERTH_HOME lock (src/server/home-lock.ts): one holder; a second taker is told who holds it; the
// kernel releases it when the holder dies, however it dies, and processes the holder started do not keep it.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isAlive, processRef } from '../../src/agent/runtimes/procfs.js';
import { HomeBusyError, lockHome, type HomeLock } from '../../src/server/home-lock.js';
import { assertBuilt, ROOT, until } from '../helpers/cli.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function home(): string {
  const h = mkdtempSync(join(tmpdir(), 'berth-lock-'));
  cleanups.push(() => rmSync(h, { recursive: true, force: true }));
  return h;
}

function kill(pid: number) {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    /* gone */
  }
}

/**
 * Another process holding the lock (the compiled module, as `berth up` runs it); it also starts a detached
 * `sleep` after taking the lock, as berth up starts PostgreSQL and agents. Resolves once it holds the lock.
 */
async function holder(h: string): Promise<{ pid: number; sleeper: number; exited: Promise<unknown> }> {
  assertBuilt();
  const code = `
    import { spawn } from 'node:child_process';
    import { lockHome } from ${JSON.stringify(join(ROOT, 'dist/src/server/home-lock.js'))};
    const lock = await lockHome(process.argv[1], 'berth up');
    lock.setUrl('http://127.0.0.1:1234');
    const s = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
    s.unref();
    console.log(s.pid);
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code, h], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  cleanups.push(() => kill(child.pid!));
  // Reaped: every thread of the holder has exited and its files are closed. Its /proc state reads 'Z'
  // earlier, while Node's other threads may still hold the descriptor table, and so the lock (a CI run saw
  // the lock still busy right after that).
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  const sleeper = Number(await until(() => out.trim(), 30_000, 'the holder to take the lock'));
  cleanups.push(() => kill(sleeper));
  return { pid: child.pid!, sleeper, exited };
}

describe('BERTH_HOME lock', () => {
  it('a second taker is refused with the holder named, until the holder releases it', async () => {
    const h = home();
    const first: HomeLock = await lockHome(h, 'berth up');
    cleanups.push(() => first.release());
    const refused = await lockHome(h, 'berth server').catch((e: Error) => e);
    expect(refused).toBeInstanceOf(HomeBusyError);
    expect((refused as Error).message).toBe(
      `berth up is already running on ${h} (pid ${process.pid}, starting); stop it first, or use another BERTH_HOME (--home)`,
    );
    first.setUrl('http://127.0.0.1:8470');
    await expect(lockHome(h, 'berth up')).rejects.toThrow(
      `berth up is already running on ${h} (pid ${process.pid}, API http://127.0.0.1:8470)`,
    );
    first.release();
    const second = await lockHome(h, 'berth server');
    second.release();
  });

  it('a SIGKILLed holder leaves no stale lock, though a process it started still runs', async () => {
    const h = home();
    const { pid, sleeper, exited } = await holder(h);
    await expect(lockHome(h, 'berth up')).rejects.toThrow(
      `berth up is already running on ${h} (pid ${pid}, API http://127.0.0.1:1234)`,
    );
    kill(pid);
    await exited;
    expect(await isAlive((await processRef(pid)) ?? { pid, startTicks: -2 })).toBe(false);
    expect(await processRef(sleeper)).not.toBeNull(); // the holder's child lives on, and does not hold the lock
    const lock = await lockHome(h, 'berth up');
    lock.release();
  });
});
