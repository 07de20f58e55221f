// One container on this agent, from the start order to the acknowledged exit (DESIGN §5, §8):
// journal it, report start (refused → never run it), start it on the runtime, supervise it
// (max_run_time, scratch, kill grace), ship its logs, report the exit. A restarted agent builds a runner
// from the journal entry instead (resume), re-attaches to the container and carries on where it stopped.
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { errorFields, type Logger } from '../log/logger.js';
import { oomWarning } from '../model/exit.js';
import { reclaimedReason } from '../model/retry.js';
import { Supervisor } from './supervisor.js';
import type { StartFailure } from './runtimes/errors.js';
import type { ExitInfo, RunHandle, Runtime, RunSpec, Usage, WholeState } from './runtimes/types.js';
import {
  AbortedError,
  ApiHttpError,
  retrying,
  type AgentClient,
  type CompleteBody,
  type StartOrder,
} from './client.js';
import { newLogCursor, type HandBackCause, type Journal, type JournalEntry } from './journal.js';
import { LogShipper, type ShipperOptions } from './log-shipper.js';
import {
  CHECKPOINT_SIGNAL,
  CHECKPOINT_SUBDIR,
  WHOLE_STATE_SUBDIR,
  type ApiCheckpoints,
} from './checkpoint.js';

/** How the agent chooses runtimes: by image for new containers, by name for re-attach. */
export interface RuntimeChoice {
  pick(image: string | null): Runtime;
  byName(name: string): Runtime | undefined;
}

/** What every runner shares with the agent. */
export interface RunnerContext {
  client: AgentClient;
  journal: Journal;
  runtimes: RuntimeChoice;
  /** Parent of each container's directory (work-dir/containers). */
  containersDir: string;
  killGraceMs: number;
  sampleIntervalMs: number;
  shipper: ShipperOptions;
  /** Aborted when the agent stops: runners stop reporting and leave their containers to the next agent. */
  stop: AbortSignal;
  /** The agent's logger; each runner logs through a child carrying its container id. */
  log: Logger;
  /** Containers' checkpoints, kept by the API for their next attempts (checkpoint.ts); null: none. */
  checkpoints?: ApiCheckpoints | null;
  /** How long a reclaimed container may take to write its checkpoint and exit after SIGUSR1. */
  checkpointWaitMs?: number;
}

export class ContainerRunner {
  private supervisor: Supervisor | null = null;
  private shipper: LogShipper | null = null;
  /** A kill requested before the container was started or supervised. */
  private killRequested: string | null = null;
  /** What became of an earlier attempt's checkpoint (said in its log once supervised). */
  private restoredCheckpoint: string | null = null;
  /** Why a reclaim's whole-state save failed (its end's reason says so), or null. */
  private wholeNotSaved: string | null = null;
  /** The latest usage sample while it runs. */
  lastUsage: Usage | null = null;
  /** When the runtime had started it, and when its exit was seen (ms; the exit's log line: bench/e2e.ts). */
  private readonly seen: { ran?: number; exited?: number } = {};
  /** Resolves when the runner is finished with the container (reported, or left for the next agent). */
  readonly done: Promise<void>;
  private readonly log: Logger;

  private constructor(
    private readonly ctx: RunnerContext,
    readonly id: string,
    body: () => Promise<void>,
  ) {
    this.log = ctx.log.child({ container: id });
    // Deferred: `body` refers to the runner, which exists only once this constructor returned.
    this.done = Promise.resolve()
      .then(body)
      .catch((err: Error) => this.log.error({ err }, 'the runner failed'));
  }

  /** Starts a container from a ping's start order. */
  static launch(ctx: RunnerContext, order: StartOrder): ContainerRunner {
    let self: ContainerRunner;
    // eslint-disable-next-line prefer-const
    self = new ContainerRunner(ctx, order.id, () => self.runNew(order));
    return self;
  }

  /** Carries on with a container found in the journal of an earlier agent. */
  static resume(ctx: RunnerContext, entry: JournalEntry): ContainerRunner {
    let self: ContainerRunner;
    // eslint-disable-next-line prefer-const
    self = new ContainerRunner(ctx, entry.id, () => self.runResumed(entry));
    return self;
  }

