// One scheduler pass (DESIGN §6.2): a pure function of the snapshot. No I/O, no clock, no randomness;
// the same snapshot always gives the same plan, action for action.
//
// Phases, each a function of the pass's state (pass.ts): look at the pool (pool.ts); settle the containers
// that need no place (settle.ts: kill, unlock, cancel); place the waiting ones in queue order (placement.ts) on
// existing capacity or on instances planned together (bins.ts); then shut idle instances down
// (shutdown.ts) and top up the warm pools (ahead.ts warmAhead: sized to the arrival rate; min_instances). Each waiting container gets a status (statuses.ts).
import type { InstanceType } from '../../model/types.js';
import { bootAhead, warmAhead } from './ahead.js';
import { Pass } from './pass.js';
import { placeWaiting } from './placement.js';
import type { KeptPass } from './kept.js';
import { arrivalRates } from './reuse.js';
import { idleShutdowns } from './shutdown.js';
import { settle } from './settle.js';
import { vacate } from './vacate.js';
import type { Statuses } from './statuses.js';
import type { Action, Plan, Snapshot } from './types.js';

/**
 * Runs one scheduling pass. `kept`: what the last passes kept (kept.ts); it changes
 * how fast, never what, the pass decides.
 */
export function plan(snap: Snapshot, kept?: KeptPass): Plan {
  const pass = new Pass(snap, kept);
  settle(pass);
  placeWaiting(pass);
  vacate(pass);
  const ahead = bootAhead(pass);
  warmAhead(pass, ahead);
  const shutdowns = releaseInstances(pass, ahead.keep);
  const warm = [...ahead.creates, ...warmPool(pass, shutdowns.length)];
  return assemble(pass, shutdowns, warm);
}

/**
 * Shutdowns: those the pool view decided (drain, boot timeout, …) and idle instances (shutdown.ts), but
 * not those kept for expected arrivals (ahead.ts).
 */
function releaseInstances(pass: Pass, keep: Set<string>): { instance: string; reason: string }[] {
  const shutdowns = [...pass.pool.shutdowns];
  const head = pass.head;
  shutdowns.push(
    ...idleShutdowns({
      slots: pass.pool.slots,
      instanceOf: pass.pool.instanceOf,
      config: pass.config,
      now: pass.now,
      liveAfter: pass.limits.count - shutdowns.length,
      headBlock: head === null ? null : { container: head.container.id, limit: head.limit },
      arrivalRates: arrivalRates(pass.snap, pass.sortedTypes, pass.shapes),
      until: (at) => pass.until(at),
      keep,
    }),
  );
  return shutdowns;
}

/** Warm pool: tops up to min_instances with the cheapest type we may create. */
function warmPool(pass: Pass, shutdowns: number): InstanceType[] {
  const { limits } = pass;
  const warm: InstanceType[] = [];
  let live = limits.count - shutdowns;
  while (live < pass.config.minInstances) {
    const t = pass.sortedTypes.find(
      (x) => !limits.isUnavailable(x.name) && limits.typeCapped(x) === null && limits.check(x) === null,
    );
    if (t === undefined) break;
    limits.add(t.name, t.price);
    warm.push(t);
    live++;
  }
  return warm;
}

function byContainer(a: Action, b: Action): number {
  const x = 'container' in a ? a.container : '';
  const y = 'container' in b ? b.container : '';
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The plan: kills, cancels, unlocks, shutdowns, then locks and starts in queue order, then creates. */
function assemble(pass: Pass, shutdowns: { instance: string; reason: string }[], warm: InstanceType[]): Plan {
  const creates: Action[] = [];
  for (const s of pass.capacity.slots)
    if (s.createFor !== null && s.createFor.length > 0)
      creates.push({ op: 'create', type: s.type.name, for: s.createFor });
  for (const t of warm) creates.push({ op: 'create', type: t.name, for: [] });
  // Kills, cancels and unlocks were found in input order; sort them so the plan does not depend on it.
  for (const list of [pass.kills, pass.cancels, pass.unlocks]) list.sort(byContainer);
  const actions: Action[] = [
    ...pass.kills,
    ...pass.cancels,
    ...pass.unlocks,
    ...shutdowns.map((s): Action => ({ op: 'shutdown', instance: s.instance, reason: s.reason })),
    ...(pass.placeActions.filter((a) => a !== null) as Action[]),
    ...creates,
  ];
  return makePlan(actions, pass.statuses, pass.validUntil);
}

/** A Plan whose `status` map is built from the grouped statuses when first read. */
export function makePlan(actions: Action[], statuses: Statuses, validUntil: number): Plan {
  let map: Map<string, string> | null = null;
  return {
    actions,
    statuses,
    validUntil,
    get status() {
      return (map ??= statuses.toMap());
    },
  };
}
