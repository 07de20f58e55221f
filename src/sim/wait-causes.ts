// Where containers' waits go (`berth sim --wait-causes`): the time from a container's arrival to its start,
// split by what the scheduler's statuses said it waited for (status.ts waitCause), pass by pass. A status
// holds from the pass that gave it until the next pass that gives another; the time before the first pass
// that lists the container is `unseen`. Opt-in: it reads every waiting container's status in every pass
// that planned afresh, a cost a million-container run should not pay unasked.
import { WAIT_CAUSES, waitCause, type WaitCause } from '../dispatch/scheduler/status.js';
import type { Statuses } from '../dispatch/scheduler/statuses.js';

/** The breakdown's causes: the statuses' and `unseen`. */
export const CAUSES = [...WAIT_CAUSES, 'unseen'] as const;
export type Cause = WaitCause | 'unseen';

const UNSEEN = CAUSES.indexOf('unseen');

export class WaitCauses {
  /** Each waiting container's cause (index into CAUSES), since when, and when a pass first listed it (ms). */
  private readonly current = new Map<string, { cause: number; since: number; first: number }>();
  /** Ms spent by cause so far, by container. */
  private readonly spent = new Map<string, Float64Array>();
  private last: Statuses | null = null;
  /** Cause index by reason index of the last statuses (a reason is shared by many containers). */
  private reasonCause: number[] = [];

  /** A pass's statuses at `now` (ms). A reused plan hands the same object over: nothing changed. */
  observe(st: Statuses, now: number): void {
    if (st === this.last) return;
    this.last = st;
    this.reasonCause = st.reasons.map((r) => CAUSES.indexOf(waitCause(r)));
    for (const [id, text] of st.ownEntries()) this.see(id, CAUSES.indexOf(waitCause(text)), now);
    for (let i = 0; i < st.waiting.length; i++)
      this.see(st.waiting[i]!.id, this.reasonCause[st.reasonOf[i]!]!, now);
  }

  private see(id: string, cause: number, now: number): void {
    const cur = this.current.get(id);
    if (cur === undefined) {
      this.current.set(id, { cause, since: now, first: now });
      return;
    }
    if (cur.cause === cause) return;
    this.add(id, cur.cause, now - cur.since);
    cur.cause = cause;
    cur.since = now;
  }

  private add(id: string, cause: number, ms: number): void {
    let s = this.spent.get(id);
    if (s === undefined) this.spent.set(id, (s = new Float64Array(CAUSES.length)));
    s[cause]! += ms;
  }

  /** The container started at `start` (ms), queued at `arrival`: its wait by cause (ms, CAUSES order). */
  started(id: string, arrival: number, start: number): number[] {
    const cur = this.current.get(id);
    if (cur === undefined) this.add(id, UNSEEN, start - arrival);
    else {
      this.add(id, UNSEEN, cur.first - arrival);
      this.add(id, cur.cause, start - cur.since);
    }
    const out = Array.from(this.spent.get(id)!);
    this.forget(id);
    return out;
  }

  /** The container ended or was cancelled: nothing more is counted for it. */
  forget(id: string): void {
    this.current.delete(id);
    this.spent.delete(id);
  }
}