  /** The container is on the ping's kill list: SIGTERM now, SIGKILL after the grace. */
  kill(reason = 'cancelled'): void {
    const entry = this.ctx.journal.containers.get(this.id);
    if (entry && !entry.killReason) {
      entry.killReason = reason;
      void this.ctx.journal
        .save()
        .catch((err: unknown) => this.log.warn(errorFields(err), 'saving the kill in the journal failed'));
    }
    if (this.supervisor)
      void this.supervisor
        .cancel(reason)
        .catch((err: unknown) => this.log.warn(errorFields(err), 'stopping the container failed'));
    else this.killRequested ??= reason;
  }

  /**
   * Its host is going away (a spot interruption notice, a SLURM job ending): stop the container (SIGTERM,
   * then SIGKILL after the grace) and report it as a temp cancel with `reason`, so that it is retried
   * elsewhere, instead of its exit.
   */
  handBack(cause: HandBackCause, reason: string): void {
    const entry = this.ctx.journal.containers.get(this.id);
    if (entry && !entry.handBack) {
      entry.handBack = { cause, reason };
      // kill() saves only a first kill reason; a container already being killed must keep this too.
      if (entry.killReason) void this.ctx.journal.save().catch(() => {});
    }
    this.kill(reason);
  }

  /** Whether the container runs in borrowed capacity (the pressure watcher may reclaim it). */
  get opportunistic(): boolean {
    return this.ctx.journal.containers.get(this.id)?.opportunistic === true;
  }

  /** Whether it is running under supervision (a reclaim can freeze it). */
  get supervised(): boolean {
    return this.supervisor !== null;
  }

  /** When it started (ms since the epoch): the pressure watcher ends the most recent first among equals. */
  get startedAt(): number {
    return this.ctx.journal.containers.get(this.id)?.startedAt ?? Date.now();
  }

  /** The pressure watcher freezes every opportunistic container at once, before choosing which to end. */
  async freeze(): Promise<void> {
    await this.supervisor?.handle.freeze();
  }

  /** Not chosen to end: it runs on, unless its user paused it (berth pause) or it is being reclaimed. */
  async thaw(): Promise<void> {
    const entry = this.ctx.journal.containers.get(this.id);
    if (!this.supervisor || !entry || entry.paused || entry.handBack) return;
    await this.supervisor.handle.thaw();
  }

  /** Its memory use now and its CPU use since it started (vcpus), for the pressure watcher's choice. */
  async usage(): Promise<{ ramBytes: number; vcpus: number }> {
    const sup = this.supervisor;
    if (!sup) return { ramBytes: 0, vcpus: 0 };
    const u = await sup.handle.usage();
    const seconds = (Date.now() - this.startedAt) / 1000;
    return { ramBytes: u.ramBytes, vcpus: seconds > 0 ? u.cpuSeconds / seconds : 0 };
  }

  /**
   * Guaranteed containers claim the capacity this opportunistic one borrowed: freeze it (at once, if the
   * watcher has not yet), then stop it and report it as a reclaimed temp cancel (retried, spending no retry).
   */
  async reclaim(why: string): Promise<void> {
    const entry = this.ctx.journal.containers.get(this.id);
    const sup = this.supervisor;
    if (!entry || !sup || entry.handBack) return;
    entry.handBack = { cause: 'reclaim', reason: reclaimedReason(why) };
    const frozen = sup.handle.freeze();
    void this.ctx.journal.save().catch(() => {});
    await frozen;
    void this.shipper?.system(`reclaimed: frozen (${why}); stopping it to be retried`).catch(() => {});
    entry.killReason ??= entry.handBack.reason;
    void this.endReclaimed(entry, sup);
  }

  /**
   * A frozen container keeps its memory: end it now, in the way checkpointWay() chose. Whole state: its
   * runtime saves it, still frozen, and ends it (a failed save falls through to the kill, said in its end's
   * reason). Application-assisted: it is asked to write its checkpoint (SIGUSR1, which thaws it) and given
   * checkpointWaitMs to exit. Otherwise SIGKILL is sent before any thaw, so it never runs again.
   * supervise() keeps the checkpoint and reports the end as a reclaimed temp cancel.
   */
  private async endReclaimed(entry: JournalEntry, sup: Supervisor): Promise<void> {
    const way = this.checkpointWay(entry);
    const waitMs = this.ctx.checkpointWaitMs ?? 0;
    if (way?.kind === 'whole') {
      if (await this.saveWhole(way, sup)) return;
    } else if (way && waitMs > 0) {
      await sup.handle.signal(CHECKPOINT_SIGNAL).catch(() => {});
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([sup.wait().catch(() => {}), new Promise((r) => (timer = setTimeout(r, waitMs)))]);
      clearTimeout(timer);
    }
    await sup.handle.signal('SIGKILL').catch(() => {});
  }

