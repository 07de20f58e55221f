// A lower bound on what any schedule of a workload must pay (docs/SIMULATOR.md, "Cost lower bound").
//
// Definition. Let a container c run for d_c hours and need r_c = (vcpus, ram, gpus). For a weight vector
// w = (w_vcpus, w_ram, w_gpus) with w ≥ 0 and Σw = 1, give c on type T the share
//     share_w(c, T) = d_c · price_T · Σ_k w_k · r_c,k / T_k          (a term is 0 when r_c,k = 0)
// and let LB_w = Σ_c min over the types T that fit c of share_w(c, T). The bound is LB = max_w LB_w over
// a grid of weights (steps of 1/10 by default).
//
// Why it holds. On any instance i of type T alive for L_i hours, the containers on it never exceed T's
// resources at any moment, so Σ_{c on i} d_c · r_c,k ≤ L_i · T_k for each k. Multiplying by
// price_T · w_k / T_k and summing over k gives Σ_{c on i} share_w(c, T) ≤ L_i · price_T: the shares of
// an instance's containers never exceed what the instance costs. Each container's share on its actual
// type is at least its minimum over fitting types, so summing over instances, LB_w ≤ total cost, for
// every w; hence the max too. Boot time, idle time and fragmentation only add to the real cost.
//
// The tempting per-container "duration × price × max(vcpus/T.vcpus, ram/T.ram)" is NOT a lower bound:
// a vcpu-heavy and a ram-heavy container can share one instance and would each be charged the whole
// of it. Fixed weights are what keep the sum of shares within the instance's price.
import type { InstanceType } from '../model/types.js';

/** What the bound needs to know about one container. */
export interface Demand {
  vcpus: number;
  ram: number;
  scratch: number;
  gpus: number;
  preemptible: boolean;
  /** Run time in ms. */
  duration: number;
}

/** The bound and how it was reached. */
export interface LowerBound {
  /** In the catalog's currency. */
  cost: number;
  /** The weights (vcpus, ram, gpus) that gave the highest bound. */
  weights: { vcpus: number; ram: number; gpus: number };
  /** Containers no type fits: left out of the bound (no schedule can run them). */
  unfit: number;
  /** The price per hour of the cheapest type that fits some container; null when none fits. */
  cheapestInstance: number | null;
}

/** Whether type `t` can host `d` on its own: every resource fits, and only preemptible work goes on spot. */
export function fits(d: Omit<Demand, 'duration'>, t: InstanceType): boolean {
  return (
    d.vcpus <= t.vcpus &&
    d.ram <= t.ram &&
    d.scratch <= t.scratch &&
    d.gpus <= t.gpus &&
    (d.preemptible || !t.preemptible)
  );
}

interface Shape {
  vcpus: number;
  ram: number;
  gpus: number;
  hours: number;
  types: InstanceType[];
}

function share(s: Shape, t: InstanceType, wv: number, wr: number, wg: number): number {
  const v = s.vcpus > 0 ? (wv * s.vcpus) / t.vcpus : 0;
  const r = s.ram > 0 ? (wr * s.ram) / t.ram : 0;
  const g = s.gpus > 0 ? (wg * s.gpus) / t.gpus : 0;
  return t.price * (v + r + g);
}

/**
 * Computes the bound. Containers of identical shape are grouped first, so the cost is
 * O(containers + shapes × types × grid points).
 */
export function costLowerBound(demands: Iterable<Demand>, types: InstanceType[], steps = 10): LowerBound {
  if (!Number.isInteger(steps) || steps < 1)
    throw new Error(`steps: expected a whole number >= 1, got ${steps}`);
  const shapes = new Map<string, Shape>();
  let unfit = 0;
  let anyGpu = false;
  for (const d of demands) {
    const key = `${d.vcpus}|${d.ram}|${d.scratch}|${d.gpus}|${d.preemptible}`;
    let s = shapes.get(key);
    if (s === undefined) {
      s = { vcpus: d.vcpus, ram: d.ram, gpus: d.gpus, hours: 0, types: types.filter((t) => fits(d, t)) };
      shapes.set(key, s);
    }
    if (s.types.length === 0) {
      unfit++;
      continue;
    }
    s.hours += d.duration / 3_600_000;
    if (d.gpus > 0) anyGpu = true;
  }
  const fitting = [...shapes.values()].filter((s) => s.types.length > 0);
  let cheapest: number | null = null;
  for (const s of fitting)
    for (const t of s.types) if (cheapest === null || t.price < cheapest) cheapest = t.price;

  let best: LowerBound = {
    cost: 0,
    weights: { vcpus: 1, ram: 0, gpus: 0 },
    unfit,
    cheapestInstance: cheapest,
  };
  for (let i = 0; i <= steps; i++)
    for (let j = 0; i + j <= steps; j++) {
      const k = steps - i - j;
      // Without GPU work, weight on GPUs only lowers the bound.
      if (k > 0 && !anyGpu) continue;
      const [wv, wr, wg] = [i / steps, j / steps, k / steps];
      let total = 0;
      for (const s of fitting) {
        let min = Number.POSITIVE_INFINITY;
        for (const t of s.types) min = Math.min(min, share(s, t, wv, wr, wg));
        total += s.hours * min;
      }
      if (total > best.cost)
        best = { cost: total, weights: { vcpus: wv, ram: wr, gpus: wg }, unfit, cheapestInstance: cheapest };
    }
  return best;
}

/**
 * The critical-path bound of a workload that holds one workflow run which completed (docs/SIMULATOR.md,
 * "Critical-path bound"): max(LB, max(C, m) · p), where LB is `lb.cost` (the bound above, over the same
 * completed containers), C the run's critical path in ms, m the billing rule's minimum in ms and p
 * `lb.cheapestInstance`, the price per hour of the cheapest type that fits any of those containers.
 *
 * Why it holds. Let c_1 … c_n be the tasks of a longest path, with run times summing to C. c_{k+1} starts
 * after c_k ends (a child is submitted once its parents have succeeded), so their runs are disjoint in time,
 * and each runs on an instance alive for the whole run, of a type that fits it (price ≥ p). Charging each
 * of those instances p per hour for the time it runs tasks of the path charges at most what it is billed
 * (a life is billed at least as long as it lasts, boot included), so the bill is ≥ C · p; and at least one
 * instance is billed at least the minimum m, so it is ≥ m · p too. It is ≥ LB anyway. With retries the
 * argument holds for the attempt that completed (an attempt that resumes from a checkpoint ran the rest
 * before, on instances alive then). It does not hold for several runs at once (their paths may run side
 * by side on one instance), hence one run only.
 */
export function criticalPathBound(lb: LowerBound, criticalPathMs: number, minimumBilledMs = 0): number {
  if (lb.cheapestInstance === null) return lb.cost;
  return Math.max(lb.cost, (Math.max(criticalPathMs, minimumBilledMs) / 3_600_000) * lb.cheapestInstance);
}
