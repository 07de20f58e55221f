// What one-shot agents (the slurm backend's jobs, docs/SLURM.md) that died without cleaning up left on their
// node, removed by the next one-shot agent there. A one-shot agent stopped by SIGTERM stops its container and
// removes its cgroup and work dir itself; one killed with SIGKILL (SLURM's KillWait passed, the OOM killer)
// cannot, and nobody re-attaches after a one-shot agent. Its work dir is still there: the journal names the
// containers it had started (each written before its cgroup was made), and the runtime's discard (as for a
// start an agent restart cut short) kills what is left of each (by its cgroup) and removes the cgroup.
//
// The one-shot agents of a node keep their work dirs side by side (work_dir/<container>). Each records who
// owns its dir (OWNER_FILE: pid, start time, PID namespace, boot id); a dir is swept only when its owner ran
// in this agent's PID namespace on this boot of this host (so that its pid means the same process here: a
// work_dir on shared storage is seen by other hosts, whose init namespaces have the same inode) and is gone.
// A dir without the file (its agent had not written it yet) is left alone.
import { readFile, readdir, readlink, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { errorFields, type Logger } from '../log/logger.js';
import { Journal } from './journal.js';
import type { RuntimeChoice } from './runner.js';
import { isAlive, processRef } from './runtimes/procfs.js';

/** The file in a one-shot agent's work dir that says which process owns it. */
export const OWNER_FILE = 'agent.json';

interface Owner {
  pid: number;
  start_ticks: number;
  /** `pid:[inode]` and the host's boot id: pids mean the same process only within one namespace and boot. */
  pid_ns: string;
}

/** This process's PID namespace on this boot of this host, or null when /proc cannot tell. */
async function pidNamespace(): Promise<string | null> {
  const [ns, boot] = await Promise.all([
    readlink('/proc/self/ns/pid').catch(() => null),
    readFile('/proc/sys/kernel/random/boot_id', 'utf8').catch(() => null),
  ]);
  return ns && boot ? `${ns} ${boot.trim()}` : null;
}

/** Records this process as the owner of its work dir (a one-shot agent, before it starts anything). */
export async function claimWorkDir(workDir: string): Promise<void> {
  const [ref, ns] = await Promise.all([processRef(process.pid), pidNamespace()]);
  if (!ref || !ns) return; // no /proc: never swept (a sweep could not tell it from a dead one)
  const owner: Owner = { pid: ref.pid, start_ticks: ref.startTicks, pid_ns: ns };
  await writeFile(join(workDir, OWNER_FILE), JSON.stringify(owner), { mode: 0o600 });
}

/** Whether the work dir's owner is known to be gone: recorded, in this PID namespace, and not running. */
async function ownerGone(dir: string, ns: string): Promise<boolean> {
  let owner: Owner;
  try {
    owner = JSON.parse(await readFile(join(dir, OWNER_FILE), 'utf8')) as Owner;
  } catch {
    return false;
  }
  if (owner.pid_ns !== ns || !Number.isInteger(owner.pid)) return false;
  return !(await isAlive({ pid: owner.pid, startTicks: owner.start_ticks }));
}

/**
 * Sweeps the work dirs beside `workDir` (under `parent`) whose one-shot agent is gone: each container of
 * their journals is discarded by its runtime (its processes killed, its cgroup removed), then the dir is
 * removed. Returns the ids of the containers discarded. Best effort: a failure is logged and the next agent
 * tries again.
 */
export async function sweepDeadAgents(
  parent: string,
  workDir: string,
  runtimes: RuntimeChoice,
  log: Logger,
): Promise<string[]> {
  const ns = await pidNamespace();
  if (!ns) return [];
  const entries = await readdir(parent, { withFileTypes: true }).catch(() => []);
  const swept: string[] = [];
  for (const e of entries) {
    const dir = join(parent, e.name);
    if (!e.isDirectory() || dir === workDir || !(await ownerGone(dir, ns))) continue;
    try {
      const journal = await Journal.load(join(dir, 'journal.json'), { fsync: false });
      for (const entry of journal.containers.values()) {
        await runtimes.byName(entry.runtime)?.discard(entry.id, entry.runDir);
        swept.push(entry.id);
      }
      await rm(dir, { recursive: true, force: true });
      log.warn(
        { dir, containers: [...journal.containers.keys()] },
        `removed what a one-shot agent killed before it cleaned up left: ${dir}` +
          (journal.containers.size ? ` (containers ${[...journal.containers.keys()].join(', ')})` : ''),
      );
    } catch (err) {
      log.warn({ dir, ...errorFields(err) }, `cannot sweep the work dir of a dead one-shot agent: ${dir}`);
    }
  }
  return swept;
}
