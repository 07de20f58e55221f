// `berth agent` (DESIGN §5): registers the node with its one-time bootstrap secret, then long-polls
// `ping` with its state and running containers, starts what it is given, kills what it is told to,
// drains on request, and reports every exit. Its journal (work-dir/journal.json) lets a restarted agent
// re-attach to containers that kept running and report those that ended while it was down.
//
// One-shot mode (`--once CONTAINER`, the slurm backend's jobs): the same registration, runtimes, limits,
// logs and reports, for that one container only; when it has reported it, it asks for the next container
// that fits its job's allocation (allocation reuse, docs/SLURM.md) and runs that one the same way, and exits
// when there is none (or at once when its container is not assigned to its node). It never saves its token,
// removes its work dir, and on SIGTERM (SLURM ending the job) stops the container, removes its cgroup and
// reports it cancelled (temp), so it is retried. At its start it sweeps what one-shot agents killed before
// they cleaned up left beside its work dir (sweep.ts).
//
// Work dir layout:
//   agent.json               one-shot only: who owns the dir (pid, start time, PID namespace; sweep.ts)
//   node-token.json          the node token (0600), so a restart does not need the used-up secret
//   journal.json             containers this agent is responsible for (see journal.ts)
//   containers/<id>/run/     the runtime's work dir (stdout, stderr, exit, run.json, scratch/)
//   containers/<id>/system.log  the agent's own lines for the container's log
//   sandbox-probe.json       a passed sandbox probe's key (probe-cache.ts); a one-shot agent keeps it in
//                            the dir above its work dir, shared by the node's jobs, so it outlives the job
import { homedir, hostname } from 'node:os';
import { chmod, mkdir, readFile, rm } from 'node:fs/promises';
import { text } from 'node:stream/consumers';
import { dirname, join } from 'node:path';
import { errorFields, silentLogger, type Logger } from '../log/logger.js';
import { PROCESS_OPTIONS } from '../config/options.js';
import {
  createRuntime,
  detectRuntime,
  NoImageRuntime,
  DETECT_ORDER,
  RUNTIME_NAMES,
  type RuntimeName,
  type RuntimeOptions,
} from './runtimes/detect.js';
import type { NetworkSetting, SandboxSetting } from './runtimes/sandbox.js';
import { ProcessRuntime } from './runtimes/process.js';
import { RuncRuntime } from './runtimes/runc.js';
import type { Runtime } from './runtimes/types.js';
import type { VmAccel } from './runtimes/vm-snapshot.js';
import { DEFAULT_KILL_GRACE_MS } from './supervisor.js';
import {
  AbortedError,
  AgentClient,
  ApiHttpError,
  Backoff,
  isTransient,
  retrying,
  type NodeReportState,
  type PingAnswer,
  type StartOrder,
  type UsageSample,
} from './client.js';
import { sleepUnless } from '../model/clock.js';
import { readCredentials, writeCredentials } from './credentials.js';
import { ImdsClient } from './imds.js';
import { Journal } from './journal.js';
import { DEFAULT_LOG_LIMIT } from './log-limit.js';
import { DEFAULT_SHIPPER_OPTIONS, type ShipperOptions } from './log-shipper.js';
import { ApiCheckpoints } from './checkpoint.js';
import { watchPressure, type AgentPressureOptions } from './pressure.js';
import { ContainerRunner, type RunnerContext, type RuntimeChoice } from './runner.js';
import { claimWorkDir, sweepDeadAgents } from './sweep.js';

export type RuntimeSetting = 'auto' | RuntimeName;

