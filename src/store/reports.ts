// Agents' reports — starts, log chunks, exits and cancels — group-committed: the reports of every agent
// that arrive while a commit is in flight go into the next one, as one transaction (starts, then logs,
// then ends, so a container started and finished in one batch is both, and its last logs are kept before
// a cancel revokes its token). A commit's flush to disk is most of a small transaction's cost, so many
// reports per commit is what lets the store keep up with thousands of short containers (bench: queue).
// A batch that fails as a whole (not a refusal: refusals are per item) is retried item by item, so one
// bad report cannot fail another agent's.
import { Coalescer, type CoalescerOptions } from '../lib/coalescer.js';
import type { StoreContext } from './context.js';
import { withRetriedTx, type Tx } from './db.js';
import { appendLogs, type LogChunk, type LogOutcome } from './logs.js';
import type { Ending, EndOutcome, Transitions } from './transitions/index.js';
import { endContainers } from './transitions/end.js';
import { startContainers } from './transitions/start.js';

/** One report of an agent about a container assigned to its node, with the per-lock token it holds. */
export type Report = { id: string; node: string; token: string } & (
  { kind: 'start' } | { kind: 'logs'; chunks: LogChunk[] } | { kind: 'end'; end: Ending }
);

export type ReportOutcome = EndOutcome | LogOutcome;

/** Reports per commit, and commits in flight: measured in bench/queue.ts (docs/PERFORMANCE.md). */
export const REPORT_BATCHING: CoalescerOptions = { maxItems: 1000, maxInFlight: 2 };

export class Reports {
  private readonly coalescer: Coalescer<Report, ReportOutcome | Error>;

  constructor(
    private readonly ctx: StoreContext,
    private readonly transitions: Transitions,
    batching: CoalescerOptions = REPORT_BATCHING,
  ) {
    this.coalescer = new Coalescer((items) => this.commit(items), batching);
  }

  /** Commits and reports in the coalescer's statistics (calls = commits). */
  get stats(): { calls: number; items: number } {
    return this.coalescer.stats;
  }

  /**
   * Records the reports (with other agents' in the same commit) and answers for each, in order. Throws
   * when the database could not record them (nothing was changed for this caller: retry).
   */
  async send(reports: Report[]): Promise<ReportOutcome[]> {
    const out = await Promise.all(reports.map((r) => this.coalescer.submit(r)));
    const failed = out.find((o): o is Error => o instanceof Error);
    if (failed) throw failed;
    return out as ReportOutcome[];
  }

  private async commit(items: Report[]): Promise<(ReportOutcome | Error)[]> {
    const key = await this.transitions.lockKey();
    const gen = (r: Report) => this.transitions.generation(key, r.id, r.token);
    try {
      // Only starts, each container once: one statement, no transaction around it (3 round trips → 1).
      if (items.every((r) => r.kind === 'start') && new Set(items.map((r) => r.id)).size === items.length)
        return await this.transitions.start(items);
      return await withRetriedTx(this.ctx.pool, (tx) => this.apply(tx, items, gen));
    } catch (err) {
      if (items.length === 1) return [err as Error];
      // Find the report that fails the batch: each alone, so the others are recorded.
      return Promise.all(
        items.map((it) =>
          withRetriedTx(this.ctx.pool, (tx) => this.apply(tx, [it], gen)).then(
            (o) => o[0]!,
            (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
          ),
        ),
      );
    }
  }

  /**
   * Applies the reports in rounds: a batched transition answers per container, so a container reported
   * twice with the same kind (an agent's consecutive log calls, a resent exit) goes in a later round, in
   * the order the reports came.
   */
  private async apply(tx: Tx, items: Report[], gen: (r: Report) => number | null): Promise<ReportOutcome[]> {
    const rounds: Report[][] = [];
    const seen = new Map<string, number>();
    for (const r of items) {
      const key = `${r.kind}:${r.id}`;
      const n = seen.get(key) ?? 0;
      seen.set(key, n + 1);
      (rounds[n] ??= []).push(r);
    }
    const out = new Map<Report, ReportOutcome>();
    for (const round of rounds) await this.round(tx, round, gen, out);
    return items.map((r) => out.get(r)!);
  }

  /** One round: each container at most once per kind; starts, then logs, then ends. */
  private async round(
    tx: Tx,
    items: Report[],
    gen: (r: Report) => number | null,
    out: Map<Report, ReportOutcome>,
  ): Promise<void> {
    const starts = items.filter((r) => r.kind === 'start');
    const started = await startContainers(
      this.ctx,
      tx,
      starts.map((r) => ({ id: r.id, node: r.node, generation: gen(r) })),
    );
    starts.forEach((r, i) => out.set(r, started[i]!));
    const logs = items.filter((r): r is Extract<Report, { kind: 'logs' }> => r.kind === 'logs');
    const appended = await appendLogs(
      this.ctx,
      tx,
      logs.map((r) => ({ id: r.id, node: r.node, generation: gen(r), chunks: r.chunks })),
    );
    logs.forEach((r, i) => out.set(r, appended[i]!));
    const ends = items.filter((r): r is Extract<Report, { kind: 'end' }> => r.kind === 'end');
    const ended = await endContainers(
      this.ctx,
      tx,
      ends.map((r) => ({ id: r.id, actor: { kind: 'agent', node: r.node, generation: gen(r) }, end: r.end })),
    );
    ends.forEach((r, i) => out.set(r, ended[i]!));
  }
}
