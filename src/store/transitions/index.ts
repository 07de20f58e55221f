// The one owner of every container transition (DESIGN §3.2): lock, unlock/requeue, assign, start,
// complete, cancel, and the retry an end may queue. Each is one statement or one transaction for a whole
// batch, records its events at the application's clock, and answers per item. The API, the dispatcher's
// queue port (src/dispatch/pg-queue.ts), node failures (src/store/nodes.ts) and request cancels go
// through here; the rules themselves are pure (src/model/transitions.ts, src/model/retry.ts) and shared
// with the simulator's queue. The lifecycle's statements (lockAssign, start, end) are named: each
// connection parses them once and, after five runs, plans them once (generic plans, chosen by cost; their
// reads by primary key: test/store/transition-plans.test.ts), as the submission's is (src/store/requests.ts).
//
// | transition            | file        | shape                                                          |
// |-----------------------|-------------|----------------------------------------------------------------|
// | Queued → Locked       | lock.ts     | one statement (update + events)                                |
// | (Locked) assign       | assign.ts   | one statement                                                  |
// | lock + assign         | lock.ts     | one statement (what a pass locks for a ready instance)         |
// | Locked → Running      | start.ts    | one statement                                                  |
// | → Complete/Cancelled  | end.ts      | one transaction: end + lock requests; finalise/retry + events; |
// |                       |             | one statement when every item is a success or a user's cancel  |
// | Locked → Queued       | requeue.ts  | one transaction: lock rows, decide, requeue; over-limit → end  |
// | Locked → Running, moved | move.ts   | one statement: pick, move to the asking node's allocation, start |
import { statesFrom, type Actor } from '../../model/transitions.js';
import type { StoreContext } from '../context.js';
import { withRetriedTx, type Tx } from '../db.js';
import { lockKey, lockToken, tokenGeneration } from '../secrets.js';
import { assignContainers, type AssignItem } from './assign.js';
import { endContainers, type EndItem, type EndOutcome, type Ending } from './end.js';
import { lockAssign, lockIds, lockNext, type LockedRow } from './lock.js';
import type { Outcome } from './outcome.js';
import { moveToAllocation, type MovedRow } from './move.js';
import { requeueContainers, type RequeueItem } from './requeue.js';
import { startContainers } from './start.js';

export type { AssignItem, EndItem, EndOutcome, Ending, Outcome, RequeueItem };

/** A lock granted to a dispatcher: the per-lock token goes to the agent that will run the container. */
export interface GrantedLock {
  id: string;
  token: string;
}

/** An agent's report about a container assigned to its node, with the per-lock token it was given. */
export interface AgentItem {
  id: string;
  node: string;
  token: string;
}

const DEADLOCK = '40P01';

/** Runs one statement, again if PostgreSQL chose it as a deadlock victim (batches touch many rows). */
async function retried<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= 5 || (err as { code?: string }).code !== DEADLOCK) throw err;
    }
  }
}

/** Tokens remembered with their generation (Transitions.generation), at most; then forgotten all at once. */
const KNOWN_TOKENS = 20_000;

export class Transitions {
  private key: Buffer | null = null;
  /** Genuine tokens by `id token`, with their generation: granted here, or checked once (an HMAC each). */
  private readonly known = new Map<string, number>();

  constructor(private readonly ctx: StoreContext) {}

  /** The server-wide key of per-lock tokens. */
  async lockKey(): Promise<Buffer> {
    this.key ??= await lockKey(this.ctx.pool);
    return this.key;
  }

  /**
   * The generation a per-lock token is genuine for, or null (tokenGeneration): a token this server granted
   * or already checked is not checked again (an agent's start and end reports carry the same one). Only
   * genuine tokens are remembered, and a token's generation never changes, so a forged one is always checked.
   */
  generation(key: Buffer, id: string, token: unknown): number | null {
    if (typeof token !== 'string') return null;
    const known = this.known.get(`${id} ${token}`);
    if (known !== undefined) return known;
    const generation = tokenGeneration(key, id, token);
    if (generation !== null) this.remember(id, token, generation);
    return generation;
  }

