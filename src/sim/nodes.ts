// The simulator's node records (DESIGN §3.4), kept by SimQueue: created by the dispatcher with a
// one-time bootstrap secret, registered by the agent, pinging until the agent stops, failed for good.
//
// | from       | to        | when                                                        |
// |------------|-----------|-------------------------------------------------------------|
// | registered | idle/busy | the agent registers with the secret (busy while it runs work) |
// | idle/busy  | draining  | drainNode; `drained` once nothing is assigned to it           |
// | any        | failed    | failNode; a failed node never registers or pings again        |
import { FAILED_NODE_VISIBLE_MS, type NodeView } from '../dispatch/ports.js';
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
  /** Containers assigned to this node (Locked or Running), maintained by SimQueue. */
  assigned: Set<string>;
  /** How many of them are Running. */
  running: number;
  /** What list() last returned for it: handed out again while nothing in it moved (no copy per pass). */
  view?: NodeView;
}

/** The node table. Every operation is O(1) except list(), which is O(nodes of the last hour). */
export class SimNodes {
  private readonly byId = new Map<string, SimNode>();
  private next = 1;

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
      assigned: new Set(),
      running: 0,
    });
    return { nodeId: id, bootstrapSecret: secret };
  }

  list(cluster: string, tag: string, now = this.now()): NodeView[] {
    const out: NodeView[] = [];
    for (const n of this.byId.values()) {
      if (n.cluster !== cluster || n.tag !== tag) continue;
      if (n.state === 'failed' && n.failedAt! < now - FAILED_NODE_VISIBLE_MS) {
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
    n.pingsStoppedAt ??= now;
    return true;
  }

  /** The agent registers with its bootstrap secret (once) and pings every pingIntervalMs from now on. */
  register(nodeId: string, secret: string, pingIntervalMs: number): void {
    const n = this.byId.get(nodeId);
    if (n === undefined || n.secret === null || n.secret !== secret || n.state === 'failed')
      throw new UnauthorizedError(
        'bootstrap secret does not match (unknown node, wrong secret, or already used)',
      );
    n.secret = null;
    if (n.state === 'registered') n.state = 'idle';
    n.registeredAt = this.now();
    n.pingIntervalMs = Math.max(1, pingIntervalMs);
  }

  /** The agent stopped pinging (it crashed, or its machine went away). */
  stopPings(nodeId: string): void {
    const n = this.byId.get(nodeId);
    if (n !== undefined && n.registeredAt !== null) n.pingsStoppedAt ??= this.now();
  }

  /** Whether the node may start work (registered, not failed, not draining). */
  accepts(nodeId: string): boolean {
    const s = this.byId.get(nodeId)?.state;
    return s === 'idle' || s === 'busy';
  }
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
    (v.lastPingAt?.getTime() ?? null) === ping
  )
    return v;
  return (n.view = { id: n.id, instanceId, state, lastPingAt: ping === null ? null : new Date(ping) });
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
