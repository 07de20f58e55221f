// A container's event log rows, collected while a batch is decided and written by the batch's own
// statement, all at the application's clock ($1 of that statement).

/**
 * A submitted container's first event. Not stored: the events read (src/store/container-list.ts) gives it to
 * every first attempt, at its created_at and with id 0 (before every stored event), unless an older database
 * stored it. Each submission wrote it as a row and an index entry, ~10% of a batch's statement.
 */
export const SUBMITTED_EVENT = { kind: 'state', message: 'Queued: submitted' } as const;

export class EventRows {
  private readonly ids: string[] = [];
  private readonly kinds: string[] = [];
  private readonly messages: string[] = [];
  private readonly data: (string | null)[] = [];

  /**
   * The INSERT of the rows, its arrays from parameter $first on (and the time in $1); `of`: only the rows of
   * the containers in that CTE (its column id), in the order they were added.
   */
  static INSERT_SQL(first: number, of?: string): string {
    const p = (i: number) => `$${first + i}`;
    const rows = `unnest(${p(0)}::text[], ${p(1)}::text[], ${p(2)}::text[], ${p(3)}::jsonb[])`;
    const only = of === undefined ? '' : `WHERE e.id IN (SELECT id FROM ${of}) ORDER BY e.o`;
    return `INSERT INTO container_events (container_id, at, kind, message, data)
      SELECT e.id, $1, e.kind, e.message, e.data FROM ${rows} WITH ORDINALITY AS e(id, kind, message, data, o) ${only}`;
  }

  get size(): number {
    return this.ids.length;
  }

  add(containerId: string, kind: string, message: string, data?: unknown): void {
    this.ids.push(containerId);
    this.kinds.push(kind);
    this.messages.push(message);
    this.data.push(data === undefined ? null : JSON.stringify(data));
  }

  /** The four array parameters INSERT_SQL reads. */
  params(): [string[], string[], string[], (string | null)[]] {
    return [this.ids, this.kinds, this.messages, this.data];
  }
}
