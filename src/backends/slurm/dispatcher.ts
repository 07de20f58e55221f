// The slurm backend's dispatcher (DESIGN §8a): a pass reads the database, then squeue, plans (plan.ts,
// pure) and acts: sbatch, scancel, scontrol, and the store's transitions through the dispatcher queue.
// It keeps no state of its own beyond timers: a restarted dispatcher rebuilds everything from squeue's job
// names and the database, and the lease keeps a second process of the same cluster/tag from running.
import { systemClock, type Clock } from '../../model/clock.js';
import { LeaseLostError } from '../../dispatch/dispatcher.js';
import { PgQueue } from '../../dispatch/pg-queue.js';
import type { ItemOutcome } from '../../dispatch/ports.js';
import type { FailureClass } from '../../model/types.js';
import { ConflictError } from '../../store/errors.js';
import type { Store } from '../../store/store.js';
import type { SlurmConfig } from './config.js';
import { SlurmCommandError, type SlurmCommands } from './commands.js';
import {
  clearBackoff,
  EMPTY_MEMORY,
  jobInstance,
  nextBackoff,
  planSlurm,
  SUBMITTING_INSTANCE,
  type QueuedContainer,
  type SlurmAction,
  type SlurmMemory,
  type SlurmPlan,
} from './plan.js';
import { containerStates, heldContainers, liveNodes, runnableQueued } from './queue.js';
import { batchScript, sbatchArgs } from './sbatch.js';
import { isLive, jobMarker } from './squeue.js';

/** What happened, for logs and tests. */
export type SlurmEvent =
  | { kind: 'submitted'; container: string; job: string; nice: number }
  | { kind: 'refused'; container: string; failure: 'perm' | 'temp'; message: string }
  | { kind: 'action'; action: SlurmAction }
  /** The store refused a transition: the container moved on since the pass read it (it completed). */
  | { kind: 'stale'; op: string; message: string }
  | { kind: 'error'; op: string; message: string };

export interface SlurmDispatcherOptions {
  cfg: SlurmConfig;
  store: Store;
  /** The database URL (the lease uses a connection of its own). */
  dbUrl: string;
  /** The API URL the one-shot agents use. */
  apiUrl: string;
  slurm: SlurmCommands;
  clock?: Clock;
  onEvent?: (e: SlurmEvent) => void;
}

/** Most status texts written in one pass. */
const MAX_STATUS_WRITES = 5_000;

export class SlurmDispatcher {
  readonly id: string;
  readonly marker: string;
  private readonly queue: PgQueue;
  private readonly clock: Clock;
  private memory: SlurmMemory = EMPTY_MEMORY;
  private lastStatus = new Map<string, string>();
  private running: Promise<void> | null = null;
  private stopped = false;
  /** The last plan (tests, debugging). */
  lastPlan: SlurmPlan | null = null;

  constructor(private readonly o: SlurmDispatcherOptions) {
    this.id = `${o.cfg.cluster}/${o.cfg.tag}`;
    this.marker = jobMarker(this.id);
    this.queue = new PgQueue(o.store, o.dbUrl);
    this.clock = o.clock ?? systemClock;
  }

  private emit(e: SlurmEvent): void {
    this.o.onEvent?.(e);
  }

