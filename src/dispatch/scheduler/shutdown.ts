// Idle shutdown (DESIGN §6.3, §6.2 rule 5, issue 14): which idle instances to give back after placing work.
//
// An idle instance costs its price for as long as it waits; giving it back and booting another later
// costs a boot (paid, and waited for). So an idle instance is kept while it is likely to be used soon
// and released promptly otherwise:
// - it is paid for anyway until min_billing_period after its creation: kept that long;
// - of the idle instances of one type, as many are kept warm as arrivals that could use them are expected
//   within idle_timeout at the recent arrival rate (reuse.ts), the most recently idle first, each for at
//   most max_idle_time;
// - the rest go at once (inside their billing window when billing_period and shutdown_window are set).
// When a limit blocks the head of the queue, every idle instance no waiting container can use goes at
// once to make room (rule 5). Never below min_instances: the longest-idle go first.
import { formatDuration } from '../../model/units.js';
import type { Slot } from './capacity.js';
import type { Shutdown } from './pool.js';
import type { SchedulerConfig, SnapshotInstance } from './types.js';

/** Whether `now` lies in the last shutdown window of the instance's current billing period. */
export function inShutdownWindow(config: SchedulerConfig, createdAt: number, now: number): boolean {
  return shutdownWindow(config, createdAt, now).open;
}

/** Whether the shutdown window is open now, and when that next changes. */
function shutdownWindow(
  config: SchedulerConfig,
  createdAt: number,
  now: number,
): { open: boolean; changesAt: number } {
  // Both must be set for the window to apply (a zero window would otherwise forbid every shutdown).
  const period = config.billingPeriodMs;
  if (period <= 0 || config.shutdownWindowMs <= 0) return { open: true, changesAt: Infinity };
  const intoPeriod = (((now - createdAt) % period) + period) % period;
  const opensAt = period - config.shutdownWindowMs;
  return intoPeriod >= opensAt
    ? { open: true, changesAt: now + (period - intoPeriod) }
    : { open: false, changesAt: now + (opensAt - intoPeriod) };
}

/** What the idle decision looks at. */
export interface IdleInputs {
  slots: Slot[];
  instanceOf: ReadonlyMap<string, SnapshotInstance>;
  config: SchedulerConfig;
  now: number;
  /** Live instances after the shutdowns already decided. */
  liveAfter: number;
  /** The limit that blocks the head of the queue (rule 5), or null. */
  headBlock: { container: string; limit: string } | null;
  /** Arrivals per ms that could use each type, by type index (reuse.ts). */
  arrivalRates: Float64Array;
  /** Records when a decision made now would flip (the plan's validUntil). */
  until: (at: number) => void;
  /** Idle instances kept for arrivals expected when running containers end (boot_ahead, ahead.ts). */
  keep?: Set<string>;
}

/** Idle instances to shut down (see the file comment). */
export function idleShutdowns(o: IdleInputs): Shutdown[] {
  const { config } = o;
  const idle: { slot: Slot; inst: SnapshotInstance }[] = [];
  for (const slot of o.slots) {
    const inst = o.instanceOf.get(slot.id);
    if (
      inst !== undefined &&
      !slot.used &&
      slot.count === 0 &&
      inst.state === 'idle' &&
      !o.keep?.has(slot.id)
    )
      idle.push({ slot, inst });
  }
  const candidates: { inst: SnapshotInstance; reason: string }[] = [];
  if (o.headBlock !== null) {
    const { limit, container } = o.headBlock;
    for (const { inst } of idle)
      candidates.push({
        inst,
        reason: `idle and no waiting container can use it; ${limit} blocks container ${container}`,
      });
  } else {
    // Most recently idle first: those are the ones kept warm.
    idle.sort(
      (a, b) => b.inst.stateSince.getTime() - a.inst.stateSince.getTime() || (a.inst.id < b.inst.id ? -1 : 1),
    );
    const warmByType = new Map<number, number>();
    for (const { slot, inst } of idle) {
      const reason = keepOrGo(o, slot, inst, warmByType);
      if (reason !== null) candidates.push({ inst, reason });
    }
  }
  candidates.sort(
    (a, b) => a.inst.stateSince.getTime() - b.inst.stateSince.getTime() || (a.inst.id < b.inst.id ? -1 : 1),
  );
  const out: Shutdown[] = [];
  let live = o.liveAfter;
  for (const c of candidates) {
    if (live <= config.minInstances) break;
    out.push({ instance: c.inst.id, reason: c.reason });
    live--;
  }
  return out;
}

/** Why an idle instance goes now, or null when it is kept; records when that would change. */
function keepOrGo(
  o: IdleInputs,
  slot: Slot,
  inst: SnapshotInstance,
  warmByType: Map<number, number>,
): string | null {
  const { config, now } = o;
  const idleSince = inst.stateSince.getTime();
  const paidUntil = inst.createdAt.getTime() + config.minBillingPeriodMs;
  if (now < paidUntil) {
    o.until(paidUntil);
    return null;
  }
  const idleFor = now - idleSince;
  const warm = warmByType.get(slot.typeIndex) ?? 0;
  const expected = o.arrivalRates[slot.typeIndex]! * config.idleTimeoutMs;
  const keptUntil = idleSince + config.maxIdleTimeMs;
  if (warm + 1 <= expected && now < keptUntil) {
    warmByType.set(slot.typeIndex, warm + 1);
    o.until(keptUntil);
    return null;
  }
  const window = shutdownWindow(config, inst.createdAt.getTime(), now);
  o.until(window.changesAt);
  if (!window.open) return null;
  const idle = `idle for ${formatDuration(idleFor)}`;
  const within = `within idle_timeout=${formatDuration(config.idleTimeoutMs)}`;
  if (warm + 1 <= expected) return `${idle} (max_idle_time=${formatDuration(config.maxIdleTimeMs)})`;
  if (warm === 0) return `${idle}; no recent arrival is likely to use it ${within}`;
  return `${idle}; recent arrivals are likely to use ${warm} idle instance${warm === 1 ? '' : 's'} of its type ${within}, kept`;
}