  /** The runtime saves the whole container into `way.dir` and ends it; false (and why, kept) when it failed. */
  private async saveWhole(way: CheckpointWay & { kind: 'whole' }, sup: Supervisor): Promise<boolean> {
    try {
      const saved = await way.whole.save(sup.handle, way.dir);
      void this.shipper
        ?.system(
          `whole state saved by the ${sup.handle.runtime} runtime: ${saved.bytes} bytes in ${Math.round(saved.ms)} ms`,
        )
        .catch(() => {});
      return true;
    } catch (err) {
      this.log.warn(errorFields(err), 'the whole-state save failed');
      this.wholeNotSaved = `whole-state save failed: ${(err as Error).message}`;
      await rm(way.dir, { recursive: true, force: true }).catch(() => {});
      return false;
    }
  }

  /**
   * How this container's state is carried to its next attempt — the one place that chooses. A runtime that
   * saves whole containers (vm: Runtime.wholeState) saves it on a reclaim (`whole`, a directory beside its
   * run dir); a process container writes its own ($BERTH_CHECKPOINT_DIR, `app`, when it ends without
   * success); others carry nothing. Null too without a checkpoint store or a request.
   */
  private checkpointWay(entry: JournalEntry): CheckpointWay | null {
    if (!this.ctx.checkpoints || !entry.requestId) return null;
    const whole = this.ctx.runtimes.byName(entry.runtime)?.wholeState;
    if (whole) return { kind: 'whole', dir: join(this.dir(), WHOLE_STATE_SUBDIR), whole };
    if (entry.runtime === 'process')
      return { kind: 'app', dir: join(entry.runDir, 'scratch', CHECKPOINT_SUBDIR) };
    return null;
  }

  /**
   * After the container ended without success: send its checkpoint to the API for the next attempt (the
   * request's end drops it there). Returns why a checkpoint it wrote was not kept (for its end's reason,
   * which its events show), or null.
   */
  private async keepCheckpoint(
    entry: JournalEntry,
    info: ExitInfo,
    shipper: LogShipper,
  ): Promise<string | null> {
    const way = this.checkpointWay(entry);
    const store = this.ctx.checkpoints;
    const reclaimed = entry.handBack?.cause === 'reclaim';
    // A whole state is saved by a reclaim only; an application writes its own whenever it fails.
    if (!way || !store || (way.kind === 'whole' ? !reclaimed : info.exitCode === 0 && !entry.handBack))
      return null;
    if (this.wholeNotSaved) return this.wholeNotSaved;
    try {
      const k = await store.keep(entry, way.dir, reclaimed, way.kind === 'whole' ? entry.runtime : undefined);
      if (k) await shipper.system(k.line);
      return k && !k.kept ? k.line : null;
    } catch (err) {
      this.log.warn(errorFields(err), 'keeping its checkpoint failed');
      const line = `checkpoint not kept: ${(err as Error).message}`;
      await shipper.system(line).catch(() => {});
      return line;
    }
  }

  /**
   * Fills its checkpoint directory from the API when its request has a checkpoint: whether it did, and the
   * line for its log.
   */
  private async restoreCheckpoint(
    entry: JournalEntry,
    dir: string,
    order: StartOrder,
  ): Promise<{ restored: boolean; wholeState: string | null; line: string | null }> {
    try {
      const got = await this.ctx.checkpoints!.restore(entry, dir, order.checkpoint === true);
      return got === null
        ? { restored: false, wholeState: null, line: null }
        : {
            restored: true,
            wholeState: got.wholeState,
            line: `checkpoint restored from an earlier attempt (${got.bytes} bytes, downloaded and unpacked in ${Math.round(got.ms)} ms)`,
          };
    } catch (err) {
      this.log.warn(errorFields(err), 'restoring its checkpoint failed');
      return {
        restored: false,
        wholeState: null,
        line: `checkpoint not restored (starting without it): ${(err as Error).message}`,
      };
    }
  }

