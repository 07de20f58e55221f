// What a container request does when one of its containers ends (DESIGN §3.3). Pure: the store calls it
// inside the transaction that ends the container and acts on the decision.
import { describeExit } from './exit.js';
import { REQUEST_LIMITS } from './request.js';
import type { FailureClass } from './types.js';

export const TEMP_BACKOFF_BASE_MS = 10_000;
export const TEMP_BACKOFF_CAP_MS = 600_000;

/** How the container ended. */
export interface ContainerEnd {
  state: 'Complete' | 'Cancelled';
  exitCode: number | null;
  failureClass: FailureClass | null;
  reason: string | null;
  /** A process of the container was OOM-killed (with exit 0 still a success, said in the reason). */
  oomKilled?: boolean;
  /**
   * false when no retry can succeed (the scheduler found no instance type that can ever fit it; the image
   * does not exist): the request ends at once instead of spending its attempts. A fact carried as data,
   * like a cloud error's `retryable`.
   */
  retryable: boolean;
  /**
   * The agent reclaimed an opportunistic container (the capacity it borrowed was claimed back by a
   * guaranteed one: src/agent/pressure.ts): a temp failure that spends neither attempts nor temp retries,
   * retried at once.
   */
  reclaimed?: boolean;
}

/** The reason of a reclaimed container's cancel (the agent's report, and the simulator's). */
export function reclaimedReason(why: string): string {
  return `reclaimed: ${why}`;
}

/** The request's retry budget and policy. */
export interface RetryState {
  priority: number;
  attempts: number;
  tempFailures: number;
  containerCountMax: number;
  maxTempRetries: number;
  retryOnFailure: boolean;
}

export type RetryDecision =
  | {
      kind: 'final';
      outcome: 'success' | 'failed' | 'cancelled';
      reason: string;
      attempts: number;
      tempFailures: number;
    }
  | { kind: 'retry'; delayMs: number; attempts: number; tempFailures: number; reason: string };

/** Exponential backoff for the n-th temporary failure (n ≥ 1), capped, with ±20% jitter from rng. */
export function tempBackoffMs(n: number, rng: () => number): number {
  const raw = Math.min(TEMP_BACKOFF_CAP_MS, TEMP_BACKOFF_BASE_MS * 2 ** Math.max(0, n - 1));
  return Math.round(Math.min(TEMP_BACKOFF_CAP_MS, raw * (0.8 + 0.4 * rng())));
}

/**
 * The request's course when it does not depend on the request (a success, a user's cancel): final, with
 * the attempts it adds (its temp failures unchanged); null when decideRetry must read the request.
 */
export type FinalAlone = { outcome: 'success' | 'cancelled'; reason: string; attemptsAdded: 0 | 1 };

export function decideAlone(end: ContainerEnd): FinalAlone | null {
  if (end.state === 'Complete' && end.exitCode === 0)
    return {
      outcome: 'success',
      reason: `completed with ${describeExit(0, end.oomKilled ?? false)}`,
      attemptsAdded: 1,
    };
  if (end.state === 'Cancelled' && end.failureClass === 'user')
    return { outcome: 'cancelled', reason: end.reason ?? 'cancelled', attemptsAdded: 0 };
  return null;
}

export function decideRetry(end: ContainerEnd, req: RetryState, rng: () => number): RetryDecision {
  const alone = decideAlone(end);
  if (alone)
    return {
      kind: 'final',
      outcome: alone.outcome,
      reason: alone.reason,
      attempts: req.attempts + alone.attemptsAdded,
      tempFailures: req.tempFailures,
    };
  if (req.priority === 0) {
    return {
      kind: 'final',
      outcome: 'cancelled',
      reason: 'priority is 0 (withdrawn)',
      attempts: req.attempts,
      tempFailures: req.tempFailures,
    };
  }
  if (end.state === 'Cancelled' && !end.retryable) {
    return {
      kind: 'final',
      outcome: 'failed',
      reason: `${end.reason ?? 'unknown'} (not retryable)`,
      attempts: req.attempts + 1,
      tempFailures: req.tempFailures,
    };
  }
  if (end.state === 'Cancelled' && end.failureClass === 'temp' && end.reclaimed) {
    return {
      kind: 'retry',
      delayMs: 0,
      attempts: req.attempts,
      tempFailures: req.tempFailures,
      // The reclaim's own words (the agent's reclaimedReason, the dispatcher's vacate) already say why.
      reason: end.reason ?? reclaimedReason('its borrowed capacity was claimed back'),
    };
  }
  if (end.state === 'Cancelled' && end.failureClass === 'temp') {
    const temp = req.tempFailures + 1;
    if (temp > req.maxTempRetries) {
      return {
        kind: 'final',
        outcome: 'failed',
        reason: `gave up after ${temp} infrastructure failures (max_temp_retries=${req.maxTempRetries}); last: ${end.reason ?? 'unknown'}`,
        attempts: req.attempts,
        tempFailures: temp,
      };
    }
    return {
      kind: 'retry',
      delayMs: tempBackoffMs(temp, rng),
      attempts: req.attempts,
      tempFailures: temp,
      reason: `infrastructure failure: ${end.reason ?? 'unknown'}`,
    };
  }
  // A non-zero exit or a permanent failure: counts against container_count_max.
  const attempts = req.attempts + 1;
  // The outcome ("failed") is said by whoever shows the reason: the reason itself does not repeat it.
  const what =
    end.state === 'Complete'
      ? describeExit(end.exitCode, end.oomKilled ?? false)
      : (end.reason ?? 'permanent failure');
  if (!req.retryOnFailure || attempts >= req.containerCountMax) {
    const why = req.retryOnFailure
      ? `after ${attempts} of ${req.containerCountMax} attempts`
      : 'retries disabled';
    return {
      kind: 'final',
      outcome: 'failed',
      reason: `${what} (${why})`,
      attempts,
      tempFailures: req.tempFailures,
    };
  }
  return { kind: 'retry', delayMs: 0, attempts, tempFailures: req.tempFailures, reason: what };
}

/**
 * When a retry may run: after its backoff, and never before the request's own run_after ("not before").
 * Null when neither holds it back. Times in ms.
 */
export function retryRunAfter(nowMs: number, delayMs: number, requested: number | null): number | null {
  const backoffUntil = delayMs > 0 ? nowMs + delayMs : null;
  if (backoffUntil === null) return requested;
  return requested === null ? backoffUntil : Math.max(requested, backoffUntil);
}

/**
 * The ram a request's retry asks for after its container was OOM-killed (issue 16, "grow instead of fail"):
 * ram × `factor`, rounded up to a whole MiB and capped by `largestRam` (the most any offered instance type
 * holds; null: unknown, so only the request limit caps it). Null when it does not grow: no factor, no
 * OOM kill, or already at the cap. The store's transitions and the simulator's queue both use it.
 */
export function grownRam(
  end: Pick<ContainerEnd, 'state' | 'exitCode' | 'oomKilled'>,
  ram: number,
  factor: number | null,
  largestRam: number | null,
): number | null {
  if (factor === null || factor <= 1) return null;
  if (end.state !== 'Complete' || !end.oomKilled || end.exitCode === 0) return null;
  const cap = Math.min(largestRam ?? REQUEST_LIMITS.maxBytes, REQUEST_LIMITS.maxBytes);
  const next = Math.min(Math.ceil((ram * factor) / MIB) * MIB, cap);
  return next > ram ? next : null;
}

const MIB = 1024 ** 2;
