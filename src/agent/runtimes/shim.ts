// The per-container shim of the file-backed runtimes (process, runc) and the handle built on it.
//
// The shim is a /bin/sh that joins the container's cgroup, runs the command with its output going to
// files in the work dir, and writes the exit code to `exit`. It is started detached from the agent, so
// the container outlives an agent crash, and everything a new agent needs (output, exit code, run.json)
// is on disk. Berth never signals the shim itself: signals go to the container's other processes, so the
// shim lives to record the exit code (128+N when the command died of signal N). Others may: SLURM ending a
// job signals every process of the job (proctrack/linuxproc, pgid), the shim too; it then dies without an
// exit code, its children are re-parented, and the container's cgroup is what still finds them.
import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import { readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { diskUsage, outputDiskUsage } from './du.js';
import type { Cgroup } from './cgroup.js';
import {
  descendants,
  descendantsUsage,
  isAlive,
  parentsOf,
  processGroupMembers,
  processGroupUsage,
  processRef,
  type ProcessRef,
} from './procfs.js';
import { collectOnce, pollUntilEnded, saveResult } from './result-file.js';
import { tailFiles } from './tail.js';
import type { ExitInfo, OutputChunk, RunHandle, Usage } from './types.js';

// $1 work dir, $2 space-separated cgroup.procs files to join ('' = none), $3 cwd, $4 a file of options for
// the command to read on fd 3 ('' = none; a sandbox's, holding the container's environment: opened, then
// removed at once); then the command. Output is appended (>>) so a shim restarted by hand never truncates
// what was captured; the shim's own files are created 0600 (umask 077), the command runs with umask 022.
// The command runs as an asynchronous list: for a foreground command killed by a signal, sh writes "Killed"
// into the command's stderr file; the price is that the command starts with SIGINT and SIGQUIT ignored
// (POSIX, no job control), which Berth never sends.
const SHIM_SCRIPT = `IFS=' '; umask 077; w=$1; procs=$2; cwd=$3; args=$4; shift 4
for f in $procs; do echo $$ > "$f" || { echo "berth: cannot join cgroup $f" >>"$w/stderr"; echo 125 >"$w/exit"; exit 125; }; done
cd "$cwd" || { echo "berth: cannot cd to $cwd" >>"$w/stderr"; echo 126 >"$w/exit"; exit 126; }
if [ -n "$args" ]; then exec 3<"$args" || { echo 125 >"$w/exit"; exit 125; }; rm -f "$args"; fi
: >>"$w/stdout"; : >>"$w/stderr"
(umask 022; exec "$@") </dev/null >>"$w/stdout" 2>>"$w/stderr" &
exec 3<&-
wait $!
echo $? >"$w/exit"`;

/** What a file-backed runtime records in run.json so that a new agent can re-attach. */
export interface RunState {
  runtime: string;
  id: string;
  shim: ProcessRef;
  startedAt: number;
  /** cgroup path below the hierarchy roots, or null when running without limits. */
  cgroup: string | null;
  /**
   * The command runs in a sandbox (sandbox.ts) whose own two processes are the shim's child and grandchild
   * (or, restored by CRIU, below the restore's wrapper and criu: process-criu.ts): signals other than
   * SIGKILL skip them, and without a cgroup the container is the shim's descendants.
   */
  sandboxed?: boolean;
  warning: string | null;
  /** Runtime-specific facts (runc: bundle dir, container name). */
  extra: Record<string, string>;
}

/** Starts the shim for `command` and returns it with its identity. */
export async function spawnShim(opts: {
  workDir: string;
  command: string[];
  env: Record<string, string>;
  cwd: string;
  cgroupProcs: string[];
  /** A file the command reads on fd 3 (the shim opens it, then removes it before the command starts). */
  fd3File?: string;
}): Promise<{ child: ChildProcess; ref: ProcessRef }> {
  const child = spawn(
    '/bin/sh',
    [
      '-c',
      SHIM_SCRIPT,
      'berth-shim',
      opts.workDir,
      opts.cgroupProcs.join(' '),
      opts.cwd,
      opts.fd3File ?? '',
      ...opts.command,
    ],
    {
      detached: true, // own process group: the agent's terminal signals do not reach it, and it outlives the agent
      stdio: 'ignore',
      env: opts.env,
    },
  );
  const pid = await new Promise<number>((resolve, reject) => {
    child.once('spawn', () => resolve(child.pid!));
    child.once('error', reject);
  });
  child.unref();
  // The shim joins its cgroups itself before it starts the command (the command is never outside its
  // limits); the agent places it there too, so that when start() returns the shim is in its group
  // (a loaded host may not have run the shim's first line yet). Joining twice is harmless.
  // The joins (one per hierarchy under cgroup v1) and the shim's identity are read all at once.
  const [ref] = await Promise.all([processRef(pid), ...opts.cgroupProcs.map((f) => joinCgroup(f, pid))]);
  // The shim may already have exited (e.g. `true`); its start time then does not matter.
  return { child, ref: ref ?? { pid, startTicks: -1 } };
}

/**
 * Writes `pid` into a cgroup.procs file, best effort: the shim's own join is the one that counts, and a
 * failure there ends the container with exit code 125 and a message in its stderr (an exited shim: ESRCH).
 */
async function joinCgroup(procsFile: string, pid: number): Promise<void> {
  await writeFile(procsFile, String(pid)).catch(() => undefined);
}

export async function writeRunState(workDir: string, state: RunState): Promise<void> {
  const tmp = join(workDir, 'run.json.tmp');
  await writeFile(tmp, JSON.stringify(state), { mode: 0o600 });
  await rename(tmp, join(workDir, 'run.json'));
}

/**
 * Removes what an earlier start in the same work dir left (a retried start): its exit code and result
 * would make the new container look finished at once, its output would prefix the new output.
 */
export async function clearRunFiles(workDir: string, more: readonly string[] = []): Promise<void> {
  for (const f of [
    'exit',
    'result.json',
    'run.json',
    'stdout',
    'stderr',
    'sandbox.args',
    MOVED_FILE,
    ...more,
  ])
    await rm(join(workDir, f), { force: true });
}

/**
 * Written by a runtime's whole-state save before it ends the container (process-criu.ts, vm.ts): the
 * checkpoint directory. The end is recorded as a kill; wait() reports no exit code and "checkpointed to DIR".
 */
export const MOVED_FILE = 'moved';

export async function readRunState(workDir: string): Promise<RunState | null> {
  try {
    return JSON.parse(await readFile(join(workDir, 'run.json'), 'utf8')) as RunState;
  } catch {
    return null;
  }
}

/** Runtime-specific parts of a shim-based handle. */
export interface ShimHooks {
  cgroup: Cgroup | null;
  /** Directory whose size is the container's scratch usage. */
  scratchDir: string;
  /**
   * Whether the container's command runs yet, for runtimes that start it after start() returned (runc);
   * by default, whether a process other than the shim (and a sandbox's own) is in its cgroup (or, without
   * one, among the shim's descendants or in its process group).
   */
  ready?(): Promise<boolean>;
  /** Releases runtime resources after the exit (runc: delete the container, unmount the rootfs). */
  finalize?(): Promise<void>;
}

/** Exit code of a finished shim, or null while it runs (or if it died without writing one). */
async function readExitCode(workDir: string): Promise<number | null> {
  const text = await readFile(join(workDir, 'exit'), 'utf8').catch(() => '');
  return /^\d+\n$/.test(text) ? Number(text.trim()) : null;
}

/** A RunHandle over a shim: the same code serves a fresh start and a re-attach after an agent restart. */
export class ShimHandle implements RunHandle {
  readonly id: string;
  readonly runtime: string;
  readonly warning: string | null;
  private waiting: Promise<ExitInfo> | null = null;
  private exited: Promise<void> | null;
  private done = false;
  /** The container's command is running (see started()). */
  private ready = false;
  /** Stopped with SIGSTOP by freeze() (only without a cgroup). */
  private stopped = false;
  /** Usage sampled from /proc when there is no cgroup to ask. */
  private readonly sampled = { cpuSeconds: 0, peakRamBytes: 0 };

  constructor(
    private readonly state: RunState,
    private readonly workDir: string,
    private readonly hooks: ShimHooks,
    child?: ChildProcess,
  ) {
    this.id = state.id;
    this.runtime = state.runtime;
    this.warning = state.warning;
    // A shim killed by a signal has no exit code, only a signalCode: it was signalled, not by Berth, before
    // this handle existed (a SLURM job's end signals every process of the job, the shim too), and its 'exit'
    // event has passed. Awaiting that event would never settle: the exit would not be collected, and its
    // cgroup, where the rest of the container may still run, would be neither emptied nor removed.
    this.exited = child
      ? new Promise((r) =>
          child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', () => r()),
        )
      : null;
  }

  /** Its work dir, cgroup and run.json's runtime-specific facts (what a whole-state save reads). */
  get facts(): { workDir: string; cgroup: Cgroup | null; extra: Record<string, string> } {
    return { workDir: this.workDir, cgroup: this.hooks.cgroup, extra: this.state.extra };
  }

  /**
   * Says that the container is being moved to the checkpoint directory `dir` (a whole-state save, which
   * then ends it): wait() reports no exit code and the reason "checkpointed to DIR". null: it is not (the
   * save failed, the container runs on).
   */
  async movedTo(dir: string | null): Promise<void> {
    if (dir === null) await rm(join(this.workDir, MOVED_FILE), { force: true });
    else await writeFile(join(this.workDir, MOVED_FILE), dir);
  }

  /** True once the shim has finished (exit code written, or the shim is gone). */
  private async shimEnded(): Promise<boolean> {
    if ((await readExitCode(this.workDir)) !== null) return true;
    return !(await isAlive(this.state.shim));
  }

  wait(): Promise<ExitInfo> {
    this.waiting ??= collectOnce(this.workDir, () => this.collect()).then((info) => {
      this.done = true;
      return info;
    });
    return this.waiting;
  }

  private async collect(): Promise<ExitInfo> {
    await pollUntilEnded(
      () => this.shimEnded(),
      () => this.exited,
    );
    const moved = await readFile(join(this.workDir, MOVED_FILE), 'utf8').catch(() => null);
    const exitCode = moved === null ? await readExitCode(this.workDir) : null;
    const exitStat = await stat(join(this.workDir, 'exit')).catch(() => null);
    const wallMs = Math.max(0, Math.round((exitStat?.mtimeMs ?? Date.now()) - this.state.startedAt));
    // The shim writes the exit code just before it exits; its cgroup can only be removed once it is gone.
    if (this.exited) await keptAlive(this.exited);
    else await until(async () => !(await isAlive(this.state.shim)), 5000, 5);
    // Processes the command left behind (daemonized children) end with it.
    const { cgroup } = this.hooks;
    if (cgroup) await cgroup.killAll(5000);
    const stats = cgroup ? await cgroup.stats() : null;
    if (this.hooks.finalize) await this.hooks.finalize();
    if (cgroup) await cgroup.remove();
    const info: ExitInfo = {
      exitCode,
      oomKilled: (stats?.oomKills ?? 0) > 0,
      // Without a cgroup, the best known is what usage() sampled while it ran.
      peakRamBytes: stats?.peakRamBytes ?? this.sampled.peakRamBytes,
      cpuSeconds: stats?.cpuSeconds ?? this.sampled.cpuSeconds,
      wallMs,
    };
    if (exitCode !== null && exitCode > 128) {
      const name = Object.entries(constants.signals).find(([, n]) => n === exitCode - 128)?.[0];
      if (name) info.signal = name;
    }
    if (moved !== null) info.reason = `checkpointed to ${moved}`;
    else if (exitCode === null) info.reason = 'the container shim disappeared without recording an exit code';
    await saveResult(this.workDir, info);
    this.done = true;
    return info;
  }

  /**
   * The container's processes: its cgroup's, or without one the shim's descendants (sandboxed) or process
   * group; never the shim.
   */
  private async commandPids(): Promise<number[]> {
    const shim = this.state.shim.pid;
    const all = this.hooks.cgroup
      ? await this.hooks.cgroup.pids()
      : this.state.sandboxed
        ? await descendants(shim)
        : await processGroupMembers(shim);
    return all.filter((pid) => pid !== shim);
  }

  /**
   * The processes a signal goes to: the container's, except, for any signal but SIGKILL, the sandbox's own
   * (a TERM to them would end the sandbox, and the command with SIGKILL, at once; a STOP would stop nothing
   * that runs the container's work).
   */
  private async signalTargets(sig: NodeJS.Signals): Promise<number[]> {
    const pids = await this.commandPids();
    if (!this.state.sandboxed || sig === 'SIGKILL') return pids;
    const helpers = new Set(sandboxHelpers(this.state.shim.pid, await parentsOf(pids)));
    return pids.filter((pid) => !helpers.has(pid));
  }

  /**
   * Resolves once the container's command runs (or the shim ended): the shim starts it, and runc creates
   * the container a moment after start() returned. A signal before that would find nothing to act on, and
   * a freeze in the middle of runc's own set-up makes the start fail. Then true while the shim lives.
   */
  private async started(): Promise<boolean> {
    // By default: a process of the command's own runs (in a sandbox, bwrap's two come first).
    const ready = this.hooks.ready ?? (async () => (await this.signalTargets('SIGTERM')).length > 0);
    if (!this.ready)
      await until(async () => (this.ready = await ready()) || (await this.shimEnded()), 10_000, 5);
    return !(await this.shimEnded());
  }

  async signal(sig: NodeJS.Signals): Promise<void> {
    if (this.done || !(await this.started())) return;
    for (const pid of await this.signalTargets(sig)) killQuietly(pid, sig);
    if (this.hooks.cgroup) {
      if (await this.hooks.cgroup.isFrozen()) await this.hooks.cgroup.thaw();
    } else if (this.stopped) {
      await this.thaw();
    }
  }

  async freeze(): Promise<void> {
    if (this.done || !(await this.started())) return;
    if (this.hooks.cgroup) return this.hooks.cgroup.freeze();
    // Without a cgroup: SIGSTOP, which stops the container's processes as a freeze would, except that a
    // parent waiting for them can notice, and processes that left the group go on. One forked between the
    // listing and the stop (a sandbox still starting the command) is caught by listing again until a listing
    // finds nothing new.
    const stopped = new Set<number>();
    for (let round = 0; round < 20; round++) {
      const fresh = (await this.signalTargets('SIGSTOP')).filter((pid) => !stopped.has(pid));
      if (fresh.length === 0) break;
      for (const pid of fresh) {
        killQuietly(pid, 'SIGSTOP');
        stopped.add(pid);
      }
    }
    this.stopped = true;
  }

  async thaw(): Promise<void> {
    if (this.done) return;
    if (this.hooks.cgroup) {
      if (await this.hooks.cgroup.exists()) await this.hooks.cgroup.thaw();
      return;
    }
    for (const pid of await this.signalTargets('SIGCONT')) killQuietly(pid, 'SIGCONT');
    this.stopped = false;
  }

  async usage(): Promise<Usage> {
    const scratchBytes = await diskUsage(this.hooks.scratchDir);
    const outputBytes = await outputDiskUsage(this.workDir);
    if (this.hooks.cgroup) {
      const stats = this.done ? null : await this.hooks.cgroup.stats();
      return {
        cpuSeconds: stats?.cpuSeconds ?? 0,
        ramBytes: stats?.ramBytes ?? 0,
        peakRamBytes: stats?.peakRamBytes ?? 0,
        scratchBytes,
        outputBytes,
      };
    }
    // Without a cgroup: what the container's live processes use now; the peak is the highest sample.
    const shim = this.state.shim.pid;
    const now = this.done
      ? { cpuSeconds: 0, ramBytes: 0 }
      : this.state.sandboxed
        ? await descendantsUsage(shim)
        : await processGroupUsage(shim);
    this.sampled.cpuSeconds = Math.max(this.sampled.cpuSeconds, now.cpuSeconds);
    this.sampled.peakRamBytes = Math.max(this.sampled.peakRamBytes, now.ramBytes);
    return {
      cpuSeconds: this.sampled.cpuSeconds,
      ramBytes: now.ramBytes,
      peakRamBytes: this.sampled.peakRamBytes,
      scratchBytes,
      outputBytes,
    };
  }

  output(): AsyncIterable<OutputChunk> {
    return tailFiles({ stdout: join(this.workDir, 'stdout'), stderr: join(this.workDir, 'stderr') }, () =>
      this.shimEnded(),
    );
  }
}

/**
 * The sandbox's own processes among the container's: bwrap (the shim's child) and the namespace's init
 * (bwrap's child), told apart by parentage, which a process inside cannot change.
 */
function sandboxHelpers(shim: number, parents: Map<number, number>): number[] {
  const outer = [...parents].filter(([, ppid]) => ppid === shim).map(([pid]) => pid);
  const inner = [...parents].filter(([, ppid]) => outer.includes(ppid)).map(([pid]) => pid);
  return [...outer, ...inner];
}

/** Polls `cond` every `stepMs` until it holds or `ms` passed (then gives up quietly: clean-up is best effort). */
/**
 * Awaits `p` holding a timer meanwhile. The shim's child is unref'd (the shim outlives the agent), so its
 * 'exit' event alone keeps no process up: a process with nothing else to do (a one-shot agent, a test
 * harness) would end with the wait unsettled when the shim has written its exit code but not yet exited.
 */
async function keptAlive<T>(p: Promise<T>): Promise<T> {
  const timer = setInterval(() => {}, 1_000);
  try {
    return await p;
  } finally {
    clearInterval(timer);
  }
}

async function until(cond: () => Promise<boolean>, ms: number, stepMs: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, stepMs));
}

function killQuietly(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}