  /**
   * Starts the container: from the whole state an earlier attempt saved when there is one (its runtime
   * resumes it where it stood), else afresh (also when that resume fails: said in its log). A checkpoint
   * this runtime did not save whole (`wholeState`, as the API recorded its upload: null when the container
   * wrote it) is never resumed: its files would be loaded as a machine state or process images.
   */
  private async startOrResume(
    runtime: Runtime,
    spec: RunSpec,
    way: CheckpointWay | null,
    restored: { restored: boolean; wholeState: string | null } | null,
  ): Promise<RunHandle> {
    if (way?.kind !== 'whole') return runtime.start(spec);
    try {
      if (restored?.restored && restored.wholeState !== runtime.name) {
        this.restoredCheckpoint = `whole state not resumed (starting afresh): the checkpoint was ${restored.wholeState === null ? 'written by the container itself' : `saved whole by the ${restored.wholeState} runtime`}, not saved whole by the ${runtime.name} runtime`;
      } else if (restored?.restored) {
        const t0 = performance.now();
        const handle = await way.whole.restore(spec, way.dir);
        this.restoredCheckpoint = `${this.restoredCheckpoint ?? 'checkpoint restored'}; resumed from its whole state where it stood in ${Math.round(performance.now() - t0)} ms`;
        return handle;
      }
    } catch (err) {
      this.log.warn(errorFields(err), 'resuming its whole state failed');
      this.restoredCheckpoint = `whole state not resumed (starting afresh): ${(err as Error).message}`;
    } finally {
      // A later save must not find (and send) this one. Retried: the process runtime's restore resolves
      // at criu's pid file, and a `stats-restore` criu wrote into the images after it made the removal
      // fail once (`ENOTEMPTY: directory not empty, rmdir …/images`); criu's work dir is now the new work
      // dir (process-criu.ts RESTORE_SCRIPT), the retry covers whatever else a runtime writes late.
      await rm(way.dir, { recursive: true, force: true, maxRetries: 5 });
    }
    return runtime.start(spec);
  }

  /** Whether the container is frozen by berth pause (the agent reports it with its pings; in the journal). */
  get frozen(): boolean {
    return this.ctx.journal.containers.get(this.id)?.paused === true;
  }
  private freezing: Promise<void> = Promise.resolve();

  /**
   * berth pause / resume: freezes (`want` true) or thaws the container with its runtime (RunHandle.freeze,
   * thaw), one change at a time; resolves once the runtime reports it done. A container that has not
   * started yet, or has ended, is left alone (the next ping asks again while it is Running).
   */
  setFrozen(want: boolean): Promise<void> {
    this.freezing = this.freezing.then(async () => {
      const sup = this.supervisor;
      if (!sup || this.frozen === want) return;
      await (want ? sup.handle.freeze() : sup.handle.thaw());
      const entry = this.ctx.journal.containers.get(this.id);
      if (entry) {
        entry.paused = want;
        await this.ctx.journal.save();
      }
      this.log.info(want ? 'paused: frozen' : 'resumed: thawed');
    });
    return this.freezing.catch((err: unknown) =>
      this.log.warn(errorFields(err), want ? 'freezing failed' : 'thawing failed'),
    );
  }

  /**
   * SIGKILL at once (the node was declared failed: its containers already run elsewhere), and make sure that
   * nothing of it is left when this resolves: the agent exits next, and a one-shot agent's containers are
   * never re-attached.
   */
  async killNow(timeoutMs = 10_000): Promise<void> {
    this.killRequested ??= 'node failed';
    const sup = this.supervisor;
    if (sup) {
      await sup.handle.signal('SIGKILL').catch(() => {});
      // Wait (bounded) for the runtime to reap it, so that its processes and cgroup are gone.
      let timer: NodeJS.Timeout | undefined;
      const reaped = await Promise.race([
        sup.wait().then(
          () => true,
          () => false,
        ),
        new Promise<false>((r) => (timer = setTimeout(() => r(false), timeoutMs))),
      ]);
      clearTimeout(timer);
      if (reaped) return;
    }
    // Not started yet (its start may have made the cgroup), or not reaped in time: what a start cut short
    // leaves is removed the same way (its processes, found by its cgroup, killed; the cgroup removed).
    const entry = this.ctx.journal.containers.get(this.id);
    if (entry) await this.discardLeftovers(entry);
  }

