/**
 * The one interface through which the agent runs a container (DESIGN §8).
 *
 * A runtime starts a container from a RunSpec and returns a RunHandle. Everything a restarted agent
 * needs to find the container again lives in the container's work dir (output files, the exit code,
 * the runtime's own state file) or in the runtime's daemon (docker), so `reattach(id, workDir)` can
 * rebuild the handle after the agent itself was killed.
 *
 * Work dir layout (process and runc; docker keeps state in the daemon and copies output here):
 *   run.json     what was started and how (runtime name, shim pid, cgroup, start time)
 *   stdout       the container's standard output, complete
 *   stderr       the container's standard error, complete
 *   exit         the exit code, written by the shim when the container ends (durable across agent restarts)
 *   result.json  the final ExitInfo, written once the runtime has collected usage and cleaned up
 *   scratch/     the container's writable space (process: its cwd; runc: the overlay's upper dir)
 */

/** What to run and under which hard limits. */
export interface RunSpec {
  /** Container id; unique on the machine; letters, digits, '.', '_' and '-' only. */
  id: string;
  /** null or "" = no image (process runtime); an image name; or a path to a root-filesystem tarball. */
  image: string | null;
  command: string[];
  env: Record<string, string>;
  /** Working directory: inside the image for image runtimes; default work dir's scratch/ for process. */
  cwd?: string;
  /** CPUs, may be fractional: enforced as a CFS quota. */
  vcpus: number;
  /** Memory limit in bytes (memory and memory+swap). */
  ram: number;
  /** Scratch limit in bytes; 0 = unlimited. Enforced by the supervisor, measured by the runtime. */
  scratch: number;
  gpus: number;
  /** An opportunistic container (issue 16): it may be frozen when guaranteed ones claim their capacity. */
  opportunistic?: boolean;
  /** A directory the agent created for this container; the runtime keeps its files there. */
  workDir: string;
}

/** How a container ended. */
export interface ExitInfo {
  /** The exit code; 128+N when killed by signal N; null when it could not be learned. */
  exitCode: number | null;
  /** The signal name when the exit code says the process was killed by a signal (e.g. "SIGKILL"). */
  signal?: string;
  /** True when the kernel's OOM killer killed a process of the container (memory limit reached). */
  oomKilled: boolean;
  peakRamBytes: number;
  cpuSeconds: number;
  wallMs: number;
  /** Why Berth ended it, when it did: "killed: max_run_time 10s exceeded", "cancelled", ... */
  reason?: string;
}

/** A usage sample of a running container. */
export interface Usage {
  cpuSeconds: number;
  ramBytes: number;
  peakRamBytes: number;
  /** The container's own files (its scratch dir, its writable layer). */
  scratchBytes: number;
  /**
   * Disk its stdout and stderr files take on the instance (what the agent has not shipped or given back
   * yet: log-limit.ts). Counts against the scratch limit with scratchBytes.
   */
  outputBytes?: number;
}

/** One piece of a container's output. */
export interface OutputChunk {
  stream: 'stdout' | 'stderr';
  data: Buffer;
}

/** A started (or re-attached) container. */
export interface RunHandle {
  readonly id: string;
  readonly runtime: string;
  /** Set when the runtime had to run without a limit it was asked for (the agent logs it). */
  readonly warning: string | null;
  /** Resolves once the container ended and its resources (cgroups, runc state, docker container) are gone. */
  wait(): Promise<ExitInfo>;
  /**
   * Sends a signal to every process of the container. No-op once it ended. A frozen container is thawed
   * after the signal was sent, so that the signal takes effect (a kill never waits for a thaw).
   */
  signal(sig: NodeJS.Signals): Promise<void>;
  /**
   * Freezes every process of the container where it stands (the cgroup freezer, or the engine's pause): it
   * gets no CPU and sees no signal, and keeps its memory. Resolves once the kernel (or the engine) reports
   * the whole container frozen: the time this takes is the freeze latency. No-op once it ended.
   */
  freeze(): Promise<void>;
  /** Lets a frozen container run on; resolves once it runs again. No-op when not frozen or ended. */
  thaw(): Promise<void>;
  usage(): Promise<Usage>;
  /**
   * The container's output from the beginning, each stream complete and in order; ends after the
   * container ended and everything was read. Order between stdout and stderr is best-effort.
   */
  output(): AsyncIterable<OutputChunk>;
}

