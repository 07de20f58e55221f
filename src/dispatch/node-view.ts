// The dispatcher's view of its nodes, kept across passes from the queue's nodeChanges() (ports.ts): a pass
// reads what changed since the last one and the silent nodes, not every node. Read whole on the first pass
// and after any error (a cursor the queue no longer answers for, a lost connection), as ContainerView does.
import { OrderedIds } from './ordered-ids.js';
import type { ChangeCursor, DispatchQueue, NodeView } from './ports.js';

/** What a read found: the nodes whose view changed (added, altered or gone), and the silent ones by id. */
export interface NodeRead {
  changed: string[];
  silent: Map<string, NodeView>;
}

export class NodeViews {
  /** The listed nodes, in the order nodes() lists them (new ones last). */
  private readonly byId = new Map<string, NodeView>();
  /** Each node's place in the list (new ones last), and the nodes bound to each instance. */
  private readonly order = new OrderedIds();
  private readonly byInstance = new Map<string, Set<string>>();
  private cursor: ChangeCursor | null = null;

  get(id: string): NodeView | undefined {
    return this.byId.get(id);
  }

  /** The listed nodes bound to `instance`. */
  boundTo(instance: string): Iterable<string> {
    return this.byInstance.get(instance) ?? [];
  }

  /** `ids` of listed nodes, in list order. */
  inOrder(ids: Iterable<string>): string[] {
    return this.order.inOrder(ids);
  }

  private set(n: NodeView): void {
    const was = this.byId.get(n.id);
    if (was === undefined) this.order.add(n.id);
    else this.unbind(was);
    this.byId.set(n.id, n);
    if (n.instanceId) {
      let set = this.byInstance.get(n.instanceId);
      if (set === undefined) this.byInstance.set(n.instanceId, (set = new Set()));
      set.add(n.id);
    }
  }

  private delete(id: string): boolean {
    const was = this.byId.get(id);
    if (was === undefined) return false;
    this.unbind(was);
    this.byId.delete(id);
    this.order.delete(id);
    return true;
  }

  private unbind(n: NodeView): void {
    if (!n.instanceId) return;
    const set = this.byInstance.get(n.instanceId);
    set?.delete(n.id);
    if (set?.size === 0) this.byInstance.delete(n.instanceId);
  }

  /** Reads what changed since the last read; `silentBefore` (ms) asks for the silent nodes too. */
  async read(
    queue: Pick<DispatchQueue, 'nodeChanges'>,
    cluster: string,
    tag: string,
    now: Date,
    silentBefore: number | null,
  ): Promise<NodeRead> {
    const before = silentBefore === null ? null : new Date(silentBefore);
    let ch;
    try {
      ch = await queue.nodeChanges(cluster, tag, now, this.cursor, before);
    } catch (err) {
      if (this.cursor === null) throw err;
      // Any doubt: read the whole list now (if that fails too, the pass fails and the next one retries).
      this.cursor = null;
      ch = await queue.nodeChanges(cluster, tag, now, null, before);
    }
    const changed: string[] = [];
    if (ch.full) {
      const listed = new Set(ch.upserts.map((n) => n.id));
      for (const id of [...this.byId.keys()])
        if (!listed.has(id)) {
          this.delete(id);
          changed.push(id);
        }
    }
    for (const id of ch.removed) if (this.delete(id)) changed.push(id);
    for (const n of ch.upserts) {
      const known = this.byId.get(n.id);
      if (known !== undefined && same(known, n)) continue;
      this.set(n);
      changed.push(n.id);
    }
    this.cursor = ch.cursor;
    return { changed, silent: new Map(ch.silent.map((n) => [n.id, n])) };
  }
}

/** Whether two views of a node lead to the same decisions (a ping alone is no change). */
function same(a: NodeView, b: NodeView): boolean {
  return (
    a.state === b.state &&
    a.instanceId === b.instanceId &&
    (a.lastPingAt === null) === (b.lastPingAt === null) &&
    (a.reclaims === true) === (b.reclaims === true)
  );
}
