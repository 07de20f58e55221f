// The RunHandle of runtimes whose daemon keeps container state (docker through its API, podman through
// its CLI). The engine keeps the container (named berth-<id>) until Berth removes it, so a restarted
// agent re-attaches by name and learns an exit that happened while it was down. Output is copied from
// the engine's log into the work dir's stdout/stderr files, which output() reads like the other runtimes'.
//
// Usage comes from a parent cgroup Berth creates (/berth/<id>, cgroupfs driver; v1 or v2): the engine
// removes the container's own cgroup at exit and with it the peak memory and CPU time; the parent's
// hierarchical counters keep both (and on v2 its memory.events keeps the OOM kill count as well).
// Freezing is the engine's pause, which freezes the container's own cgroup and records it as paused.
import { appendFile, open, readFile, rename, rm, stat, writeFile, type FileHandle } from 'node:fs/promises';
import { constants } from 'node:os';
import { join } from 'node:path';
import { requireContainerCgroup, type Cgroup, type CgroupStats } from './cgroup.js';
import { diskUsage, outputDiskUsage } from './du.js';
import { OncePerKey } from './once.js';
import { collectOnce, readSavedResult, saveResult } from './result-file.js';
import { tailFiles } from './tail.js';
import type { ExitInfo, OutputChunk, RunHandle, Usage } from './types.js';

/** What the handle needs to know about a container from its engine. */
export interface EngineState {
  running: boolean;
  /** Frozen by the engine's pause. */
  paused: boolean;
  exitCode: number;
  oomKilled: boolean;
  startedAt: string;
  finishedAt: string;
  /** The container's writable layer on the host (its scratch usage), when the storage driver says. */
  upperDir: string | null;
}

/** The parts of a container's inspect JSON Berth reads (docker's API; podman's CLI prints the same shape). */
export interface EngineInspect {
  State: {
    Running: boolean;
    Paused: boolean;
    ExitCode: number;
    OOMKilled: boolean;
    StartedAt: string;
    FinishedAt: string;
  };
  GraphDriver?: { Data?: { UpperDir?: string } };
}

/** What Berth needs from an inspect result. */
export function engineState(ins: EngineInspect): EngineState {
  const s = ins.State;
  return {
    running: s.Running,
    paused: s.Paused,
    exitCode: s.ExitCode,
    oomKilled: s.OOMKilled,
    startedAt: s.StartedAt,
    finishedAt: s.FinishedAt,
    upperDir: ins.GraphDriver?.Data?.UpperDir ?? null,
  };
}

/** The operations a container engine provides for one named container. */
export interface ContainerEngine {
  readonly name: string;
  /** Whether inspect's oomKilled is reliable (docker: yes; podman 4.3: always false, on v1 and v2). */
  readonly reportsOom: boolean;
  /** The engine keeps at most this much of a container's log (older parts rotate away); unset = all. */
  readonly logCapBytes?: number;
  /** Resolves when the container has stopped. */
  wait(container: string): Promise<void>;
  /** null when no such container exists. */
  inspect(container: string): Promise<EngineState | null>;
  remove(container: string): Promise<void>;
  /** Signals the container's main process; no-op when it is not running. */
  kill(container: string, sig: NodeJS.Signals): Promise<void>;
  /** Freezes the container (engine pause); resolves once the engine reports it paused. */
  pause(container: string): Promise<void>;
  unpause(container: string): Promise<void>;
  /** Writes the container's whole log (from the start; following until it stops if `follow`) to the two files. */
  copyLogs(container: string, stdout: FileHandle, stderr: FileHandle, follow: boolean): Promise<void>;
}

/** How long freeze() keeps retrying an engine's pause that failed while the container runs. */
const FREEZE_DEADLINE_MS = 10_000;

/** A file whose allocated blocks fall short of its size by more than this has holes (punched by the agent). */
const SPARSE_SLACK = 64 * 1024;

/** How close to its limit a container's peak must be for a SIGKILL to count as an OOM kill. */
const OOM_MARGIN = 1024 * 1024;

/** The signal name for an exit code of 128+N. */
export function signalOf(exitCode: number | null): string | undefined {
  if (exitCode === null || exitCode <= 128) return undefined;
  return Object.entries(constants.signals).find(([, n]) => n === exitCode - 128)?.[0];
}

/** Log copiers running in this process, by work dir. */
const copiers = new OncePerKey<void>();

/** A container held by an engine. */
export class EngineHandle implements RunHandle {
  readonly warning = null;
  readonly runtime: string;
  private readonly container: string;
  private readonly copied: Promise<void>;
  private copyDone = false;
  private waiting: Promise<ExitInfo> | null = null;
  private upperDir: string | null | undefined;
  private done = false;
  private sentKill = false;