  /** Kills what is left of the container (its processes, by its cgroup) and removes its cgroup. */
  private async discardLeftovers(entry: JournalEntry): Promise<void> {
    await this.ctx.runtimes
      .byName(entry.runtime)
      ?.discard(entry.id, entry.runDir)
      .catch((err: unknown) => this.log.warn(errorFields(err), 'discarding its leftovers failed'));
  }

  /**
   * Whether the container's lock token is still current (an empty log append is accepted): after a start
   * refused with 409, that means an earlier start attempt went through (a Locked container with a current
   * token always starts), while a cancelled or re-locked container has a revoked token.
   */
  private async stillOurs(entry: JournalEntry): Promise<boolean> {
    try {
      await retrying(() => this.ctx.client.logs(entry.id, entry.lockToken, []), { signal: this.ctx.stop });
      return true;
    } catch {
      return false;
    }
  }

  private dir(): string {
    return join(this.ctx.containersDir, this.id);
  }

  private async runNew(order: StartOrder): Promise<void> {
    const { ctx } = this;
    const runDir = join(this.dir(), 'run');
    await mkdir(runDir, { recursive: true, mode: 0o700 });
    const runtime = ctx.runtimes.pick(order.image);
    const entry: JournalEntry = {
      id: order.id,
      lockToken: order.lock_token,
      phase: 'starting',
      runtime: runtime.name,
      runDir,
      startedAt: Date.now(),
      maxRunTimeMs: order.max_run_time_ms,
      scratch: order.scratch,
      ...(order.opportunistic ? { opportunistic: true } : {}),
      ...(order.request_id ? { requestId: order.request_id } : {}),
      startReported: false,
      killReason: null,
      exit: null,
      log: newLogCursor(),
    };
    ctx.journal.containers.set(entry.id, entry);
    await ctx.journal.save();
    const way = this.checkpointWay(entry);
    const checkpointDir = way?.kind === 'app' ? way.dir : null;
    const spec: RunSpec = {
      id: order.id,
      image: order.image,
      command: order.command,
      env: {
        ...(order.env ?? {}),
        ...(order.secret_env ?? {}),
        ...(checkpointDir ? { BERTH_CHECKPOINT_DIR: checkpointDir } : {}),
      },
      ...(order.cwd ? { cwd: order.cwd } : {}),
      vcpus: order.vcpus,
      ram: order.ram,
      scratch: order.scratch,
      gpus: order.gpus,
      ...(order.opportunistic ? { opportunistic: true } : {}),
      workDir: runDir,
    };
    // Prepared (directories, cgroup, sandbox plan) while the start is reported: only the spawn waits for
    // the API's answer. A whole-state resume (startOrResume) has no prepare step.
    const preparing = runtime.prepare && way?.kind !== 'whole' ? runtime.prepare(spec) : null;
    void preparing?.catch(() => {}); // awaited below, or never (a refused start): its failure is the spawn's
    /** The start will not happen: what was prepared goes (a failed prepare left nothing). */
    const abandon = async () => (await preparing?.catch(() => null))?.abandon();
    try {
      // Started with the order (a one-shot agent's registration): nothing to report.
      if (!order.started)
        await retrying(() => ctx.client.start(order.id, order.lock_token), {
          signal: ctx.stop,
          onRetry: (err, d) =>
            this.log.warn({ ...errorFields(err), retry_ms: d }, 'start report failed; retrying'),
        });
    } catch (err) {
      if (err instanceof AbortedError) {
        await abandon();
        return; // the next agent finds it in the journal
      }
      if (!(err instanceof ApiHttpError && err.status === 409 && (await this.stillOurs(entry)))) {
        this.log.warn(errorFields(err), 'the API refused the start; not running it');
        await abandon();
        await this.forget();
        return;
      }
      // An earlier attempt was accepted but its answer was lost (connection cut): it is Running and ours.
      this.log.info('start already recorded by an earlier attempt');
    }
    entry.startReported = true;
    if (this.killRequested) {
      await abandon();
      await this.cancel(entry, 'temp', `killed before it started: ${this.killRequested}`);
      return;
    }
    const restored = way ? await this.restoreCheckpoint(entry, way.dir, order) : null;
    this.restoredCheckpoint = restored?.line ?? null;
    let handle: RunHandle;
    try {
      entry.startedAt = Date.now();
      if (preparing) handle = await (await preparing).start();
      else handle = await this.startOrResume(runtime, spec, way, restored);
      this.seen.ran = Date.now();
    } catch (err) {
      const failure = err as StartFailure;
      const cls = failure.failureClass === 'perm' ? 'perm' : 'temp';
      const retryable = failure.retryable !== false;
      const msg = `${runtime.name} runtime could not start it: ${(err as Error).message}`;
      this.log.warn(
        { failure_class: cls, retryable },
        `${msg} (cancel ${cls}${retryable ? '' : ', not retryable'})`,
      );
      await this.cancel(entry, cls, msg, { retryable });
      return;
    }
    entry.phase = 'running';
    await ctx.journal.save();
    await this.supervise(entry, handle);
  }

