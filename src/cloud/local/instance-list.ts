// The local cloud's instance list: BERTH_HOME/instances.json, the equivalent of a real cloud's API
// state, so that a restarted dispatcher (or a second process) finds the instances it created.
//
// Every change is a read-modify-write under an exclusive lock file (created with O_EXCL; a lock whose
// holder died is broken), and the file is replaced atomically (temp file, fsync, rename), so two
// processes never lose each other's changes and a crash never leaves half a list.
import { open, readFile, rename, unlink, mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { isAlive, processRef, type ProcessRef } from '../../agent/runtimes/procfs.js';
import type { Tags } from '../driver.js';
import type { NetnsLink } from './netns.js';

/** One instance as the local cloud records it. */
export interface LocalInstanceRecord {
  id: string;
  providerType: string;
  /** Berth's instance type name. */
  typeName: string;
  vcpus: number;
  ram: number;
  preemptible: boolean;
  tags: Tags;
  /** The instance's process: the boot wrapper, which becomes the agent (exec) once the boot delay passed. */
  process: ProcessRef | null;
  createdAt: string;
  /** When the agent is started (created + boot delay). */
  bootAt: string;
  state: 'running' | 'terminated';
  terminatedAt: string | null;
  interruptionNotice: string | null;
  /** The instance's directory (work dir, secret, agent log). */
  dir: string;
  /** cgroup path (below the root, or each v1 hierarchy) of the instance's slice, or null without limits. */
  cgroup: string | null;
  /** The instance's network namespace and link, when the driver runs agents in namespaces. */
  netns?: NetnsLink;
}

interface ListFile {
  version: 1;
  instances: LocalInstanceRecord[];
}

/** Terminated instances stay listed this long (like a real cloud), then are forgotten. */
const KEEP_TERMINATED_MS = 60 * 60 * 1000;
const LOCK_WAIT_MS = 10_000;

export class InstanceList {
  readonly path: string;
  private readonly lockPath: string;

  constructor(home: string) {
    this.path = join(home, 'instances.json');
    this.lockPath = `${this.path}.lock`;
  }

  async read(): Promise<LocalInstanceRecord[]> {
    try {
      return (JSON.parse(await readFile(this.path, 'utf8')) as ListFile).instances;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new Error(`${this.path}: ${(err as Error).message}`);
    }
  }

  /** Applies `fn` to the list under the lock and writes the result; returns what fn returned. */
  async update<T>(fn: (list: LocalInstanceRecord[]) => T | Promise<T>): Promise<T> {
    await mkdir(dirname(this.path), { recursive: true });
    await this.lock();
    try {
      const list = await this.read();
      const out = await fn(list);
      const now = Date.now();
      const kept = list.filter(
        (r) =>
          r.state !== 'terminated' ||
          !r.terminatedAt ||
          now - Date.parse(r.terminatedAt) < KEEP_TERMINATED_MS,
      );
      const tmp = `${this.path}.${process.pid}.tmp`;
      const fh = await open(tmp, 'w', 0o600);
      try {
        await fh.writeFile(JSON.stringify({ version: 1, instances: kept } satisfies ListFile, null, 1));
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(tmp, this.path);
      return out;
    } finally {
      await unlink(this.lockPath).catch(() => {});
    }
  }

  private async lock(): Promise<void> {
    const deadline = Date.now() + LOCK_WAIT_MS;
    const me = await processRef(process.pid);
    for (;;) {
      try {
        const fh = await open(this.lockPath, 'wx', 0o600);
        await fh.writeFile(JSON.stringify(me));
        await fh.close();
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      // Held: break it if its holder is gone (crashed while holding it).
      const holder = await readFile(this.lockPath, 'utf8').then(
        (t) => (t ? (JSON.parse(t) as ProcessRef) : null),
        () => null,
      );
      if (holder && !(await isAlive(holder))) {
        await unlink(this.lockPath).catch(() => {});
        continue;
      }
      if (Date.now() > deadline)
        throw new Error(`${this.lockPath}: held by pid ${holder?.pid ?? '?'} for too long`);
      await new Promise((r) => setTimeout(r, 10 + Math.random() * 20));
    }
  }
}
