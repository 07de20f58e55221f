// Opportunistic containers in the simulator (issue 16 item 6). The scheduler's placement is the real one
// (src/dispatch/scheduler/opportunistic.ts); this is the agent's side, modelled: the traces record only a
// job's average use, so a seeded share of guaranteed jobs (`opportunistic.claim_probability`) grows to its
// whole request at a random point of its run. Then the agent, at once (freezing is instantaneous here),
// requeues the opportunistic containers on that instance, largest memory first, until what everything
// uses fits the instance again. A guaranteed container that still would not fit after every borrower is
// gone was promised capacity it could not get: counted as `guaranteedShort` (must stay 0).
import type { Rng } from '../model/clock.js';
import type { InstanceType } from '../model/types.js';
import type { SimContainer, SimQueue, SimRequestSpec } from './queue.js';
import type { Usage } from './workload/types.js';

/** What the opportunistic side of a run did. */
export interface OpportunisticStats {
  /** Containers submitted as opportunistic. */
  submitted: number;
  /** Guaranteed containers that grew to their whole request. */
  grew: number;
  /** Growths that had to take capacity back from opportunistic containers. */
  claimsBack: number;
  /** Opportunistic containers frozen and requeued for them. */
  requeued: number;
  /** Growths that did not fit even with every borrower gone (the guarantee broken): must be 0. */
  guaranteedShort: number;
  /** Opportunistic containers the scheduler took off an instance no guaranteed one was left on (vacate.ts). */
  vacated: number;
}

/** The usage a job's agent would sample, from its trace (averages over its run), within its request. */
export function traceUse(job: {
  vcpus: number;
  ram: number;
  duration: number;
  usage?: Usage;
}): { vcpus: number; ram: number } | undefined {
  const u = job.usage;
  if (u === undefined || u.cpuSeconds === null || u.peakRam === null) return undefined;
  return {
    vcpus: Math.min(job.vcpus, u.cpuSeconds / Math.max(1e-3, job.duration / 1000)),
    ram: Math.min(job.ram, u.peakRam),
  };
}

/**
 * The opportunistic fields of a job's request: whether it is opportunistic (drawn, unless the job says so:
 * `given`), and when it grows.
 */
export function opportunisticFields(
  duration: number,
  use: { vcpus: number; ram: number } | undefined,
  o: { fraction: number; claimProbability: number },
  rng: Rng,
  given?: boolean,
): Pick<SimRequestSpec, 'opportunistic' | 'use' | 'growAtMs'> {
  // Every draw every time, so one job's choice does not shift the next one's.
  const pick = rng();
  const grow = rng();
  const when = rng();
  if (use === undefined) return {};
  if (given ?? pick < o.fraction) return { opportunistic: true, use };
  return { use, growAtMs: grow < o.claimProbability ? Math.floor(when * duration) : null };
}

export class ClaimBack {
  readonly stats: OpportunisticStats = {
    submitted: 0,
    grew: 0,
    claimsBack: 0,
    requeued: 0,
    guaranteedShort: 0,
    vacated: 0,
  };

  constructor(private readonly queue: SimQueue) {}

  /** `grown` grew to its request on an instance of `type` where `running` run: take back what it needs. */
  grew(type: InstanceType, ramOverhead: number, nodeId: string, running: SimContainer[]): void {
    this.stats.grew++;
    const useOf = (c: SimContainer) => {
      const u = c.request.spec.use;
      return c.grown || u === undefined ? { vcpus: c.request.spec.vcpus, ram: c.ram } : u;
    };
    const over = (list: SimContainer[]) => {
      let cpu = 0;
      let ram = 0;
      for (const c of list) {
        const u = useOf(c);
        cpu += u.vcpus;
        ram += u.ram;
      }
      return cpu > type.vcpus + 1e-9 || ram > type.ram - ramOverhead;
    };
    let live = running.filter((c) => c.state === 'Running');
    if (!over(live)) return;
    this.stats.claimsBack++;
    const borrowers = live
      .filter((c) => c.request.spec.opportunistic)
      .sort((a, b) => useOf(b).ram - useOf(a).ram || (a.id < b.id ? -1 : 1));
    for (const o of borrowers) {
      if (!over(live)) break;
      this.queue.requeueFrozen(
        o.id,
        nodeId,
        o.generation,
        'a guaranteed container claimed its capacity back',
      );
      this.stats.requeued++;
      live = live.filter((c) => c !== o);
    }
    if (over(live)) this.stats.guaranteedShort++;
  }
}