  /** One pass; concurrent calls share the pass in flight. */
  tick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.running ??= this.pass().finally(() => (this.running = null));
    return this.running;
  }

  private async pass(): Promise<void> {
    const { cfg, store } = this.o;
    const pool = store.ctx.pool;
    const now = this.clock.now();
    if (!(await this.queue.heartbeat(this.id, cfg.cluster, cfg.tag, now, cfg.dispatcherLostAfterMs)))
      throw new LeaseLostError(`another live dispatcher holds the lease for ${this.id}`);
    // The database first, then squeue: a container that ends between the two reads looks as if its job
    // vanished under it, and the store refuses the stale transition (it is final already).
    const held = await heldContainers(pool, this.id);
    const nodes = await liveNodes(pool, cfg.cluster, cfg.tag);
    const queued = await runnableQueued(pool, now, cfg.maxJobs);
    const listed = await this.o.slurm.squeue();
    if (listed.bad.length > 0)
      this.emit({
        kind: 'error',
        op: 'squeue',
        message: `unparsed lines: ${listed.bad.slice(0, 3).join(' / ')}`,
      });
    const jobs = listed.jobs.filter((j) => j.comment === this.marker);
    const known = new Set([...held.map((c) => c.id), ...queued.map((c) => c.id)]);
    const others = await containerStates(pool, [
      ...new Set(jobs.filter((j) => isLive(j) && !known.has(j.name)).map((j) => j.name)),
    ]);
    const plan = planSlurm({ now, held, queued, nodes, jobs, others, memory: this.memory }, cfg);
    this.lastPlan = plan;
    this.memory = plan.memory;
    await this.act(plan);
    await this.saveStatuses(plan);
  }

  private async act(plan: SlurmPlan): Promise<void> {
    const submits: Extract<SlurmAction, { op: 'submit' }>[] = [];
    for (const a of plan.actions) {
      if (a.op === 'submit') {
        submits.push(a);
        continue;
      }
      try {
        await this.apply(a);
        this.emit({ kind: 'action', action: a });
      } catch (err) {
        // Failed actions are tried again by a later pass, which sees the world anew.
        const stale = err instanceof ConflictError;
        this.emit({ kind: stale ? 'stale' : 'error', op: a.op, message: (err as Error).message });
      }
    }
    if (submits.length > 0) await this.submitAll(submits);
  }

  private async apply(a: Exclude<SlurmAction, { op: 'submit' }>): Promise<void> {
    const { slurm } = this.o;
    switch (a.op) {
      case 'scancel':
        return slurm.scancel([a.job]);
      case 'release':
        return slurm.release([a.job]);
      case 'renice':
        return slurm.renice(a.jobs, a.nice);
      case 'bind':
        await this.assign(a.container, jobInstance(a.job), a.node);
        return this.queue.bindNode(a.node, jobInstance(a.job));
      case 'unlock':
        return this.unlock(a.container, a.reason);
      case 'cancel':
        return this.cancel(a.container, a.class, a.reason);
      case 'retire':
        return this.queue.failNode(a.node, a.reason);
    }
  }

  // One container through the batched queue port (src/dispatch/ports.ts), its refusal thrown as a
  // ConflictError: a later pass sees the world anew.
  private assign(id: string, instance: string, node: string | null): Promise<void> {
    return refused(this.queue.assign([{ id, instance, node }], this.id));
  }

  private unlock(id: string, reason: string): Promise<void> {
    return refused(this.queue.unlock([{ id, reason }], this.id));
  }

  private cancel(id: string, failureClass: FailureClass, reason: string): Promise<void> {
    return refused(this.queue.cancel([{ id, failureClass, reason }], this.id));
  }

  /** Locks the containers to submit (others may have taken some), then submits them a few at a time. */
  private async submitAll(submits: Extract<SlurmAction, { op: 'submit' }>[]): Promise<void> {
    let granted: Set<string>;
    try {
      granted = new Set(
        await this.queue.lock(
          submits.map((s) => s.container.id),
          this.id,
        ),
      );
    } catch (err) {
      this.emit({ kind: 'error', op: 'lock', message: (err as Error).message });
      return;
    }
    const todo = submits.filter((s) => granted.has(s.container.id));
    let next = 0;
    let halted = false;
    const worker = async () => {
      while (next < todo.length && !halted) {
        const s = todo[next++]!;
        if (!(await this.submitOne(s.container, s.nice))) halted = true;
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.o.cfg.submitConcurrency, todo.length) }, worker));
    // Locked but not submitted (a failure halted the rest): given back at once, nothing was submitted.
    for (const s of todo.slice(next))
      await this.unlock(s.container.id, 'not submitted: sbatch is backing off').catch((err: Error) =>
        this.emit({ kind: 'error', op: 'unlock', message: err.message }),
      );
  }

  /** One container: node record, assignment, sbatch, binding. False when submissions should pause. */
  private async submitOne(c: QueuedContainer, nice: number): Promise<boolean> {
    const { cfg, slurm } = this.o;
    const args = sbatchArgs(c, cfg, { nice, marker: this.marker });
    let nodeId: string | null = null;
    try {
      if (!args.ok) {
        // The plan checks this before locking; a config reload between the two would land here.
        await this.cancel(c.id, 'perm', args.reason);
        return true;
      }
      const node = await this.queue.createNode('slurm', cfg.cluster, cfg.tag);
      nodeId = node.nodeId;
      // Assigned before sbatch: a restart that finds the job by name knows its node.
      await this.assign(c.id, SUBMITTING_INSTANCE, nodeId);
      const script = batchScript({
        containerId: c.id,
        nodeId,
        secret: node.bootstrapSecret,
        apiUrl: cfg.apiUrl ?? this.o.apiUrl,
        cfg,
        marker: this.marker,
      });
      let r;
      try {
        r = await slurm.sbatch(args.args, script);
      } catch (err) {
        // Unknown outcome: left Locked and assigned; a later pass adopts the job by name or unlocks after
        // submit_grace.
        const message = (err as Error).message;
        this.memory = nextBackoff(this.memory, this.clock.now().getTime(), message);
        this.emit({ kind: 'error', op: 'sbatch', message: `${c.id}: ${message}` });
        return false;
      }
      if (r.ok) {
        this.memory = clearBackoff(this.memory);
        await this.assign(c.id, jobInstance(r.jobId), nodeId);
        await this.queue.bindNode(nodeId, jobInstance(r.jobId));
        this.emit({ kind: 'submitted', container: c.id, job: r.jobId, nice });
        return true;
      }
      const { failure } = r;
      this.emit({ kind: 'refused', container: c.id, failure: failure.kind, message: failure.message });
      if (failure.kind === 'perm') {
        const asked = args.args.filter((x) =>
          /^--(cpus-per-task|mem|tmp|gres|time|partition|account|constraint)=/.test(x),
        );
        await this.cancel(c.id, 'perm', `SLURM refused the job: ${failure.message} (${asked.join(' ')})`);
        await this.queue.failNode(nodeId, 'its job was refused');
        return true;
      }
      this.memory = nextBackoff(this.memory, this.clock.now().getTime(), failure.message);
      await this.unlock(c.id, `sbatch failed: ${failure.message}`);
      await this.queue.failNode(nodeId, 'its job was refused');
      return false;
    } catch (err) {
      // The database failed mid-way: the next pass finds the container Locked (with or without a node) and
      // sorts it out like after a restart.
      this.emit({ kind: 'error', op: 'submit', message: `${c.id}: ${(err as Error).message}` });
      if (err instanceof SlurmCommandError) return false;
      return true;
    }
  }

  /** Writes the status texts that changed (bounded per pass). */
  private async saveStatuses(plan: SlurmPlan): Promise<void> {
    const changed = new Map<string, string>();
    for (const [id, s] of plan.status) {
      if (this.lastStatus.get(id) === s) continue;
      changed.set(id, s);
      if (changed.size >= MAX_STATUS_WRITES) break;
    }
    if (changed.size > 0) {
      await this.queue.setStatuses(changed);
      for (const [id, s] of changed) this.lastStatus.set(id, s);
    }
    if (this.lastStatus.size > 2 * plan.status.size + MAX_STATUS_WRITES)
      for (const id of [...this.lastStatus.keys()]) if (!plan.status.has(id)) this.lastStatus.delete(id);
  }

  /** Graceful stop: finish the pass in flight, start nothing new, release the lease. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running?.catch(() => {});
    await this.queue.release(this.id, this.clock.now());
  }
}

/** A one-item batch's refusal, thrown. */
async function refused(out: Promise<ItemOutcome[]>): Promise<void> {
  const [o] = await out;
  if (o !== undefined && !o.ok) throw new ConflictError(o.reason);
}