  constructor(
    private readonly engine: ContainerEngine,
    readonly id: string,
    private readonly workDir: string,
    private readonly cgroup: Cgroup,
  ) {
    this.runtime = engine.name;
    this.container = `berth-${id}`;
    const copy = copiers.run(workDir, () => this.copyLogs());
    this.copied = copy.finally(() => (this.copyDone = true));
    this.copied.catch(() => {}); // a failed copy shows as incomplete output; wait() still reports the exit
  }

  private async copyLogs(): Promise<void> {
    if (await readSavedResult(this.workDir)) return;
    const files = { stdout: join(this.workDir, 'stdout'), stderr: join(this.workDir, 'stderr') };
    await this.copyInto(files, true);
    // A following reader can stop before the last lines are in (docker 20.10 and podman 4.3 both lose
    // the tail under load when the container exits): once it has stopped, read the whole log again and
    // append what the following copy missed. Readers of the files only ever see them grow.
    await this.engine.wait(this.container);
    const full = { stdout: `${files.stdout}.full`, stderr: `${files.stderr}.full` };
    await this.copyInto(full, false);
    // A capped log (docker: two files) that filled its first file may have rotated away its start, and
    // its readers lose lines at a rotation.
    const cap = this.engine.logCapBytes;
    const logged = (await stat(full.stdout)).size + (await stat(full.stderr)).size;
    const mayHaveRotated = cap !== undefined && logged >= cap / 2;
    for (const stream of ['stdout', 'stderr'] as const) {
      const st = await stat(files[stream]);
      const all = await readFile(full[stream]);
      const sparse = st.blocks * 512 + SPARSE_SLACK < st.size; // the agent gave back shipped bytes' disk
      if (mayHaveRotated || sparse) {
        // Mend the end only: past the log limit only the end of the copy is kept (log-limit.ts), so after
        // a rotation the log's contiguous end is appended for it to come from (the repeated middle is
        // dropped with the rest); else what follows the copy's last bytes in the log.
        const missed = mayHaveRotated
          ? all.subarray(Math.max(0, all.length - Math.ceil(cap / 8)))
          : await missedEnd(files[stream], st.size, all);
        if (missed.length > 0) await appendFile(files[stream], missed);
        await rm(full[stream], { force: true });
        continue;
      }
      const have = await readFile(files[stream]);
      if (all.subarray(0, have.length).equals(have)) {
        if (all.length > have.length) await appendFile(files[stream], all.subarray(have.length));
        await rm(full[stream], { force: true });
      } else {
        // The following copy skipped or garbled something: the complete copy replaces it. A reader that
        // tailed the file meanwhile has seen the wrong bytes; the file (what the agent ships) is right.
        await rename(full[stream], files[stream]);
      }
    }
  }

  private async copyInto(files: Record<'stdout' | 'stderr', string>, follow: boolean): Promise<void> {
    const out = await open(files.stdout, 'w');
    const err = await open(files.stderr, 'w');
    try {
      await this.engine.copyLogs(this.container, out, err, follow);
    } finally {
      await out.close();
      await err.close();
    }
  }

  wait(): Promise<ExitInfo> {
    this.waiting ??= collectOnce(this.workDir, () => this.collect()).then((info) => {
      this.done = true;
      return info;
    });
    return this.waiting;
  }

  private async collect(): Promise<ExitInfo> {
    await this.engine.wait(this.container);
    await this.copied.catch(() => {});
    const s = await this.engine.inspect(this.container);
    const stats = await this.cgroup.stats();
    const exitCode = s ? s.exitCode : null;
    const info: ExitInfo = {
      exitCode,
      // The parent group's own count (v2: hierarchical memory.events) stands beside the engine's word: docker
      // on cgroup v2 was seen reporting OOMKilled false for a container the kernel OOM-killed (CI's guest).
      oomKilled:
        (s?.oomKilled ?? false) ||
        stats.oomKills > 0 ||
        (!this.engine.reportsOom && this.looksOomKilled(exitCode, stats)),
      peakRamBytes: stats.peakRamBytes,
      cpuSeconds: stats.cpuSeconds,
      wallMs: s ? Math.max(0, Date.parse(s.finishedAt) - Date.parse(s.startedAt)) : 0,
    };
    const sig = signalOf(exitCode);
    if (sig) info.signal = sig;
    if (!s) info.reason = `the ${this.runtime} container disappeared before its exit was recorded`;
    await this.engine.remove(this.container);
    await this.cgroup.remove();
    await saveResult(this.workDir, info);
    this.done = true;
    return info;
  }