/** A way of running containers: docker, podman, runc, process, vm. */
export interface Runtime {
  readonly name: string;
  /** null when usable here, else why not (shown to operators and in skipped tests). */
  available(): Promise<string | null>;
  start(spec: RunSpec): Promise<RunHandle>;
  /**
   * The start in two steps, where the runtime can split it: everything but the spawn (checks, directories,
   * cgroup, sandbox plan), then the spawn alone (PreparedStart.start). The agent prepares while the start
   * is reported and spawns only once it was accepted; a refused start abandons what was prepared. Absent:
   * the agent calls start() after the report.
   */
  prepare?(spec: RunSpec): Promise<PreparedStart>;
  /** Finds a container started earlier (possibly by a previous agent); null if this runtime has no trace of it. */
  reattach(id: string, workDir: string): Promise<RunHandle | null>;
  /**
   * Stops and removes whatever a start that never finished recording may have left (an agent killed
   * between starting the container and writing run.json): reattach found no trace, but a process or an
   * engine container may be running. Best effort; a no-op when nothing is there.
   */
  discard(id: string, workDir: string): Promise<void>;
  /**
   * Whole-state checkpoints (vm: the guest's memory, devices and disk; process, unsandboxed and only where
   * the agent was told to and CRIU works: the process tree and its scratch), where the runtime can take them:
   * the agent's reclaim saves a victim this way instead of asking it for an application checkpoint, and
   * the next attempt, on any instance, resumes it where it stood. Absent: the runtime cannot.
   */
  readonly wholeState?: WholeState;
}

/** A container made ready by Runtime.prepare: only its spawn is left. Exactly one of the two is called. */
export interface PreparedStart {
  /** Spawns it; what Runtime.start returns. A failure leaves nothing behind (as start's does). */
  start(): Promise<RunHandle>;
  /** Removes what prepare made (its cgroup, its run files): it will not run. Never throws. */
  abandon(): Promise<void>;
}

/** A runtime's whole-state checkpoints (Runtime.wholeState). */
export interface WholeState {
  /**
   * Saves the whole running (or frozen) container `handle` into the directory `dir` (its files are the
   * checkpoint, carried as they are to another instance) and ends it there: its wait() then resolves with
   * no exit code. Throws when the save failed (the container is then left frozen or running).
   */
  save(handle: RunHandle, dir: string): Promise<{ ms: number; bytes: number }>;
  /**
   * Resumes the container of `spec` (its id, in its work dir) from a checkpoint directory `dir` (save()'s
   * files, possibly from another instance); resolves once it runs on. Its limits are `spec`'s, the request
   * of the attempt it resumes (grown since the save, by ram_retry_factor for one), never the checkpoint's.
   * Throws when `dir` is not a checkpoint this runtime can resume here (another runtime's, another guest
   * build's) or not one of `spec`'s container (another image or command, a guest of another shape).
   */
  restore(spec: RunSpec, dir: string): Promise<RunHandle>;
}

const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** Checks a RunSpec; throws a RunSpecError naming the field and what was expected. */
export function validateSpec(spec: RunSpec): void {
  const bad = (field: string, expected: string, got: unknown): never => {
    throw new RunSpecError(`${field}: expected ${expected}, got ${JSON.stringify(got)}`);
  };
  if (typeof spec.id !== 'string' || !ID_RE.test(spec.id))
    bad('id', "letters, digits, '.', '_' or '-' (at most 128)", spec.id);
  if (
    !Array.isArray(spec.command) ||
    spec.command.length === 0 ||
    spec.command.some((a) => typeof a !== 'string')
  )
    bad('command', 'a non-empty list of strings', spec.command);
  if (spec.image !== null && typeof spec.image !== 'string') bad('image', 'a string or null', spec.image);
  if (typeof spec.env !== 'object' || spec.env === null) bad('env', 'an object of strings', spec.env);
  for (const [k, v] of Object.entries(spec.env))
    if (typeof v !== 'string' || k === '' || k.includes('='))
      bad(`env.${k}`, 'a string value and a name without "="', v);
  if (!(typeof spec.vcpus === 'number' && spec.vcpus > 0 && Number.isFinite(spec.vcpus)))
    bad('vcpus', 'a number > 0', spec.vcpus);
  if (!(Number.isSafeInteger(spec.ram) && spec.ram >= 4 * 1024 * 1024))
    bad('ram', 'bytes, at least 4MiB', spec.ram);
  if (!(Number.isSafeInteger(spec.scratch) && spec.scratch >= 0)) bad('scratch', 'bytes >= 0', spec.scratch);
  if (!(Number.isInteger(spec.gpus) && spec.gpus >= 0)) bad('gpus', 'an integer >= 0', spec.gpus);
  if (typeof spec.workDir !== 'string' || !spec.workDir.startsWith('/'))
    bad('workDir', 'an absolute path', spec.workDir);
  if (spec.cwd !== undefined && (typeof spec.cwd !== 'string' || !spec.cwd.startsWith('/')))
    bad('cwd', 'an absolute path', spec.cwd);
}

/** A RunSpec the runtime cannot accept (the agent cancels the container `perm`). */
export class RunSpecError extends Error {
  readonly failureClass = 'perm' as const;
  override name = 'RunSpecError';
}
