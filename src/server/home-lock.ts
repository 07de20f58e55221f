// One `berth up` / `berth server` per BERTH_HOME (docs/OPERATIONS.md "One Berth per BERTH_HOME").
//
// The lock is flock(2) on BERTH_HOME/lock, taken through util-linux's flock(1) on a descriptor that this
// process opened and keeps open: flock belongs to the open file description, so it stays held after the
// helper exits and the kernel releases it when this process ends, however it ends (a SIGKILLed Berth never
// leaves a stale lock behind, and no pid can be mistaken for a live holder). Node has no flock of its own,
// the npm packages for it are native addons (a compiler on every install) or emulate a lock with mtimes and
// timeouts; util-linux is part of every Debian-like system. Node opens files close-on-exec, so the processes
// Berth starts (PostgreSQL, agents) do not inherit the descriptor and cannot keep the lock alive.
import { spawnSync } from 'node:child_process';
import { closeSync, ftruncateSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { isAlive, processRef, type ProcessRef } from '../agent/runtimes/procfs.js';

export const HOME_LOCK_FILE = 'lock';

/** What the lock file says about its holder, for the message a second start prints. */
interface Holder extends ProcessRef {
  command: string;
  url: string | null;
}

/** Another live Berth process holds the home: the message names it. */
export class HomeBusyError extends Error {}

export interface HomeLock {
  /** Records the holder's API URL (shown to a second start) once it listens. */
  setUrl(url: string): void;
  /** Releases the lock (also released by the kernel when the process exits). */
  release(): void;
}

const BUSY = 75; // flock's exit code when the lock is held (EX_TEMPFAIL)

/** Takes the home's lock for `command` ("berth up", "berth server"), or throws HomeBusyError. */
export async function lockHome(home: string, command: string): Promise<HomeLock> {
  mkdirSync(home, { recursive: true, mode: 0o711 });
  const path = join(home, HOME_LOCK_FILE);
  const fd = openSync(path, 'a+', 0o600); // never truncated before the lock is ours: it names the holder
  const r = spawnSync('flock', ['--nonblock', '--exclusive', '--conflict-exit-code', String(BUSY), '3'], {
    stdio: ['ignore', 'ignore', 'pipe', fd],
    encoding: 'utf8',
  });
  if (r.status !== 0) {
    closeSync(fd);
    if (r.error) throw new Error(`cannot lock ${path}: flock (util-linux) is needed: ${r.error.message}`);
    if (r.status !== BUSY)
      throw new Error(`cannot lock ${path}: ${r.stderr.trim() || `flock exited ${r.status}`}`);
    throw new HomeBusyError(await busyMessage(home, path));
  }
  const me = (await processRef(process.pid)) ?? { pid: process.pid, startTicks: -1 };
  const write = (holder: Holder) => {
    ftruncateSync(fd, 0);
    writeSync(fd, `${JSON.stringify(holder)}\n`); // O_APPEND: at the start of the emptied file
  };
  const holder: Holder = { ...me, command, url: null };
  write(holder);
  let open = true;
  return {
    setUrl(url) {
      if (open) write({ ...holder, url });
    },
    release() {
      if (!open) return;
      open = false;
      ftruncateSync(fd, 0);
      closeSync(fd);
    },
  };
}

async function busyMessage(home: string, path: string): Promise<string> {
  let holder: Holder | null = null;
  try {
    holder = JSON.parse(readFileSync(path, 'utf8')) as Holder;
  } catch {
    /* being written, or not yet: the holder is starting */
  }
  const hint = 'stop it first, or use another BERTH_HOME (--home)';
  // The file may still name a previous, dead holder while the new one starts: name only a live one.
  if (holder && Number.isInteger(holder.pid) && (await isAlive(holder)))
    return `${holder.command} is already running on ${home} (pid ${holder.pid}, ${holder.url ? `API ${holder.url}` : 'starting'}); ${hint}`;
  return `another Berth process is starting on ${home} (it holds ${path}); ${hint}`;
}