  private async runResumed(entry: JournalEntry): Promise<void> {
    const { ctx } = this;
    if (entry.phase === 'exited' && entry.exit) {
      await this.finish(entry, entry.exit, this.makeShipper(entry));
      return;
    }
    const runtime = ctx.runtimes.byName(entry.runtime);
    const handle = runtime ? await runtime.reattach(entry.id, entry.runDir).catch(() => null) : null;
    if (!handle) {
      const why =
        entry.phase === 'starting'
          ? 'the agent restarted before the container was started'
          : `the ${entry.runtime} runtime has no trace of the container after an agent restart`;
      this.log.warn(why);
      // A start cut short may still have left a running process or engine container: it must not run on
      // unseen while the retry runs elsewhere.
      await this.discardLeftovers(entry);
      await this.cancel(entry, 'temp', why);
      return;
    }
    this.log.info({ runtime: entry.runtime }, `re-attached (${entry.runtime})`);
    if (entry.phase === 'starting') {
      entry.phase = 'running';
      await ctx.journal.save();
    }
    if (entry.killReason) this.killRequested ??= entry.killReason;
    await this.supervise(entry, handle);
  }

  private makeShipper(entry: JournalEntry): LogShipper {
    this.shipper = new LogShipper(
      entry,
      {
        stdout: join(entry.runDir, 'stdout'),
        stderr: join(entry.runDir, 'stderr'),
        system: join(this.dir(), 'system.log'),
      },
      this.ctx.client,
      this.ctx.journal,
      this.ctx.stop,
      (line) => this.log.warn(line),
      this.ctx.shipper,
    );
    void this.shipper.start();
    return this.shipper;
  }

  private async supervise(entry: JournalEntry, handle: RunHandle): Promise<void> {
    const { ctx } = this;
    const shipper = this.makeShipper(entry);
    if (handle.warning) await shipper.system(`warning: ${handle.warning}`);
    if (this.restoredCheckpoint) await shipper.system(this.restoredCheckpoint);
    const sup = new Supervisor(handle, {
      maxRunTimeMs: entry.maxRunTimeMs,
      scratchBytes: entry.scratch,
      killGraceMs: ctx.killGraceMs,
      sampleIntervalMs: ctx.sampleIntervalMs,
      startedAt: new Date(entry.startedAt),
      onSample: (u) => (this.lastUsage = u),
      onEvent: (line) => void shipper.system(line).catch(() => {}),
    });
    this.supervisor = sup;
    if (this.killRequested) void sup.cancel(this.killRequested).catch(() => {});
    const stopped = new Promise<'stopped'>((resolve) => {
      if (ctx.stop.aborted) resolve('stopped');
      ctx.stop.addEventListener('abort', () => resolve('stopped'), { once: true });
    });
    let info: ExitInfo | 'stopped';
    try {
      info = await Promise.race([sup.wait(), stopped]);
      this.seen.exited = Date.now();
    } catch (err) {
      const why = `the ${handle.runtime} runtime lost the container: ${(err as Error).message}`;
      await shipper.system(why).catch(() => {});
      await this.cancel(entry, 'temp', why);
      return;
    }
    if (info === 'stopped') return; // the next agent re-attaches
    const notKept = await this.keepCheckpoint(entry, info, shipper);
    if (entry.handBack) {
      const { cause } = entry.handBack;
      const reason = notKept ? `${entry.handBack.reason} (${notKept})` : entry.handBack.reason;
      await this.cancel(entry, 'temp', reason, {
        interrupted: cause === 'spot',
        reclaimed: cause === 'reclaim',
      });
      return;
    }
    if (!info.reason && entry.killReason) info = { ...info, reason: entry.killReason };
    entry.exit = info;
    entry.phase = 'exited';
    // Journalled while the rest of the log is shipped: both are done before the exit is reported.
    await this.finish(entry, info, shipper, ctx.journal.save());
  }