/** Options of one agent (the `berth agent` flags). */
export interface AgentOptions {
  apiUrl: string;
  nodeId: string;
  /** File holding the one-time bootstrap secret ('-': stdin); needed only until the node token is saved. */
  bootstrapSecretFile?: string | null;
  /** One-shot mode: run this container only, then exit. */
  once?: string | null;
  workDir: string;
  runtime?: RuntimeSetting;
  killGraceMs?: number;
  /** How long one ping waits for work on the server (the long poll). */
  pingWaitMs?: number;
  /** Usage sampling interval (default 5 s). */
  sampleIntervalMs?: number;
  shipper?: Partial<ShipperOptions>;
  /** The process's logger (default: none); the agent logs through a child carrying its node id. */
  logger?: Logger;
  /** How image-less containers are isolated (default `bwrap`; `none` is unsafe: see docs/SECURITY.md). */
  processSandbox?: SandboxSetting;
  /** The bubblewrap executable (default `bwrap` on PATH). */
  bwrap?: string;
  /** The criu program that saves reclaimed unsandboxed process containers whole (default: none). */
  processCriu?: string | null;
  /** The criu program with which the runc runtime saves reclaimed containers whole (default: none). */
  runcCriu?: string | null;
  /** The vm runtime's guest image directory (default: the `test` guest scripts/guest/build.sh builds). */
  vmGuest?: string | null;
  /** The vm runtime's accelerator (default `tcg`). */
  vmAccel?: VmAccel;
  /** The containers' network on every runtime (default `none`: loopback only). */
  containerNetwork?: NetworkSetting;
  /** The cgroup under which containers' groups are created (default `berth`). */
  cgroupParent?: string;
  /** Bytes of stdout and stderr stored per container (default 64MiB; 0 = no limit): log-limit.ts. */
  logLimitBytes?: number;
  /**
   * Whether to send usage samples with the ping (default true). An API without the `usage` ping field
   * answers 400 once; the agent then stops sending them.
   */
  sendUsage?: boolean;
  /**
   * The instance metadata service (IMDSv2) of a cloud instance, e.g. http://169.254.169.254: the agent
   * reports its instance id at registration and watches for spot interruption notices (it then drains and
   * hands its containers back as temp failures) and rebalance recommendations (it then drains).
   */
  imdsUrl?: string | null;
  /** How often the metadata service is polled for notices (default 5 s; EC2 gives two minutes). */
  noticePollMs?: number;
  /** The pressure watcher of opportunistic containers (src/agent/pressure.ts); unset: the declared defaults. */
  pressure?: Partial<Omit<AgentPressureOptions, 'cgroupParent'>>;
  /** The largest checkpoint sent to the API (checkpoint.ts; default the declared one); 0: no checkpoints. */
  checkpointLimitBytes?: number;
  /** How long a reclaimed container may take to checkpoint and exit after SIGUSR1 (default 5 s). */
  checkpointWaitMs?: number;
  /** One-shot mode: the margin of hostEnding's bound and killNow's wait (default HOST_ENDING_MARGIN_MS). */
  hostEndingMarginMs?: number;
  /**
   * Wraps the runtimes the agent chose (tests: a container whose wait never settles, as when its shim was
   * lost; test/agent-e2e/cut-short.test.ts). Unset: as chosen.
   */
  wrapRuntimes?: (choice: RuntimeChoice) => RuntimeChoice;
}

/**
 * What this node can run, sent at registration as flat facts (the RegisterBody schema's `info`, stored in
 * the node's info).
 */
export type RuntimeInfo = {
  /** What runs containers with an image: 'process' when nothing does (such requests are refused). */
  runtime: string;
  /** The runtime for containers with an image, or null when none works here. */
  image_runtime: string | null;
  /** The process runtime's sandbox, or null when image-less containers are refused here. */
  process_sandbox: SandboxSetting | null;
  container_network: NetworkSetting;
  /** Why the runtime detection passed over better runtimes. */
  runtimes_passed_over?: string;
  /** Why image-less containers are refused here. */
  process_unusable?: string;
};

/** The agent cannot go on: registration refused, node declared failed, token revoked. */
export class AgentFatalError extends Error {
  override name = 'AgentFatalError';
  constructor(
    message: string,
    readonly exitCode = 3,
  ) {
    super(message);
  }
}

/** The agent's checkpoints through the API; null when the limit is 0 (no checkpoint directory). */
function checkpointsOf(
  client: AgentClient,
  limit: number | undefined,
  stop: AbortSignal,
): ApiCheckpoints | null {
  const bytes = limit ?? PROCESS_OPTIONS.defaultOf('checkpoint_limit');
  return bytes > 0 ? new ApiCheckpoints(client, bytes, stop) : null;
}

