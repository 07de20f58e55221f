// Idle shutdown (DESIGN §6.3, §6.2 rule 5): which idle instances to give back after placing work.
import { formatDuration } from '../../model/units.js';
import type { Slot } from './capacity.js';
import type { Shutdown } from './pool.js';
import type { SchedulerConfig, SnapshotInstance } from './types.js';

/** Whether `now` lies in the last shutdown window of the instance's current billing period. */
export function inShutdownWindow(config: SchedulerConfig, createdAt: number, now: number): boolean {
  // Both must be set for the window to apply (a zero window would otherwise forbid every shutdown).
  if (config.billingPeriodMs <= 0 || config.shutdownWindowMs <= 0) return true;
  const intoPeriod =
    (((now - createdAt) % config.billingPeriodMs) + config.billingPeriodMs) % config.billingPeriodMs;
  return intoPeriod >= config.billingPeriodMs - config.shutdownWindowMs;
}

/**
 * Idle instances to shut down. An idle, empty, unused slot goes when it has been idle longer than
 * idle_timeout (inside its billing window), or at once when a limit blocks the head of the queue: no
 * waiting container could use it (else one would have been placed on it) and it holds room the head
 * needs. Never below min_instances: the longest-idle go first.
 */
export function idleShutdowns(
  slots: Slot[],
  instanceOf: Map<string, SnapshotInstance>,
  config: SchedulerConfig,
  now: number,
  liveAfter: number,
  headBlock: { container: string; limit: string } | null,
): Shutdown[] {
  const candidates: { inst: SnapshotInstance; reason: string }[] = [];
  for (const s of slots) {
    const inst = instanceOf.get(s.id);
    if (inst === undefined || s.used || s.count > 0 || inst.state !== 'idle') continue;
    const idleFor = now - inst.stateSince.getTime();
    if (headBlock !== null) {
      candidates.push({
        inst,
        reason: `idle and no waiting container can use it; ${headBlock.limit} blocks container ${headBlock.container}`,
      });
    } else if (idleFor > config.idleTimeoutMs && inShutdownWindow(config, inst.createdAt.getTime(), now)) {
      candidates.push({
        inst,
        reason: `idle for ${formatDuration(idleFor)} (idle_timeout=${formatDuration(config.idleTimeoutMs)})`,
      });
    }
  }
  candidates.sort(
    (a, b) => a.inst.stateSince.getTime() - b.inst.stateSince.getTime() || (a.inst.id < b.inst.id ? -1 : 1),
  );
  const out: Shutdown[] = [];
  let live = liveAfter;
  for (const c of candidates) {
    if (live <= config.minInstances) break;
    out.push({ instance: c.inst.id, reason: c.reason });
    live--;
  }
  return out;
}
