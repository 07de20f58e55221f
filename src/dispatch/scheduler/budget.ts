// Work-proportional boots (issue 14, `boot_budget` = k): a step's fan-out gets no more new capacity than
// its work keeps busy. For the containers of one step (durations.ts runKey of their request name), the
// vcpus they hold on capacity that is not up yet (booting instances, instances planned in this pass) may
// reach Σ vcpus × expected run time of the step's containers that need such capacity, / (k × the expected
// boot time): each new vcpu is then expected busy for k boot times. The step's other containers wait for
// room (on the instances booting for it, or on running ones: wait_for_running). Long tasks get all they
// ask; a fan-out of 1,000 tasks of seconds shares a few instances instead of booting room for all of it.
//
// The expected boot time is the one measured (the snapshot's estimates, the median of recent boots), else
// the `boot_estimate` prior: before any instance has booted (a fresh install, a restarted dispatcher) a
// step whose run time is known gets its budget at once, not one instance at a time until the first boot
// ends (a 1,000-task first fan-out would otherwise wait a whole boot before growing).
//
// A step whose run time is not known yet (no history, no expected run time of its own) counts what its
// running containers show: the longest any of them has run so far is a lower bound of its run time, and
// the budget grows with it (the plan is valid until the next container would be allowed). With nothing
// of the step running, it is a slow start: one container's worth at a time (always allowed when nothing
// is booting for the step, so that every step makes progress). Containers without a name are not
// counted (no step): the rule leaves them alone.
import type { Slot } from './capacity.js';
import { bootTimeMs, runKey } from './durations.js';
import type { Pass } from './pass.js';
import type { SnapshotContainer } from './types.js';

interface Step {
  /** vcpu·ms of the step's containers whose run time is known, still to be served by capacity not up yet. */
  known: number;
  /** vcpus of those whose run time is not known (each counts the lower bound `since`). */
  unknown: number;
  /** vcpus of the step's containers on capacity that is not up yet. */
  held: number;
  /** The earliest start of a Running container of the step (its run time is at least now − this). */
  since: number;
}

export class BootBudget {
  private readonly steps = new Map<string, Step>();
  private readonly stepOf = new Map<SnapshotContainer, Step>();
  private readonly runs: Record<string, number>;

  private constructor(
    private readonly pass: Pass,
    private readonly k: number,
    /** The expected boot time (ms): measured, else the boot_estimate prior. */
    private readonly bootMs: number,
  ) {
    this.runs = pass.snap.estimates?.steps ?? {};
  }

  /** The pass's budget, or null when the rule is off. */
  static of(pass: Pass): BootBudget | null {
    const k = pass.config.bootBudget;
    if (!(k > 0)) return null;
    const b = new BootBudget(pass, k, bootTimeMs(pass));
    const notUp = (id: string | null): boolean => {
      if (id === null || !pass.pool.keeps.has(id)) return false;
      const state = pass.pool.instanceOf.get(id)?.state;
      return state === 'booting' || state === 'unknown';
    };
    for (const c of pass.snap.containers) {
      if (c.name === undefined) continue;
      if (c.state === 'Running') {
        if (c.startedAt === undefined) continue;
        const s = b.step(c);
        s.since = Math.min(s.since, c.startedAt.getTime());
      } else if (c.state === 'Locked' && notUp(c.instance) && c.priority > 0) {
        const s = b.step(c);
        b.add(s, c, 1);
        s.held += c.vcpus;
      }
    }
    for (const c of pass.waiting) if (c.name !== undefined) b.add(b.step(c), c, 1);
    return b;
  }

  private step(c: SnapshotContainer): Step {
    let s = this.stepOf.get(c);
    if (s !== undefined) return s;
    const key = runKey(c.name!);
    s = this.steps.get(key);
    if (s === undefined) this.steps.set(key, (s = { known: 0, unknown: 0, held: 0, since: Infinity }));
    this.stepOf.set(c, s);
    return s;
  }

  /** Adds (sign 1) or takes away (−1) a container's work. */
  private add(s: Step, c: SnapshotContainer, sign: number): void {
    const run = c.expectedRunMs ?? this.runs[runKey(c.name!)];
    if (run === undefined) s.unknown += sign * c.vcpus;
    else s.known += sign * c.vcpus * run;
  }

  /** The step's work to be served by capacity not up yet (vcpu·ms), with unknown run times at their bound. */
  private work(s: Step): number {
    const bound = s.since === Infinity ? 0 : Math.max(0, this.pass.now - s.since);
    return s.known + s.unknown * bound;
  }

  /**
   * Whether the container may have new capacity (a new instance, or a planned one grown): the vcpus its
   * step holds on capacity not up yet, with its own, stay within the budget; or nothing is held for the
   * step yet. When not, the plan is valid until the bound of unknown run times would allow it.
   */
  allows(c: SnapshotContainer): boolean {
    if (c.name === undefined) return true;
    const s = this.step(c);
    if (s.held <= 0) return true;
    const want = (s.held + c.vcpus) * this.k;
    if (this.work(s) >= want * this.bootMs) return true;
    // The work grows with the bound of unknown run times: the budget reaches `want` at this time.
    if (s.unknown > 0 && s.since !== Infinity)
      this.pass.until(s.since + (want * this.bootMs - s.known) / s.unknown);
    return false;
  }

  /**
   * The container was placed: on capacity that is up (ready), its work needs no new capacity; else its
   * vcpus are held on capacity not up yet.
   */
  placed(c: SnapshotContainer, slot: Slot): void {
    if (c.name === undefined) return;
    const s = this.step(c);
    if (slot.ready) this.add(s, c, -1);
    else s.held += c.vcpus;
  }

  /** The container waits for room expected to free up on a running instance: no new capacity serves it. */
  servedLater(c: SnapshotContainer): void {
    if (c.name !== undefined) this.add(this.step(c), c, -1);
  }

  /** A container placed on capacity not up yet was taken off it (rule 5). */
  removed(c: SnapshotContainer, slot: Slot): void {
    if (c.name !== undefined && !slot.ready) this.step(c).held -= c.vcpus;
  }
}