/** The declared default of --ping-wait (src/config/options.ts). */
/** The node's record of a passed sandbox probe (probe-cache.ts), in the agents' shared dir. */
export const SANDBOX_PROBE_FILE = 'sandbox-probe.json';

export const DEFAULT_PING_WAIT_MS = PROCESS_OPTIONS.defaultOf('ping_wait');

/**
 * A one-shot agent told that its SLURM job ends (SIGTERM) has its kill grace and this long to stop its container;
 * then it is killed at once, waited for this long again, and discarded (its cgroup removed) if need be.
 */
export const HOST_ENDING_MARGIN_MS = 3000;

export class Agent {
  readonly client: AgentClient;
  private readonly stopper = new AbortController();
  private wakeup = new AbortController();
  /** The pressure watcher runs (watchPressure): this agent can claim lent room back. */
  private reclaims = false;
  private readonly runners = new Map<string, ContainerRunner>();
  private journal: Journal | null = null;
  private draining = false;
  /** The cloud's notice about this instance, reported with every ping once there is one. */
  private notice: string | null = null;
  private instanceId: string | null = null;
  private readonly imds: ImdsClient | null;
  /** One-shot mode: the container's runner once it was launched. */
  private onceRunner: ContainerRunner | null = null;
  /** One-shot mode: the container it runs now (--once, then each one its allocation was given next). */
  private onceId: string | null = null;
  /** One-shot mode: cuts a stop on SIGTERM short (hostEnding). */
  private hostEndingTimer: NodeJS.Timeout | null = null;
  /** One-shot mode: its container's order from the registration's answer (already started), if any. */
  private registeredStart: StartOrder[] = [];
  private sendUsage: boolean;
  private readonly log: Logger;
  /** Why the runtime detection passed over better runtimes (for the registration info and the log). */
  runtimeNote = '';

  constructor(private readonly opts: AgentOptions) {
    this.client = new AgentClient(opts.apiUrl.replace(/\/+$/, ''), opts.nodeId);
    this.log = (opts.logger ?? silentLogger).child({ node: opts.nodeId });
    this.sendUsage = opts.sendUsage ?? true;
    this.imds = opts.imdsUrl ? new ImdsClient(opts.imdsUrl) : null;
  }

  /** Ids of the containers this agent is responsible for. */
  running(): string[] {
    return [...this.runners.keys()];
  }

  /** Stops pinging and reporting; running containers keep running for the next agent to re-attach. */
  stop(): void {
    this.stopper.abort();
  }

