// The simulator's node records (DESIGN §3.4), kept by SimQueue: created by the dispatcher with a
// one-time bootstrap secret, registered by the agent, pinging until the agent stops, failed for good.
//
// | from       | to        | when                                                        |
// |------------|-----------|-------------------------------------------------------------|
// | registered | idle/busy | the agent registers with the secret (busy while it runs work) |
// | idle/busy  | draining  | drainNode; `drained` once nothing is assigned to it           |
// | any        | failed    | failNode; a failed node never registers or pings again        |
import {
  FAILED_NODE_VISIBLE_MS,
  isSilent,
  type ChangeCursor,
  type NodeChanges,
  type NodeView,
} from '../dispatch/ports.js';
import { NotFoundError, UnauthorizedError } from '../store/errors.js';

/** One node record. */
export interface SimNode {
  id: string;
  instanceId: string | null;
  cluster: string;
  tag: string;
  secret: string | null;
  state: NodeView['state'];
  failedAt: number | null;
  registeredAt: number | null;
  /** While the agent is alive it pings every pingIntervalMs from registeredAt; null = still pinging. */
  pingsStoppedAt: number | null;
  pingIntervalMs: number;
  /** Its agent can claim lent room back (NodeView.reclaims): the simulated agent reclaims borrowers. */
  reclaims: boolean;
  /** Containers assigned to this node (Locked or Running), maintained by SimQueue. */
  assigned: Set<string>;
  /** How many of them are Running. */
  running: number;
  /** What list() last returned for it: handed out again while nothing in it moved (no copy per pass). */
  view?: NodeView;
}

/** A node whose pings stopped, keyed by its last ping (ms): an entry of the silent heap. */
interface Stopped {
  at: number;
  n: SimNode;
}

/**
 * The node table. Every operation is O(1) except list(), which is O(nodes of the last hour), and changes(),
 * which is O(what changed since its cursor + the silent nodes).
 */
export class SimNodes {
  private readonly byId = new Map<string, SimNode>();
  private next = 1;
  /**
   * Ids of nodes that may have changed, in the order of their changes: entry i is change number
   * changes0 + i + 1. Trimmed to what the last cursor of each cluster/tag still needs.
   */
  private changeLog: string[] = [];
  private changes0 = 0;
  /** The last cursor handed out per cluster/tag. */
  private readonly cursors = new Map<string, number>();
  /** Failed nodes in the order they failed (the clock never goes back): they leave the list an hour later. */
  private failedOrder: SimNode[] = [];
  private failedHead = 0;
  /** Nodes whose pings stopped, as a min-heap by last ping: the silent ones are found from its top. */
  private readonly stopped: Stopped[] = [];
  /** Pinging nodes by ping interval (one interval in practice): silent only when it is long. */
  private readonly pinging = new Map<number, Set<SimNode>>();

  constructor(private readonly now: () => number) {}

  get(id: string): SimNode | undefined {
    return this.byId.get(id);
  }

  /** The node or NotFoundError. */
  find(id: string): SimNode {
    const n = this.byId.get(id);
    if (n === undefined) throw new NotFoundError(`node ${id} not found`);
    return n;
  }

  create(cluster: string, tag: string): { nodeId: string; bootstrapSecret: string } {
    const id = `n-${this.next++}`;
    const secret = `bs-${id}`;
    this.byId.set(id, {
      id,
      instanceId: null,
      cluster,
      tag,
      secret,
      state: 'registered',
      failedAt: null,
      registeredAt: null,
      pingsStoppedAt: null,
      pingIntervalMs: 1,
      reclaims: false,
      assigned: new Set(),
      running: 0,
    });
    this.touch(this.byId.get(id)!);
    return { nodeId: id, bootstrapSecret: secret };
  }

  /** The node may look different in nodes() now (state, instance, registration, what it runs). */
  touch(n: SimNode): void {
    // Nobody reads changes (no cursor handed out): count the change, keep nothing.
    if (this.cursors.size === 0) this.changes0++;
    else this.changeLog.push(n.id);
  }

