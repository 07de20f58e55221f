// Vacating borrowers (issue 16 item 6; opportunistic_vacate): an instance kept alive only by opportunistic
// containers after its guaranteed ones ended. They borrowed there, maybe on a type beyond their
// max_price_factor (opportunistic_any_type, opportunistic.ts), because the instance was paid for by its
// guaranteed containers; once none is left, the instance costs its whole price for them alone. When that
// is more than they would pay on their own (the sum of their cheapest types' prices × max_price_factor:
// each shape's maxPrice), they are taken off it, as a reclaim: cancelled temp with `reclaimed`, retried at
// once without spending a retry (src/model/retry.ts), resumed from their checkpoint where they keep one,
// and placed like any waiting container. The instance, empty in the next pass, goes by the idle rules
// (shutdown.ts). An instance something was placed on in this pass, or one still paid for anyway
// (min_billing_period), is left alone.
import type { Pass } from './pass.js';
import type { SnapshotContainer } from './types.js';

/** How the reason of a vacating cancel begins (the simulator counts them by it). */
export const VACATED = 'vacated: ';

/**
 * The borrowers to take off an instance of this price holding `list` (see the file comment), or none:
 * every container on it must be a Running opportunistic one (a withdrawn one is killed instead: plan.ts),
 * and what they would pay on their own (their maxPrice) less than the price.
 */
export function toVacate(
  price: number,
  list: SnapshotContainer[],
  maxPriceOf: (c: SnapshotContainer) => number,
): SnapshotContainer[] {
  if (list.length === 0) return [];
  if (!list.every(mayBeVacated)) return [];
  // Summed smallest first, not in the list's order: an instance's list is in input order in a pass from
  // scratch and in another one in a kept pass (kept-pool.ts), and a sum of prices in two orders may
  // differ in its last bit.
  const prices = list.map(maxPriceOf).sort((a, b) => a - b);
  let pay = 0;
  for (const p of prices) pay += p;
  return price > pay * (1 + 1e-9) ? list : [];
}

/** Adds the pass's vacating cancels (opportunistic_vacate). */
export function vacate(pass: Pass): void {
  if (!pass.config.opportunisticVacate) return;
  const { pool, config } = pass;
  const slots = pool.slots;
  // An incremental planner keeps the slots worth looking at while its pool view is the same (kept-pool.ts).
  const look = pass.kept?.pool.vacating(pass.now, config.minBillingPeriodMs, (i) => candidate(pass, i));
  const n = look?.length ?? slots.length;
  for (let k = 0; k < n; k++) {
    const slot = slots[look === undefined ? k : look[k]!]!;
    if (slot.used || !slot.ready || slot.bin !== null) continue;
    const inst = pool.instanceOf.get(slot.id);
    const containers = pass.assigned.get(slot.id);
    if (inst === undefined || containers === undefined) continue;
    const paidUntil = inst.createdAt.getTime() + config.minBillingPeriodMs;
    if (pass.now < paidUntil) {
      pass.until(paidUntil);
      continue;
    }
    const gone = toVacate(slot.type.price, containers, (c) => pass.shapes.get(c).maxPrice);
    if (gone.length === 0) continue;
    const reason =
      `${VACATED}no guaranteed container is left on instance ${slot.id} (${slot.type.name}, ` +
      `${slot.type.price}/h), more than its ${gone.length} opportunistic container(s) would pay on their own`;
    for (const c of gone)
      pass.cancels.push({ op: 'cancel', container: c.id, class: 'temp', reason, reclaimed: true });
  }
}

/**
 * Whether vacate may act on the pool's slot i or hear the clock from it, in this pass or a later one with the
 * same pool view and a later clock: ready, with assigned containers, and still within the billing period
 * or holding only borrowers. The others stay out of it as the clock moves (kept-pool.ts vacating).
 */
function candidate(pass: Pass, i: number): boolean {
  const { pool, config } = pass;
  const slot = pool.slots[i]!;
  const inst = pool.instanceOf.get(slot.id);
  const containers = pass.assigned.get(slot.id);
  if (!slot.ready || inst === undefined || containers === undefined) return false;
  const paid = pass.now >= inst.createdAt.getTime() + config.minBillingPeriodMs;
  return !paid || containers.every(mayBeVacated);
}

/** What toVacate asks of every container on an instance, whatever the prices. */
function mayBeVacated(c: SnapshotContainer): boolean {
  return c.opportunistic === true && c.state === 'Running' && c.priority > 0;
}
