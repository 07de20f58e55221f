// What the runtimes need to know about host processes, read from /proc: whether a pid still belongs
// to the process we started (pids are reused), and which processes share a process group.
import { readFile, readdir } from 'node:fs/promises';

/** Identity of a process that survives our own restart: pid plus its start time in clock ticks. */
export interface ProcessRef {
  pid: number;
  startTicks: number;
}

interface Stat {
  state: string;
  ppid: number;
  pgrp: number;
  startTicks: number;
  /** utime + stime, in clock ticks. */
  cpuTicks: number;
  rssPages: number;
}

async function stat(pid: number): Promise<Stat | null> {
  let text: string;
  try {
    text = await readFile(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // The command name (field 2) may hold spaces and parentheses: split after its last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // Fields from 3 on (state), so field N of proc(5) is rest[N - 3].
  return {
    state: rest[0] ?? '?',
    ppid: Number(rest[1]),
    pgrp: Number(rest[2]),
    startTicks: Number(rest[19]),
    cpuTicks: Number(rest[11]) + Number(rest[12]),
    rssPages: Number(rest[21]),
  };
}

/** The ref of a running pid, or null if it is gone. */
export async function processRef(pid: number): Promise<ProcessRef | null> {
  const s = await stat(pid);
  return s ? { pid, startTicks: s.startTicks } : null;
}

/** True while the process is running (not exited, not a zombie, pid not reused by another process). */
export async function isAlive(ref: ProcessRef): Promise<boolean> {
  const s = await stat(ref.pid);
  return s !== null && s.startTicks === ref.startTicks && s.state !== 'Z' && s.state !== 'X';
}

/** Pids of live processes in process group `pgid`. */
export async function processGroupMembers(pgid: number): Promise<number[]> {
  return (await groupStats(pgid)).map((s) => s.pid);
}

// USER_HZ is 100 on every Linux architecture Node supports; page size 4 KiB on x86-64 and most arm64.
const TICKS_PER_SECOND = 100;
const PAGE_SIZE = 4096;

type PidStat = Stat & { pid: number };

/** Every live (not zombie) process on the host. */
async function allStats(): Promise<PidStat[]> {
  const out: PidStat[] = [];
  for (const name of await readdir('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    const s = await stat(pid);
    if (s && s.state !== 'Z') out.push({ ...s, pid });
  }
  return out;
}

async function groupStats(pgid: number): Promise<PidStat[]> {
  return (await allStats()).filter((s) => s.pgrp === pgid);
}

/** The live descendants of `pid` (children, their children...), whatever session or group they moved to. */
export async function descendants(pid: number): Promise<number[]> {
  return (await descendantStats(pid)).map((s) => s.pid);
}

async function descendantStats(pid: number): Promise<PidStat[]> {
  const all = await allStats();
  const byParent = new Map<number, PidStat[]>();
  for (const s of all) byParent.set(s.ppid, [...(byParent.get(s.ppid) ?? []), s]);
  const out: PidStat[] = [];
  const walk = (p: number): void => {
    for (const c of byParent.get(p) ?? []) {
      out.push(c);
      walk(c.pid);
    }
  };
  walk(pid);
  return out;
}

/** The parent of each of `pids` that is still alive (gone ones are left out). */
export async function parentsOf(pids: number[]): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  await Promise.all(
    pids.map(async (pid) => {
      const s = await stat(pid);
      if (s && s.state !== 'Z') out.set(pid, s.ppid);
    }),
  );
  return out;
}

function sum(stats: Stat[]): { cpuSeconds: number; ramBytes: number } {
  return {
    cpuSeconds: stats.reduce((a, s) => a + s.cpuTicks, 0) / TICKS_PER_SECOND,
    ramBytes: stats.reduce((a, s) => a + s.rssPages, 0) * PAGE_SIZE,
  };
}

/**
 * CPU seconds and resident memory of the live processes of a process group: the usage of a container
 * that runs without a cgroup. Processes that already exited are not counted (no cgroup keeps their time).
 */
export async function processGroupUsage(pgid: number): Promise<{ cpuSeconds: number; ramBytes: number }> {
  return sum(await groupStats(pgid));
}

/** The same for the live descendants of `pid` (a sandboxed container without a cgroup). */
export async function descendantsUsage(pid: number): Promise<{ cpuSeconds: number; ramBytes: number }> {
  return sum(await descendantStats(pid));
}
