// The slurm backend's dispatcher (DESIGN §8a): a pass reads the database, then squeue, plans (plan.ts,
// pure) and acts: sbatch, scancel, scontrol, and the store's transitions through the dispatcher queue.
// It keeps no state of its own beyond timers: a restarted dispatcher rebuilds everything from squeue's job
// names and the database, and the lease keeps a second process of the same cluster/tag from running.
import { systemClock, type Clock } from '../../model/clock.js';
import { LeaseLostError } from '../../dispatch/dispatcher.js';
import { PgQueue } from '../../dispatch/pg-queue.js';
import type { CancelItem, ItemOutcome, UnlockItem } from '../../dispatch/ports.js';
import type { Store } from '../../store/store.js';
import type { SlurmConfig } from './config.js';
import type { SlurmCommands } from './commands.js';
import {
  boundJob,
  clearBackoff,
  EMPTY_MEMORY,
  jobInstance,
  nextBackoff,
  planSlurm,
  SUBMITTING_INSTANCE,
  type HeldContainer,
  type NodeInfo,
  type QueuedContainer,
  type SlurmAction,
  type SlurmMemory,
  type SlurmPlan,
} from './plan.js';
import { containerStates, heldContainers, liveNodes, recordAllocations, runnableQueued } from './queue.js';
import { batchScript, sbatchArgs, type Allocation } from './sbatch.js';
import { isLive, jobMarker, type SlurmJob, type SqueueSelect } from './squeue.js';

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
    const jobs = await this.listJobs(held, nodes);
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

  /**
   * This dispatcher's jobs: the live ones (one squeue per pass), and, only when a held container's job has
   * left that list, that job in whatever state SLURM still keeps (to say how it ended: NODE_FAIL, TIMEOUT…).
   */
  private async listJobs(held: HeldContainer[], nodes: NodeInfo[]): Promise<SlurmJob[]> {
    const mine = async (select: SqueueSelect) => {
      const listed = await this.o.slurm.squeue(select);
      if (listed.bad.length > 0)
        this.emit({
          kind: 'error',
          op: 'squeue',
          message: `unparsed lines: ${listed.bad.slice(0, 3).join(' / ')}`,
        });
      return listed.jobs.filter((j) => j.comment === this.marker);
    };
    const live = await mine('live');
    const listed = new Set(live.map((j) => j.id));
    const byId = new Map(nodes.map((n) => [n.id, n]));
    const gone = [
      ...new Set(
        held.flatMap((c) => {
          const job = c.nodeId ? boundJob(byId.get(c.nodeId)) : null;
          return job !== null && !listed.has(job) ? [job] : [];
        }),
      ),
    ];
    if (gone.length === 0) return live;
    return [...live, ...(await mine({ ids: gone })).filter((j) => !listed.has(j.id))];
  }

  /**
   * The plan's actions, one call per kind (the queue port and SLURM's commands take batches), in an order that
   * keeps each container's own sequence: its transition (unlock, cancel) before its node is retired (failing
   * a node gives back what it still holds), and submissions last.
   */
  private async act(plan: SlurmPlan): Promise<void> {
    const { slurm } = this.o;
    const of = <K extends SlurmAction['op']>(op: K) =>
      plan.actions.filter((a): a is Extract<SlurmAction, { op: K }> => a.op === op);
    await this.step(of('bind'), async (binds) => {
      const out = await this.queue.assign(
        binds.map((b) => ({ id: b.container, instance: jobInstance(b.job), node: b.node })),
        this.id,
      );
      const refused = refusals(out);
      for (const b of binds)
        if (!refused.has(b.container)) await this.queue.bindNode(b.node, jobInstance(b.job));
      return (b) => refused.get(b.container);
    });
    await this.step(of('unlock'), async (items) => {
      const refused = refusals(
        await this.queue.unlock(
          items.map((a) => ({ id: a.container, reason: a.reason })),
          this.id,
        ),
      );
      return (a) => refused.get(a.container);
    });
    await this.step(of('cancel'), async (items) => {
      const refused = refusals(
        await this.queue.cancel(
          items.map((a) => ({ id: a.container, failureClass: a.class, reason: a.reason })),
          this.id,
        ),
      );
      return (a) => refused.get(a.container);
    });
    await this.step(of('scancel'), (items) => slurm.scancel([...new Set(items.map((a) => a.job))]));
    await this.step(of('release'), (items) => slurm.release(items.map((a) => a.job)));
    for (const a of of('renice')) await this.step([a], () => slurm.renice(a.jobs, a.nice));
    for (const a of of('retire')) await this.step([a], () => this.queue.failNode(a.node, a.reason));
    const submits = of('submit');
    if (submits.length > 0) await this.submitAll(submits);
  }

  /**
   * One batched call for some actions, then an event for each: done, stale (the store refused its item: the
   * container moved on since the pass read it), or failed with the call (a later pass, which sees the world
   * anew, tries again).
   */
  private async step<A extends SlurmAction>(
    actions: A[],
    call: (actions: A[]) => Promise<((a: A) => string | undefined) | void>,
  ): Promise<void> {
    if (actions.length === 0) return;
    let refusal: ((a: A) => string | undefined) | void;
    try {
      refusal = await call(actions);
    } catch (err) {
      for (const a of actions) this.emit({ kind: 'error', op: a.op, message: (err as Error).message });
      return;
    }
    for (const a of actions) {
      const why = refusal?.(a);
      this.emit(
        why === undefined ? { kind: 'action', action: a } : { kind: 'stale', op: a.op, message: why },
      );
    }
  }

  /**
   * Submits a pass's containers: locks them (others may have taken some), records a node for each and assigns
   * them all before any sbatch (a restart that finds a job by name knows its node), runs sbatch for several at
   * once, then records the jobs, the refusals and the give-backs in one call each.
   */
  private async submitAll(submits: Extract<SlurmAction, { op: 'submit' }>[]): Promise<void> {
    const { cfg, slurm, store } = this.o;
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
    const perm: (CancelItem & { node?: string })[] = [];
    const todo: {
      c: QueuedContainer;
      nice: number;
      args: string[];
      allocation: Allocation;
      node: string;
      secret: string;
    }[] = [];
    try {
      for (const s of submits) {
        if (!granted.has(s.container.id)) continue;
        const args = sbatchArgs(s.container, cfg, { nice: s.nice, marker: this.marker });
        // The plan checks this before locking; a config reload between the two would land here.
        if (!args.ok) perm.push({ id: s.container.id, failureClass: 'perm', reason: args.reason });
        else {
          const node = await this.queue.createNode('slurm', cfg.cluster, cfg.tag);
          todo.push({
            ...s,
            c: s.container,
            args: args.args,
            allocation: args.allocation,
            node: node.nodeId,
            secret: node.bootstrapSecret,
          });
        }
      }
      // What each job asks for, on its node: a started job may take a container whose job asks for no more.
      await recordAllocations(
        store.ctx.pool,
        todo.map((t) => ({ node: t.node, allocation: t.allocation })),
        cfg,
      );
      const refused = refusals(
        await this.queue.assign(
          todo.map((t) => ({ id: t.c.id, instance: SUBMITTING_INSTANCE, node: t.node })),
          this.id,
        ),
      );
      for (const [id, why] of refused) this.emit({ kind: 'stale', op: 'assign', message: `${id}: ${why}` });
      // A refused one's node is never bound: the next pass retires it.
      todo.splice(0, todo.length, ...todo.filter((t) => !refused.has(t.c.id)));
    } catch (err) {
      // The database failed mid-way: the next pass finds the containers Locked (with or without a node) and
      // sorts them out like after a restart.
      this.emit({ kind: 'error', op: 'submit', message: (err as Error).message });
      return;
    }

    const bound: { c: QueuedContainer; node: string; job: string; nice: number }[] = [];
    const givenBack: (UnlockItem & { node: string })[] = [];
    let next = 0;
    let halted = false;
    const worker = async () => {
      while (next < todo.length && !halted) {
        const t = todo[next++]!;
        const script = batchScript({
          containerId: t.c.id,
          nodeId: t.node,
          secret: t.secret,
          apiUrl: cfg.apiUrl ?? this.o.apiUrl,
          cfg,
          marker: this.marker,
        });
        let r;
        try {
          r = await slurm.sbatch(t.args, script);
        } catch (err) {
          // Unknown outcome: left Locked and assigned; a later pass adopts the job by name or unlocks after
          // submit_grace.
          const message = (err as Error).message;
          this.memory = nextBackoff(this.memory, this.clock.now().getTime(), message);
          this.emit({ kind: 'error', op: 'sbatch', message: `${t.c.id}: ${message}` });
          halted = true;
          continue;
        }
        if (r.ok) {
          this.memory = clearBackoff(this.memory);
          bound.push({ c: t.c, node: t.node, job: r.jobId, nice: t.nice });
          // The node is bound at once (its job exists): a started job of this pass's may then take its
          // container (allocation reuse), and a restart finds the job by the node. Bound even if its
          // container moved on meanwhile (a cancel): the plan then scancels the orphan job and retires the
          // node once the job ended.
          await this.queue
            .bindNode(t.node, jobInstance(r.jobId))
            .catch((err: unknown) =>
              this.emit({ kind: 'error', op: 'bind', message: `${t.c.id}: ${(err as Error).message}` }),
            );
          continue;
        }
        const { failure } = r;
        this.emit({ kind: 'refused', container: t.c.id, failure: failure.kind, message: failure.message });
        if (failure.kind === 'perm') {
          const asked = t.args.filter((x) =>
            /^--(cpus-per-task|mem|tmp|gres|time|partition|account|constraint)=/.test(x),
          );
          perm.push({
            id: t.c.id,
            failureClass: 'perm',
            reason: `SLURM refused the job: ${failure.message} (${asked.join(' ')})`,
            node: t.node,
          });
          continue;
        }
        this.memory = nextBackoff(this.memory, this.clock.now().getTime(), failure.message);
        givenBack.push({ id: t.c.id, reason: `sbatch failed: ${failure.message}`, node: t.node });
        halted = true;
      }
    };
    await Promise.all(Array.from({ length: Math.min(cfg.submitConcurrency, todo.length) }, worker));
    // Locked but not submitted (a failure halted the rest): given back at once, nothing was submitted.
    for (const t of todo.slice(next))
      givenBack.push({ id: t.c.id, reason: 'not submitted: sbatch is backing off', node: t.node });

    // The outcomes, one call each.
    try {
      if (bound.length > 0) {
        const refused = refusals(
          await this.queue.assign(
            bound.map((b) => ({ id: b.c.id, instance: jobInstance(b.job), node: b.node })),
            this.id,
          ),
        );
        for (const b of bound) {
          const why = refused.get(b.c.id);
          this.emit(
            why === undefined
              ? { kind: 'submitted', container: b.c.id, job: b.job, nice: b.nice }
              : { kind: 'stale', op: 'assign', message: `${b.c.id}: ${why}` },
          );
        }
      }
      if (perm.length > 0) this.staleItems('cancel', await this.queue.cancel(perm.map(withoutNode), this.id));
      if (givenBack.length > 0)
        this.staleItems('unlock', await this.queue.unlock(givenBack.map(withoutNode), this.id));
      for (const it of [...perm, ...givenBack])
        if (it.node) await this.queue.failNode(it.node, 'its job was not submitted');
    } catch (err) {
      this.emit({ kind: 'error', op: 'submit', message: (err as Error).message });
    }
  }

  private staleItems(op: string, out: ItemOutcome[]): void {
    for (const o of out) if (!o.ok) this.emit({ kind: 'stale', op, message: `${o.id}: ${o.reason}` });
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

/** The items a batch refused, by container id, with why. */
function refusals(out: ItemOutcome[]): Map<string, string> {
  return new Map(out.flatMap((o) => (o.ok ? [] : [[o.id, o.reason] as const])));
}

/** A queue item without the node it carries here. */
function withoutNode<T extends { node?: string }>({ node: _node, ...item }: T): Omit<T, 'node'> {
  return item;
}