  /** The DispatchQueue's nodeChanges (src/dispatch/ports.ts) of this table. */
  changes(
    cluster: string,
    tag: string,
    now: number,
    since: ChangeCursor | null,
    silentBefore: number | null,
  ): NodeChanges {
    this.expire(now);
    const upserts: NodeView[] = [];
    const removed: string[] = [];
    if (since === null) upserts.push(...this.list(cluster, tag, now));
    else {
      const from = Number(since.position) - this.changes0;
      if (!(from >= 0 && from <= this.changeLog.length))
        throw new Error(`node cursor ${since.position} is older than this table keeps: reload the view`);
      const seen = new Set<string>();
      for (let i = from; i < this.changeLog.length; i++) {
        const id = this.changeLog[i]!;
        if (seen.has(id)) continue;
        seen.add(id);
        const n = this.byId.get(id);
        if (n !== undefined && (n.cluster !== cluster || n.tag !== tag)) continue;
        if (n === undefined || !visible(n, now)) removed.push(id);
        else upserts.push(viewOf(n, now));
      }
    }
    const position = this.changes0 + this.changeLog.length;
    this.cursors.set(`${cluster}\u0000${tag}`, position);
    this.trim();
    const silent = silentBefore === null ? [] : this.silent(cluster, tag, now, silentBefore);
    return {
      cursor: { position: String(position), now: new Date(now) },
      full: since === null,
      upserts,
      removed,
      silent,
    };
  }

  /** Failed nodes an hour old leave the list: a change (and the record goes once nothing holds it). */
  private expire(now: number): void {
    const q = this.failedOrder;
    while (this.failedHead < q.length && q[this.failedHead]!.failedAt! < now - FAILED_NODE_VISIBLE_MS) {
      const n = q[this.failedHead++]!;
      if (n.assigned.size === 0) this.byId.delete(n.id);
      this.touch(n);
    }
    if (this.failedHead > 1024 && this.failedHead * 2 > q.length) {
      this.failedOrder = q.slice(this.failedHead);
      this.failedHead = 0;
    }
  }

  /** Drops the change log's entries every cursor has read (in halves, so the cost is amortised). */
  private trim(): void {
    let oldest = Infinity;
    for (const p of this.cursors.values()) oldest = Math.min(oldest, p);
    const keep = oldest - this.changes0;
    if (keep > 1024 && keep * 2 > this.changeLog.length) {
      this.changeLog = this.changeLog.slice(keep);
      this.changes0 += keep;
    }
  }

  /** The listed nodes silent before `before` (isSilent): from the stopped heap, and slow pingers. */
  private silent(cluster: string, tag: string, now: number, before: number): NodeView[] {
    const h = this.stopped;
    // Entries of failed or forgotten nodes are dropped as they reach the top.
    while (h.length > 0 && (h[0]!.n.state === 'failed' || this.byId.get(h[0]!.n.id) !== h[0]!.n)) heapPop(h);
    const out: NodeView[] = [];
    const take = (n: SimNode) => {
      if (n.cluster !== cluster || n.tag !== tag || this.byId.get(n.id) !== n) return;
      const v = viewOf(n, now);
      if (isSilent(v, before)) out.push(v);
    };
    // Every entry before `before` (a walk of the heap's top part: O(result)).
    const stack = h.length > 0 ? [0] : [];
    while (stack.length > 0) {
      const i = stack.pop()!;
      if (h[i]!.at >= before) continue;
      take(h[i]!.n);
      for (const c of [2 * i + 1, 2 * i + 2]) if (c < h.length) stack.push(c);
    }
    // A live node's last ping is less than one interval old.
    for (const [interval, set] of this.pinging) if (now - interval < before) for (const n of set) take(n);
    return out;
  }

  list(cluster: string, tag: string, now = this.now()): NodeView[] {
    const out: NodeView[] = [];
    for (const n of this.byId.values()) {
      if (n.cluster !== cluster || n.tag !== tag) continue;
      if (!visible(n, now)) {
        // As the store's query: failed nodes are shown for an hour. Dropping them keeps this O(live).
        if (n.assigned.size === 0) this.byId.delete(n.id);
        continue;
      }
      out.push(viewOf(n, now));
    }
    return out;
  }

  /** Marks a node failed; false if it already was. Its containers are the caller's business. */
  fail(n: SimNode): boolean {
    if (n.state === 'failed') return false;
    const now = this.now();
    n.state = 'failed';
    n.failedAt = now;
    n.secret = null;
    this.pinging.get(n.pingIntervalMs)?.delete(n);
    n.pingsStoppedAt ??= now;
    this.failedOrder.push(n);
    this.touch(n);
    return true;
  }