  private remember(id: string, token: string, generation: number): void {
    if (this.known.size >= KNOWN_TOKENS) this.known.clear();
    this.known.set(`${id} ${token}`, generation);
  }

  /** The per-lock token for a container at a lock generation. */
  async token(id: string, generation: number): Promise<string> {
    return lockToken(await this.lockKey(), id, generation);
  }

  /** Queued → Locked for each of ids that may be locked now (priority > 0, run_after passed). */
  async lock(ids: string[], dispatcherId: string): Promise<GrantedLock[]> {
    const rows = await retried(() => lockIds(this.ctx, this.ctx.pool, ids, dispatcherId));
    return this.granted(rows);
  }

  /** Locks up to `limit` lockable containers in queue order, skipping rows other lockers hold. */
  async lockNext(dispatcherId: string, limit: number): Promise<GrantedLock[]> {
    return this.granted(await retried(() => lockNext(this.ctx, this.ctx.pool, dispatcherId, limit)));
  }

  /** Queued → Locked and placed on its instance in one statement; returns the locks granted. */
  async lockAssign(items: AssignItem[], dispatcherId: string): Promise<GrantedLock[]> {
    return this.granted(await retried(() => lockAssign(this.ctx, this.ctx.pool, items, dispatcherId)));
  }

  /** The lock holder places Locked containers on instances (their nodes then start them). */
  assign(items: AssignItem[], dispatcherId: string): Promise<Outcome[]> {
    return retried(() => assignContainers(this.ctx, this.ctx.pool, items, dispatcherId));
  }

  /** Locked → Queued by the lock holder; past max_dispatch_attempts, Cancelled (perm) instead. */
  unlock(items: { id: string; reason: string }[], dispatcherId: string): Promise<Outcome[]> {
    return this.requeue(
      items.map((it) => ({
        id: it.id,
        actor: { kind: 'dispatcher', id: dispatcherId },
        why: it.reason,
        event: `Queued: unlocked by ${dispatcherId}: ${it.reason}`,
      })),
    );
  }

  /** Locked → Queued (see requeue.ts), in `tx` or a transaction of its own. */
  requeue(items: RequeueItem[], tx?: Tx): Promise<Outcome[]> {
    return this.inTx(tx, (t) => requeueContainers(this.ctx, t, items));
  }

  /** Locked → Running, reported by agents with their per-lock tokens. */
  async start(items: AgentItem[]): Promise<Outcome[]> {
    const key = await this.lockKey();
    const withGen = items.map((it) => ({ ...it, generation: this.generation(key, it.id, it.token) }));
    return retried(() => startContainers(this.ctx, this.ctx.pool, withGen));
  }

  /**
   * Locked → Running on `nodeId`: the next container that fits the node's SLURM allocation, moved from a node
   * whose job has not started (move.ts); null when none fits or the node takes no more.
   */
  moveToAllocation(nodeId: string): Promise<MovedRow | null> {
    return retried(() => moveToAllocation(this.ctx, this.ctx.pool, nodeId, statesFrom('start')));
  }

  /** → Complete or Cancelled (see end.ts), in `tx` or a transaction of its own. */
  end(items: EndItem[], tx?: Tx): Promise<EndOutcome[]> {
    return this.inTx(tx, (t) => endContainers(this.ctx, t, items));
  }

  /** The actor of an agent's report: its node, and the generation its token is genuine for. */
  async agent(it: AgentItem): Promise<Extract<Actor, { kind: 'agent' }>> {
    return {
      kind: 'agent',
      node: it.node,
      generation: this.generation(await this.lockKey(), it.id, it.token),
    };
  }

  private async granted(rows: LockedRow[]): Promise<GrantedLock[]> {
    const key = await this.lockKey();
    return rows.map((r) => {
      const token = lockToken(key, r.id, r.lock_generation);
      this.remember(r.id, token, r.lock_generation);
      return { id: r.id, token };
    });
  }

  private inTx<T>(tx: Tx | undefined, fn: (tx: Tx) => Promise<T>): Promise<T> {
    return tx ? fn(tx) : withRetriedTx(this.ctx.pool, fn);
  }
}