  /** Registers (or reuses the saved token), re-attaches, then pings until stop() or a fatal error. */
  async run(): Promise<void> {
    const { opts } = this;
    // The agent's own state (node token, journal, containers' run files) is for root's eyes only.
    for (const dir of [opts.workDir, join(opts.workDir, 'containers')]) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await chmod(dir, 0o700);
    }
    // A one-shot agent owns its work dir (sweep.ts); what dead ones left beside it goes meanwhile.
    if (opts.once) await claimWorkDir(opts.workDir);
    const runtimes = await this.chooseRuntimes();
    if (opts.wrapRuntimes) runtimes.choice = opts.wrapRuntimes(runtimes.choice);
    const sweeping = opts.once
      ? sweepDeadAgents(dirname(opts.workDir), opts.workDir, runtimes.choice, this.log).catch(
          (err: unknown) => this.log.warn(errorFields(err), 'sweeping dead one-shot agents failed'),
        )
      : null;
    try {
      await this.runRegistered(runtimes);
    } finally {
      if (this.hostEndingTimer) clearTimeout(this.hostEndingTimer);
      await sweeping;
    }
  }

  private async runRegistered(runtimes: { info: RuntimeInfo; choice: RuntimeChoice }): Promise<void> {
    const { opts } = this;
    if (this.imds) await this.readInstanceId(this.imds);
    await this.authenticate(runtimes.info);
    // A one-shot agent is never restarted to read its journal back: no need to wait for the disk.
    this.journal = await Journal.load(join(opts.workDir, 'journal.json'), { fsync: !opts.once });
    const ctx: RunnerContext = {
      client: this.client,
      journal: this.journal,
      runtimes: runtimes.choice,
      containersDir: join(opts.workDir, 'containers'),
      killGraceMs: opts.killGraceMs ?? DEFAULT_KILL_GRACE_MS,
      sampleIntervalMs: opts.sampleIntervalMs ?? 5000,
      shipper: {
        ...DEFAULT_SHIPPER_OPTIONS,
        ...(opts.logLimitBytes !== undefined ? { limitBytes: opts.logLimitBytes } : {}),
        ...opts.shipper,
      },
      stop: this.stopper.signal,
      log: this.log,
      checkpoints: checkpointsOf(this.client, opts.checkpointLimitBytes, this.stopper.signal),
      checkpointWaitMs: opts.checkpointWaitMs ?? PROCESS_OPTIONS.defaultOf('checkpoint_wait'),
    };
    for (const entry of [...this.journal.containers.values()]) this.track(ContainerRunner.resume(ctx, entry));
    for (const order of this.registeredStart) this.launch(ctx, order);
    const watching = this.imds ? this.watchNotices(this.imds) : null;
    // A one-shot agent (a SLURM job) runs no opportunistic container: nothing to reclaim, no sampling.
    const pressure = opts.once
      ? null
      : watchPressure(
          {
            intervalMs: PROCESS_OPTIONS.defaultOf('pressure_interval'),
            headroomBytes: PROCESS_OPTIONS.defaultOf('pressure_headroom'),
            marginBytes: PROCESS_OPTIONS.defaultOf('pressure_margin'),
            psiPercent: PROCESS_OPTIONS.defaultOf('pressure_psi'),
            cpuPercent: PROCESS_OPTIONS.defaultOf('pressure_cpu'),
            instanceRam: PROCESS_OPTIONS.defaultOf('instance_ram'),
            instanceVcpus: PROCESS_OPTIONS.defaultOf('instance_vcpus'),
            ...opts.pressure,
            cgroupParent: opts.cgroupParent ?? PROCESS_OPTIONS.defaultOf('cgroup_parent'),
          },
          () => this.runners.values(),
          this.log,
          this.stopper.signal,
          () => this.setReclaims(true),
        )
          .catch((err: unknown) => this.log.warn(errorFields(err), 'the pressure watcher failed'))
          .finally(() => this.setReclaims(false));
    try {
      await this.loop(ctx);
    } finally {
      this.stopper.abort();
      await watching;
      await pressure;
      // One-shot: the work dir is this job's alone (the runner removed the container's own dir).
      if (opts.once) await rm(opts.workDir, { recursive: true, force: true }).catch(() => {});
    }
  }

  /** The instance id from the metadata service (reported at registration); a few tries, then without. */
  private async readInstanceId(imds: ImdsClient): Promise<void> {
    for (let i = 0; i < 5 && !this.stopper.signal.aborted; i++) {
      try {
        this.instanceId = await imds.instanceId();
        this.log.info({ instance: this.instanceId, imds: imds.baseUrl }, `instance ${this.instanceId}`);
        return;
      } catch (err) {
        if (i === 4) this.log.warn(errorFields(err), `cannot read the instance id from ${imds.baseUrl}`);
        else await sleepUnless(500 * 2 ** i, this.stopper.signal);
      }
    }
  }

  /**
   * Polls the metadata service for the cloud's notices until the agent stops. A spot interruption notice:
   * drain, and stop every container as a temp failure so that it is retried elsewhere before the instance
   * goes. A rebalance recommendation: drain (running containers finish).
   */
  private async watchNotices(imds: ImdsClient): Promise<void> {
    const stop = this.stopper.signal;
    let lastError = '';
    let rebalance = false;
    while (!stop.aborted) {
      try {
        const spot = await imds.spotAction();
        if (spot) {
          this.interrupted(
            `spot interruption: the cloud will ${spot.action} this instance at ${spot.time.toISOString()}`,
          );
          return;
        }
        const at = rebalance ? null : await imds.rebalanceRecommendation();
        if (at) {
          rebalance = true;
          this.notice = `rebalance recommended at ${at.toISOString()}: draining (running containers finish)`;
          this.draining = true;
          this.log.warn(this.notice);
          this.wakeup.abort();
        }
        lastError = '';
      } catch (err) {
        const msg = (err as Error).message;
        if (msg !== lastError) this.log.warn(errorFields(err), 'metadata service failed');
        lastError = msg;
      }
      await sleepUnless(this.opts.noticePollMs ?? 5000, stop);
    }
  }

  /** The instance is going away: start nothing more, hand every container back as a temp failure. */
  private interrupted(notice: string): void {
    this.notice = notice;
    this.draining = true;
    this.log.warn(
      { notice },
      `${notice}: draining, stopping ${this.runners.size} container(s) to be retried elsewhere`,
    );
    for (const r of this.runners.values()) r.handBack('spot', notice);
    this.wakeup.abort();
  }

  /**
   * One-shot mode: the host is going away (SLURM ends the job): stop the container and report it cancelled
   * (temp) so that it is retried; the agent exits once that is reported.
   */
  hostEnding(reason: string): void {
    this.draining = true; // asks for no next container
    const runner = this.onceRunner;
    if (!runner) {
      this.stop();
      return;
    }
    this.log.info({ container: runner.id }, `${reason}: stopping the container`);
    runner.handBack('job-end', reason);
    // SLURM kills the agent after KillWait: a stop that has not ended by the kill grace and a margin is cut
    // short, so that the container and its cgroup are gone before that (docs/SLURM.md, "What is cleaned when").
    const margin = this.opts.hostEndingMarginMs ?? HOST_ENDING_MARGIN_MS;
    const bound = (this.opts.killGraceMs ?? DEFAULT_KILL_GRACE_MS) + margin;
    this.hostEndingTimer ??= setTimeout(() => {
      if (!this.runners.has(runner.id)) return;
      this.log.warn(
        { container: runner.id },
        `${reason}: the container was not stopped within ${bound} ms; killing it and exiting`,
      );
      void runner.killNow(margin).finally(() => this.stop());
    }, bound);
  }

  private async chooseRuntimes(): Promise<{ info: RuntimeInfo; choice: RuntimeChoice }> {
    const { opts } = this;
    const setting = opts.runtime ?? 'auto';
    // Unset: the declared defaults (src/config/options.ts), as for `berth agent`.
    const sandbox = opts.processSandbox ?? PROCESS_OPTIONS.defaultOf('process_sandbox');
    const network = opts.containerNetwork ?? PROCESS_OPTIONS.defaultOf('container_network');
    // A one-shot agent's work dir is its job's alone; the node's agents share the dir above it.
    const probeCache = join(opts.once ? dirname(opts.workDir) : opts.workDir, SANDBOX_PROBE_FILE);
    const runtimeOpts: RuntimeOptions = {
      network,
      logLimitBytes: opts.logLimitBytes ?? DEFAULT_LOG_LIMIT,
      cgroupParent: opts.cgroupParent ?? PROCESS_OPTIONS.defaultOf('cgroup_parent'),
      vm: {
        guestDir: opts.vmGuest ?? undefined,
        accel: opts.vmAccel ?? PROCESS_OPTIONS.defaultOf('vm_accel'),
        templateDir: join(opts.workDir, 'vm-templates'),
      },
      runc: { criu: opts.runcCriu ?? PROCESS_OPTIONS.defaultOf('runc_criu'), probeCache },
      process: {
        sandbox,
        bwrap: opts.bwrap ?? PROCESS_OPTIONS.defaultOf('bwrap'),
        criu: opts.processCriu ?? PROCESS_OPTIONS.defaultOf('process_criu'),
        probeCache,
        // Where Berth keeps its secrets, should one of them lie under a tree the sandbox shows (/usr, /etc).
        hide: [
          opts.workDir,
          join(homedir(), '.berth'),
          ...[process.env.BERTH_HOME, process.env.BERTH_CONFIG].filter((p): p is string => !!p),
        ],
      },
    };
    const processRt = createRuntime('process', runtimeOpts);
    let main: Runtime;
    const skipped: string[] = [];
    if (setting === 'auto') {
      const d = await detectRuntime(DETECT_ORDER, runtimeOpts);
      main = d.runtime;
      for (const [n, why] of Object.entries(d.skipped)) skipped.push(`${n}: ${why}`);
      this.runtimeNote = skipped.join('; ');
      this.log.info(
        { runtime: main.name },
        `runtime ${main.name}${skipped.length ? ` (passed over ${skipped.join('; ')})` : ''}`,
      );
    } else {
      if (!RUNTIME_NAMES.includes(setting))
        throw new AgentFatalError(
          `--runtime: expected auto or one of ${RUNTIME_NAMES.join(', ')}, got ${JSON.stringify(setting)}`,
          2,
        );
      main = setting === 'process' ? processRt : createRuntime(setting, runtimeOpts);
      const why = await main.available();
      if (why) throw new AgentFatalError(`--runtime ${setting}: not usable here: ${why}`, 2);
      this.log.info({ runtime: main.name }, `runtime ${main.name}`);
    }
    const processWhy = await processRt.available();
    if (processWhy)
      this.log.warn({ reason: processWhy }, `image-less containers will be refused: ${processWhy}`);
    else if (sandbox === 'none')
      this.log.warn('process sandbox "none": image-less containers run as unisolated host processes');
    if (!processWhy && processRt instanceof ProcessRuntime && runtimeOpts.process?.criu) {
      const why = await processRt.probeWholeState();
      if (why) this.log.warn({ reason: why }, `no CRIU whole state: ${why}`);
      else this.log.info('CRIU whole state: reclaimed image-less containers are saved whole (criu)');
    }
    if (runtimeOpts.runc?.criu) {
      const why =
        main instanceof RuncRuntime
          ? await main.probeWholeState()
          : `runc_criu is for the runc runtime; this agent's image runtime is ${main.name}`;
      if (why) this.log.warn({ reason: why }, `no runc CRIU whole state: ${why}`);
      else
        this.log.info('runc CRIU whole state: reclaimed runc containers are saved whole (runc checkpoint)');
    }
    // With no image runtime, an image request is refused at once (perm), naming what is missing.
    const imageRt =
      main.name === processRt.name
        ? new NoImageRuntime(skipped.length ? skipped.join('; ') : `the agent runs with --runtime ${setting}`)
        : main;
    const imageName = imageRt instanceof NoImageRuntime ? null : imageRt.name;
    const info: RuntimeInfo = {
      runtime: imageName ?? 'process',
      image_runtime: imageName,
      process_sandbox: processWhy ? null : sandbox,
      container_network: network,
      ...(skipped.length ? { runtimes_passed_over: skipped.join('; ') } : {}),
      ...(processWhy ? { process_unusable: processWhy } : {}),
    };
    const all = new Map<string, Runtime>([
      [processRt.name, processRt],
      [main.name, main],
    ]);
    return {
      info,
      choice: {
        // The vm runtime runs every container in a guest, with or without an image.
        pick: (image) => (main.name === 'vm' || (image !== null && image !== '') ? imageRt : processRt),
        byName: (name) => {
          if (!all.has(name) && (RUNTIME_NAMES as readonly string[]).includes(name))
            all.set(name, createRuntime(name as RuntimeName, runtimeOpts));
          return all.get(name);
        },
      },
    };
  }

  /** Uses the saved node token, or registers with the bootstrap secret and saves the token. */
  private async authenticate(runtimes: RuntimeInfo): Promise<void> {
    const { opts } = this;
    const saved = opts.once ? null : await readCredentials(opts.workDir, opts.nodeId);
    if (saved) {
      this.client.token = saved.token;
      this.log.info('using the saved node token');
      return;
    }
    if (!opts.bootstrapSecretFile)
      throw new AgentFatalError(
        `--bootstrap-secret-file is required: no saved node token for node ${opts.nodeId} in ${opts.workDir}`,
        2,
      );
    let secret: string;
    try {
      secret = (
        opts.bootstrapSecretFile === '-'
          ? await text(process.stdin)
          : await readFile(opts.bootstrapSecretFile, 'utf8')
      ).trim();
    } catch (err) {
      throw new AgentFatalError(
        `--bootstrap-secret-file: cannot read ${opts.bootstrapSecretFile}: ${(err as Error).message}`,
        2,
      );
    }
    if (!secret)
      throw new AgentFatalError(`--bootstrap-secret-file: ${opts.bootstrapSecretFile} is empty`, 2);
    const info = {
      hostname: hostname(),
      pid: process.pid,
      ...runtimes,
      version: '0.1.0',
      ...(this.instanceId ? { instance_id: this.instanceId } : {}),
    };
    try {
      const r = await retrying(() => this.client.register(opts.nodeId, secret, info, opts.once ?? null), {
        signal: this.stopper.signal,
        onRetry: (err, d) => this.log.warn({ ...errorFields(err), retry_ms: d }, 'register failed; retrying'),
      });
      this.client.token = r.token;
      this.registeredStart = r.start ?? [];
    } catch (err) {
      if (err instanceof AbortedError) throw err;
      throw new AgentFatalError(`registration of node ${opts.nodeId} refused: ${(err as Error).message}`);
    }
    // A one-shot agent never restarts: its token stays in memory only.
    if (!opts.once) await writeCredentials(opts.workDir, { node_id: opts.nodeId, token: this.client.token });
    this.log.info({ started: this.registeredStart.map((o) => o.id) }, 'registered');
  }

  private track(runner: ContainerRunner): void {
    this.runners.set(runner.id, runner);
    void runner.done.then(() => {
      if (this.runners.get(runner.id) === runner) this.runners.delete(runner.id);
      this.wakeup.abort(); // report the new state (idle, drained) without waiting out the long poll
    });
  }

  private state(): NodeReportState {
    if (this.draining) return this.runners.size > 0 ? 'draining' : 'drained';
    return this.runners.size > 0 ? 'busy' : 'idle';
  }

  /** Whether the pressure watcher runs, told to the API in each ping (`reclaims`); a change is sent at once. */
  private setReclaims(yes: boolean): void {
    if (this.reclaims === yes) return;
    this.reclaims = yes;
    this.wakeup.abort();
  }

  private usage(): Record<string, UsageSample> | undefined {
    if (!this.sendUsage) return undefined;
    const out: Record<string, UsageSample> = {};
    for (const [id, r] of this.runners)
      if (r.lastUsage)
        out[id] = {
          cpu_seconds: r.lastUsage.cpuSeconds,
          ram: Math.round(r.lastUsage.ramBytes),
          peak_ram: Math.round(r.lastUsage.peakRamBytes),
        };
    return Object.keys(out).length ? out : undefined;
  }

  private async loop(ctx: RunnerContext): Promise<void> {
    const stop = this.stopper.signal;
    const backoff = new Backoff(200, 10_000);
    let lastError = '';
    const once = this.opts.once ?? null;
    while (!stop.aborted) {
      if (once && this.onceRunner && this.runners.size === 0) {
        // Reported: the allocation runs the next container that fits it, or the job is done.
        if (!(await this.nextInAllocation(ctx))) return;
        continue;
      }
      if (this.wakeup.signal.aborted) this.wakeup = new AbortController();
      const state = this.state();
      const usage = this.usage();
      let ans: PingAnswer;
      try {
        ans = await this.client.ping(
          this.opts.nodeId,
          {
            state,
            running: this.running(),
            paused: [...this.runners.values()].filter((r) => r.frozen).map((r) => r.id),
            // Only an agent whose pressure watcher runs can claim lent room back: only its instance lends.
            reclaims: this.reclaims,
            // A draining agent with nothing left reports 'drained' and then polls slowly. A one-shot agent's
            // first ping must answer at once: its container is assigned before the job was submitted.
            wait_ms: once && !this.onceRunner ? 0 : (this.opts.pingWaitMs ?? DEFAULT_PING_WAIT_MS),
            ...(usage ? { usage } : {}),
            ...(this.notice ? { notice: this.notice } : {}),
          },
          AbortSignal.any([stop, this.wakeup.signal]),
        );
        backoff.reset();
        if (lastError) this.log.info('API reachable again');
        lastError = '';
      } catch (err) {
        if (err instanceof AbortedError) continue;
        if (err instanceof ApiHttpError && err.status === 409)
          await this.fatal(`node ${this.opts.nodeId} was declared failed: ${err.message}`);
        if (err instanceof ApiHttpError && err.status === 401)
          await this.fatal(`node token revoked or unknown: ${err.message}`);
        if (err instanceof ApiHttpError && (err.status === 403 || err.status === 404))
          await this.fatal(`the API refuses this node: ${err.message}`);
        if (err instanceof ApiHttpError && err.status === 400 && usage) {
          this.log.warn(errorFields(err), 'ping refused with usage samples; sending pings without them');
          this.sendUsage = false;
          continue;
        }
        const msg = (err as Error).message;
        if (msg !== lastError)
          this.log.warn(errorFields(err), `ping failed${isTransient(err) ? '; retrying' : ''}`);
        lastError = msg;
        await sleepUnless(backoff.delay(), stop);
        continue;
      }
      try {
        this.apply(ctx, ans);
      } catch (err) {
        this.log.error({ err }, 'handling the ping answer failed');
      }
      if (once && !this.onceRunner) {
        this.log.warn(
          { container: once },
          'the container is not assigned to this node (cancelled or given back): nothing to run',
        );
        return;
      }
    }
  }

  private apply(ctx: RunnerContext, ans: PingAnswer): void {
    if (ans.drain && !this.draining) {
      this.draining = true;
      this.log.info('draining: starting nothing new');
    }
    for (const id of ans.kill) this.runners.get(id)?.kill('cancelled');
    for (const [ids, want] of [
      [ans.pause ?? [], true],
      [ans.resume ?? [], false],
    ] as const)
      for (const id of ids)
        void this.runners
          .get(id)
          ?.setFrozen(want)
          .then(() => this.wakeup.abort()); // report it frozen (or not) at once
    for (const order of ans.start) this.launch(ctx, order);
  }

  /** Starts an order's container, unless it runs already, the node drains, or it is not this one-shot's. */
  private launch(ctx: RunnerContext, order: StartOrder): void {
    if (this.runners.has(order.id)) return;
    if (this.draining) return; // left Locked: the dispatcher unlocks it
    if (this.opts.once && (order.id !== (this.onceId ?? this.opts.once) || this.onceRunner)) return;
    this.log.info({ container: order.id }, 'starting');
    const runner = ContainerRunner.launch(ctx, order);
    if (this.opts.once) this.onceRunner = runner;
    this.track(runner);
  }

  /**
   * One-shot mode, its container reported: asks the API for the next container that fits this SLURM job's
   * allocation (already started, moved from a job that has not started) and launches it. False: none (reuse
   * off, limits reached, nothing fits, SLURM ending the job, or the API failed: a container moved whose
   * answer was lost is Running here with no agent, and the dispatcher retries it when this job ends).
   */
  private async nextInAllocation(ctx: RunnerContext): Promise<boolean> {
    if (this.draining || this.stopper.signal.aborted) return false;
    let orders: StartOrder[];
    try {
      orders = await this.client.next(this.opts.nodeId, this.stopper.signal);
    } catch (err) {
      if (!(err instanceof AbortedError))
        this.log.warn(errorFields(err), 'asking for a next container failed: the job ends');
      return false;
    }
    const order = orders[0];
    if (!order || this.draining) return false;
    this.onceId = order.id;
    this.onceRunner = null;
    this.log.info({ container: order.id }, "the next container, in this job's allocation");
    this.launch(ctx, order);
    return this.onceRunner !== null;
  }

  /** Kills everything this agent runs and throws: it must not run anything for a failed node. */
  private async fatal(message: string): Promise<never> {
    this.log.error(`${message}; killing ${this.runners.size} container(s) and exiting`);
    const runners = [...this.runners.values()];
    await Promise.all(runners.map((r) => r.killNow()));
    this.stopper.abort();
    if (this.journal) {
      this.journal.containers.clear();
      await this.journal
        .save()
        .catch((err: unknown) => this.log.warn(errorFields(err), 'clearing the journal failed'));
    }
    throw new AgentFatalError(message);
  }
}