  /**
   * The agent registers with its bootstrap secret (once) and pings every pingIntervalMs from now on, saying
   * whether it can claim lent room back (`reclaims`, as a real agent's ping does).
   */
  register(nodeId: string, secret: string, pingIntervalMs: number, reclaims: boolean): void {
    const n = this.byId.get(nodeId);
    if (n === undefined || n.secret === null || n.secret !== secret || n.state === 'failed')
      throw new UnauthorizedError(
        'bootstrap secret does not match (unknown node, wrong secret, or already used)',
      );
    n.secret = null;
    if (n.state === 'registered') n.state = 'idle';
    n.registeredAt = this.now();
    n.pingIntervalMs = Math.max(1, pingIntervalMs);
    n.reclaims = reclaims;
    let set = this.pinging.get(n.pingIntervalMs);
    if (set === undefined) this.pinging.set(n.pingIntervalMs, (set = new Set()));
    set.add(n);
    this.touch(n);
  }

  /** The agent stopped pinging (it crashed, or its machine went away). */
  stopPings(nodeId: string): void {
    const n = this.byId.get(nodeId);
    if (n === undefined || n.registeredAt === null || n.pingsStoppedAt !== null) return;
    n.pingsStoppedAt = this.now();
    this.pinging.get(n.pingIntervalMs)?.delete(n);
    if (n.state !== 'failed') heapPush(this.stopped, { at: lastPing(n, n.pingsStoppedAt)!, n });
  }

  /** Whether the node may start work (registered, not failed, not draining). */
  accepts(nodeId: string): boolean {
    const s = this.byId.get(nodeId)?.state;
    return s === 'idle' || s === 'busy';
  }
}

/** Whether nodes() lists the node at `now` (failed ones for an hour). */
function visible(n: SimNode, now: number): boolean {
  return !(n.state === 'failed' && n.failedAt! < now - FAILED_NODE_VISIBLE_MS);
}

function heapPush(h: Stopped[], e: Stopped): void {
  let i = h.push(e) - 1;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (h[p]!.at <= e.at) break;
    h[i] = h[p]!;
    i = p;
  }
  h[i] = e;
}

function heapPop(h: Stopped[]): void {
  const last = h.pop()!;
  if (h.length === 0) return;
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    if (l >= h.length) break;
    const c = l + 1 < h.length && h[l + 1]!.at < h[l]!.at ? l + 1 : l;
    if (h[c]!.at >= last.at) break;
    h[i] = h[c]!;
    i = c;
  }
  h[i] = last;
}

/** The state a node reports: its agent's view (busy while it runs something, drained when empty). */
function reported(n: SimNode): NodeView['state'] {
  if (n.state === 'draining' && n.running === 0 && n.assigned.size === 0) return 'drained';
  if (n.state === 'idle' || n.state === 'busy') return n.running > 0 ? 'busy' : 'idle';
  return n.state;
}

/** The node as nodes() shows it: the view of the last call while its fields are the same. */
function viewOf(n: SimNode, now: number): NodeView {
  const instanceId = n.instanceId ?? '';
  const state = reported(n);
  const ping = lastPing(n, now);
  const v = n.view;
  if (
    v !== undefined &&
    v.instanceId === instanceId &&
    v.state === state &&
    (v.lastPingAt?.getTime() ?? null) === ping &&
    (v.reclaims === true) === n.reclaims
  )
    return v;
  return (n.view = {
    id: n.id,
    instanceId,
    state,
    lastPingAt: ping === null ? null : new Date(ping),
    ...(n.reclaims && { reclaims: true }),
  });
}

/** The last ping (ms), or null before the agent registered. */
function lastPing(n: SimNode, now: number): number | null {
  if (n.registeredAt === null) return null;
  // Pings are not events: a live agent pings at registeredAt + k × interval, so the last one is
  // computed on demand. A year of pings from thousands of nodes would otherwise dominate the run.
  const until = Math.min(now, n.pingsStoppedAt ?? now);
  const k = Math.floor((until - n.registeredAt) / n.pingIntervalMs);
  return n.registeredAt + Math.max(0, k) * n.pingIntervalMs;
}
