// Scheduling policies the simulator compares (DESIGN §10): Berth's scheduler and two baselines. Each is
// the real plan() with a different configuration or a wrapper around its output, so every policy runs
// through the same dispatcher, queue, agents and cloud: only the decisions differ.
import { queueOrder } from '../dispatch/scheduler/ordering.js';
import { makePlan, plan } from '../dispatch/scheduler/plan.js';
import type { Action, Plan, SchedulerConfig, Snapshot } from '../dispatch/scheduler/types.js';

import { type PolicyName } from './policy-names.js';
export { isPolicyName, POLICIES, type PolicyName } from './policy-names.js';

/** What a policy hands the dispatcher: its scheduler config and planner. */
export interface Policy {
  name: PolicyName;
  config: SchedulerConfig;
  planner: (s: Snapshot) => Plan;
}

/**
 * fifo: one strict queue, like a single SLURM partition without backfill. The first Queued container (in
 * queue order) that a pass cannot place is the head; every container behind it waits. The pass is then
 * planned again without those containers, so that nothing behind the head holds capacity either: an
 * idle instance they would have taken is free to be shut down to make room for the head (rule 5), as a
 * machine nobody may use would be. Locked containers come before Queued ones in queue order, so work the
 * dispatcher already holds is never held back. Costs a second plan() on passes with a blocked head.
 */
export function fifoPlanner(inner: (s: Snapshot) => Plan): (s: Snapshot) => Plan {
  return (snap) => {
    const first = inner(snap);
    const placed = new Set<string>();
    const cancelled = new Set<string>();
    for (const a of first.actions) {
      if (a.op === 'lock') placed.add(a.container);
      else if (a.op === 'cancel') cancelled.add(a.container);
    }
    const blocked = new Set<string>();
    let head: string | null = null;
    for (const c of queueOrder(snap.containers.filter((x) => x.state === 'Queued' && x.priority > 0))) {
      if (head !== null) blocked.add(c.id);
      else if (!placed.has(c.id) && !cancelled.has(c.id)) head = c.id;
    }
    if (blocked.size === 0) return first;
    const p = inner({ ...snap, containers: snap.containers.filter((c) => !blocked.has(c.id)) });
    // Unsatisfiable containers behind the head are still cancelled: they could never run.
    const actions: Action[] = [
      ...p.actions,
      ...first.actions.filter((a) => a.op === 'cancel' && blocked.has(a.container)),
    ];
    const text = `fifo: behind container ${head} at the head of the queue`;
    const statuses = p.statuses;
    const firstTexts = cancelled.size > 0 ? new Map(first.statuses.ownEntries()) : null;
    for (const id of blocked) statuses.own.set(id, cancelled.has(id) ? firstTexts!.get(id)! : text);
    return makePlan(actions, statuses, Math.min(first.validUntil, p.validUntil));
  };
}

/** The policy of a name on top of the run's scheduler config. */
export function makePolicy(name: PolicyName, config: SchedulerConfig): Policy {
  switch (name) {
    case 'berth':
      return { name, config, planner: plan };
    case 'one-per-instance':
      // What Arvados did before packing: the cheapest fitting type, one container per instance, and the
      // instance shut down after the idle timeout (an idle one may take the next container).
      return { name, config: { ...config, maxContainersPerInstance: 1 }, planner: plan };
    case 'fifo':
      return { name, config, planner: fifoPlanner(plan) };
  }
}