  /**
   * For engines that do not report OOM kills, beyond the parent's count (v2: its memory.events counts the
   * kill; collect() reads it for every engine). On v1 the kernel counts it in the container's own cgroup,
   * which the engine deletes at exit, so what is left is the parent's peak: killed by SIGKILL that Berth
   * did not send, with the peak at the limit, is an OOM kill.
   */
  private looksOomKilled(exitCode: number | null, stats: CgroupStats): boolean {
    return exitCode === 137 && !this.sentKill && stats.peakRamBytes >= stats.ramLimit - OOM_MARGIN;
  }

  async signal(sig: NodeJS.Signals): Promise<void> {
    if (this.done) return;
    if (sig === 'SIGKILL') this.sentKill = true;
    await this.engine.kill(this.container, sig);
    const s = await this.engine.inspect(this.container).catch(() => null);
    if (s?.paused) await this.engine.unpause(this.container).catch(() => {});
  }

  async freeze(): Promise<void> {
    // runc, under both engines, gives up when the kernel is slow to freeze every task ("unable to freeze",
    // seen under load on cgroup v1) and thaws again: retried until the deadline.
    const deadline = Date.now() + FREEZE_DEADLINE_MS;
    for (;;) {
      if (this.done) return;
      try {
        await this.engine.pause(this.container);
        return;
      } catch (err) {
        // Engines refuse to pause a container that is already paused or no longer running: nothing to do then.
        const s = await this.engine.inspect(this.container).catch(() => null);
        if (!s?.running || s.paused) return;
        if (Date.now() > deadline) throw err;
      }
    }
  }

  async thaw(): Promise<void> {
    if (this.done) return;
    const s = await this.engine.inspect(this.container);
    if (s?.paused) await this.engine.unpause(this.container);
  }

  async usage(): Promise<Usage> {
    if (this.upperDir === undefined)
      this.upperDir = (await this.engine.inspect(this.container).catch(() => null))?.upperDir ?? null;
    const stats = this.done ? null : await this.cgroup.stats();
    return {
      cpuSeconds: stats?.cpuSeconds ?? 0,
      ramBytes: stats?.ramBytes ?? 0,
      peakRamBytes: stats?.peakRamBytes ?? 0,
      scratchBytes: this.upperDir ? await diskUsage(this.upperDir) : 0,
      outputBytes: await outputDiskUsage(this.workDir),
    };
  }

  output(): AsyncIterable<OutputChunk> {
    return tailFiles(
      { stdout: join(this.workDir, 'stdout'), stderr: join(this.workDir, 'stderr') },
      async () => this.copyDone,
    );
  }
}

/**
 * What the engine's complete log holds past the end of the followed copy in `file` (`size` bytes): found
 * by the copy's last bytes that are still on disk (up to 64KiB, holes left out). Empty when the copy is
 * complete, or when its end cannot be found in the log.
 */
async function missedEnd(file: string, size: number, all: Buffer): Promise<Buffer> {
  const want = Math.min(64 * 1024, size);
  const buf = Buffer.alloc(want);
  const fh = await open(file, 'r');
  try {
    await fh.read(buf, 0, want, size - want);
  } finally {
    await fh.close();
  }
  let start = 0;
  while (start < buf.length && buf[start] === 0) start++; // a hole's zeros
  const end = buf.subarray(start);
  if (end.length === 0) return Buffer.alloc(0);
  const at = all.lastIndexOf(end);
  return at < 0 ? Buffer.alloc(0) : all.subarray(at + end.length);
}

/** Records an engine container started for `id` (run.json), so that a new agent can re-attach to it. */
export async function recordEngineRun(runtime: string, id: string, workDir: string): Promise<void> {
  await writeFile(join(workDir, 'run.json'), JSON.stringify({ runtime, id, name: `berth-${id}` }));
}

/**
 * The handle of an engine container this runtime recorded for `id`: null when there is no record of
 * this runtime, or the container is gone without a saved result.
 */
export async function reattachEngine(
  engine: ContainerEngine,
  id: string,
  workDir: string,
  cgroupParent?: string,
): Promise<EngineHandle | null> {
  const state = await readFile(join(workDir, 'run.json'), 'utf8').then(
    (t) => JSON.parse(t) as { runtime: string; id: string },
    () => null,
  );
  if (!state || state.runtime !== engine.name || state.id !== id) return null;
  if (!(await readSavedResult(workDir)) && !(await engine.inspect(`berth-${id}`))) return null;
  return new EngineHandle(engine, id, workDir, await requireContainerCgroup(id, cgroupParent));
}

/** Removes the engine container of `id` and its parent cgroup, whatever state they are in. */
export async function discardEngine(
  engine: ContainerEngine,
  id: string,
  cgroupParent?: string,
): Promise<void> {
  await engine.remove(`berth-${id}`);
  await (await requireContainerCgroup(id, cgroupParent)).remove();
}
