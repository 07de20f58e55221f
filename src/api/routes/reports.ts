// Agents' reports (starts, log chunks, exits, cancels) as the API takes them, through the store's group
// commit (src/store/reports.ts): the batched endpoint answers per report; the single-container endpoints
// (start, complete, logs, an agent's cancel) send a batch of one and throw its refusal.
import { refusalError } from '../../store/errors.js';
import type { Report, ReportOutcome } from '../../store/reports.js';
import { REFUSAL_STATUS } from '../errors.js';
import type { ReportBody } from '../schemas.js';
import type { ApiDeps } from '../server.js';

/** The store's report for an API report of the agent of `node`. */
export function toReport(r: ReportBody, node: string): Report {
  const base = { id: r.id, node, token: r.lock_token };
  switch (r.kind) {
    case 'start':
      return { ...base, kind: 'start' };
    case 'logs':
      return { ...base, kind: 'logs', chunks: r.chunks };
    case 'exit':
      return {
        ...base,
        kind: 'end',
        end: {
          state: 'Complete',
          exitCode: r.exit_code,
          oomKilled: r.oom_killed ?? false,
          usage: r.usage ?? null,
          reason: r.reason ?? null,
        },
      };
    case 'cancel':
      return {
        ...base,
        kind: 'end',
        end: {
          state: 'Cancelled',
          failureClass: r.class,
          reason: r.reason,
          retryable: r.retryable ?? true,
          interrupted: r.interrupted ?? false,
          reclaimed: r.reclaimed ?? false,
        },
      };
  }
}

/** A report's result as the API answers it: done (with the chunks appended, for logs) or why not. */
export function reportResult(o: ReportOutcome) {
  if (o.ok) return 'appended' in o ? { id: o.id, ok: true, appended: o.appended } : { id: o.id, ok: true };
  return { id: o.id, ok: false, error: { status: REFUSAL_STATUS[o.code], code: o.code, message: o.reason } };
}

/**
 * Sends the reports; the containers they started go to the queue-to-start metric, read after the answer
 * (the agent starts the container on it: a metric is no reason to wait, docs/PERFORMANCE.md end to end).
 */
export async function sendReports(deps: ApiDeps, reports: Report[]): Promise<ReportOutcome[]> {
  const out = await deps.store.reports.send(reports);
  const started = reports.filter((r, i) => r.kind === 'start' && out[i]!.ok).map((r) => r.id);
  if (started.length > 0)
    void deps.store.containers.getMany(started).then(
      (cs) => cs.forEach((c) => deps.started(c)),
      () => {}, // the server is stopping: the metric misses these starts
    );
  return out;
}

/** One report, its refusal thrown (404, 403, 409). */
export async function report(deps: ApiDeps, r: Report): Promise<ReportOutcome> {
  const [o] = await sendReports(deps, [r]);
  if (!o!.ok) throw refusalError(o!);
  return o!;
}