  /**
   * Ships the rest of the log and reports the exit, once `journalled` (the exit's journal save, when it is
   * still being written) resolved too.
   */
  private async finish(
    entry: JournalEntry,
    info: ExitInfo,
    shipper: LogShipper,
    journalled: Promise<void> = Promise.resolve(),
  ): Promise<void> {
    const { ctx } = this;
    const shipped = (async () => {
      if (info.oomKilled)
        await shipper.system(
          oomWarning(info.exitCode, true) ?? 'the container was killed: out of memory (its ram limit)',
        );
      await shipper.finish();
    })();
    await Promise.all([journalled, shipped]);
    if (ctx.stop.aborted) return;
    const body: CompleteBody = {
      exit_code: info.exitCode ?? -1,
      oom_killed: info.oomKilled,
      usage: {
        peak_ram: Math.max(0, Math.round(info.peakRamBytes)),
        cpu_seconds: Math.max(0, info.cpuSeconds),
        wall_ms: Math.max(0, Math.round(info.wallMs)),
      },
      ...(info.reason ? { reason: info.reason.slice(0, 4096) } : {}),
    };
    try {
      await retrying(() => ctx.client.complete(entry.id, entry.lockToken, body), {
        signal: ctx.stop,
        onRetry: (err, d) =>
          this.log.warn({ ...errorFields(err), retry_ms: d }, 'complete report failed; retrying'),
      });
      this.log.info(
        { exit_code: body.exit_code, ran_at: this.seen.ran, exit_seen_at: this.seen.exited },
        `exited ${body.exit_code}${info.reason ? ` (${info.reason})` : ''}`,
      );
    } catch (err) {
      if (err instanceof AbortedError) return;
      // 409: cancelled meanwhile (its token was revoked), which is how a kill-list kill ends.
      const stale = err instanceof ApiHttpError && err.status === 409;
      this.log.warn(
        { exit_code: body.exit_code, ...errorFields(err) },
        `exit ${body.exit_code} not recorded${stale ? ' (it was cancelled)' : ''}`,
      );
    }
    await this.forget();
  }

  /**
   * Cancels the container through the API (after shipping what its log holds), then forgets it.
   * `retryable: false`: no retry can succeed (the request ends at once).
   */
  private async cancel(
    entry: JournalEntry,
    cls: 'temp' | 'perm',
    reason: string,
    opts: { retryable?: boolean; interrupted?: boolean; reclaimed?: boolean } = {},
  ): Promise<void> {
    const { ctx } = this;
    const shipper = this.shipper ?? this.makeShipper(entry);
    await shipper.system(reason).catch(() => {});
    await shipper.finish();
    if (ctx.stop.aborted) return;
    try {
      await retrying(() => ctx.client.cancel(entry.id, entry.lockToken, cls, reason, opts), {
        signal: ctx.stop,
      });
    } catch (err) {
      if (err instanceof AbortedError) return;
      this.log.warn({ failure_class: cls, ...errorFields(err) }, `cancel (${cls}) not recorded`);
    }
    await this.forget();
  }

  /** Drops it from the journal and removes its directory, both at once (the agent pings again after). */
  private async forget(): Promise<void> {
    this.ctx.journal.containers.delete(this.id);
    await Promise.all([
      this.ctx.journal.save(),
      rm(this.dir(), { recursive: true, force: true }).catch((err: unknown) =>
        this.log.warn({ dir: this.dir(), ...errorFields(err) }, 'cannot remove its directory'),
      ),
    ]);
  }
}

/** How a container's state goes to its next attempt (ContainerRunner.checkpointWay), and where it is kept. */
type CheckpointWay = { kind: 'app'; dir: string } | { kind: 'whole'; dir: string; whole: WholeState };
