// When is a silent node lost? (docs/RELIABILITY.md "Outages do not fail nodes")
//
// A node is lost when it has not pinged for node_lost_after *while the dispatcher was watching*: its
// silence counts from the later of its last ping and the start of the dispatcher's current watch. A watch
// starts when the dispatcher starts, and starts again after anything that kept pings from being recorded or
// seen: a pass that failed (the database is unreachable), an API that does not answer its health check (the
// agents cannot reach it either), or passes further apart than maxPassGapMs (the dispatcher, or the
// database it waited on, was stalled; the machine was suspended). An outage longer than node_lost_after
// then never fails a live agent: it gets node_lost_after from the end of the outage to ping again.

/** How often the API's health is checked when a probe is configured. */
export const API_PROBE_INTERVAL_MS = 2_000;

export interface NodeWatchOptions {
  lostAfterMs: number;
  /**
   * Passes further apart than this mean the dispatcher was not watching. Unset: passes may be any distance
   * apart (the simulator's passes are sparse by design, on a virtual clock that never stalls).
   */
  maxPassGapMs?: number;
}

export class NodeWatch {
  /** Start of the current watch (ms), or null while the store or the API is seen down. */
  private since: number | null = null;
  private lastPass: number | null = null;
  private apiDown = false;
  private lastProbe = -Infinity;

  constructor(private readonly o: NodeWatchOptions) {}

  /** A pass begins at `now`. */
  passStarted(now: number): void {
    const gap = this.o.maxPassGapMs;
    if (gap !== undefined && this.lastPass !== null && now - this.lastPass > gap) this.since = null;
    this.lastPass = now;
    if (this.since === null && !this.apiDown) this.since = now;
  }

  /** A pass failed (the store did not answer): nothing recorded meanwhile can be trusted to be complete. */
  passFailed(): void {
    this.since = null;
  }

  /** Whether the API is due for a health check at `now`. */
  probeDue(now: number): boolean {
    return now - this.lastProbe >= API_PROBE_INTERVAL_MS;
  }

  /** The API's health check answered (`up`) or not at `now`. */
  apiProbed(up: boolean, now: number): void {
    this.lastProbe = now;
    this.apiDown = !up;
    if (!up) this.since = null;
    else this.since ??= now;
  }

  /** How long a node that last pinged at `lastPingMs` has been silent while watched (0 when not watching). */
  silenceMs(lastPingMs: number, now: number): number {
    return this.since === null ? 0 : Math.max(0, now - Math.max(lastPingMs, this.since));
  }

  /**
   * The last pings before which a node is lost at `now` (lost() is true for exactly those), or null when
   * none can be: the watch is off, or began less than node_lost_after ago.
   */
  lostBefore(now: number): number | null {
    const before = now - this.o.lostAfterMs;
    return this.since !== null && this.since < before ? before : null;
  }

  /** True when that silence is longer than node_lost_after. */
  lost(lastPingMs: number, now: number): boolean {
    return this.silenceMs(lastPingMs, now) > this.o.lostAfterMs;
  }
}
