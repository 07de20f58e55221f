// The report's wait breakdown (`berth sim --wait-causes`): what the containers' waits were spent on
// (src/sim/wait-causes.ts), over all started containers and over the tail (those that waited at least the
// p90 wait), and the steps (durations.ts runKey of the request name) with the most containers in the tail,
// with their fan-out (how many containers of the step arrive at one instant) and run time.
import { runKey } from '../../dispatch/scheduler/durations.js';
import { CAUSES, type Cause } from '../wait-causes.js';
import type { ContainerRecord } from './input.js';
import { percentile, round } from './stats.js';

/** Seconds by cause. */
export type ByCause = Record<Cause, number>;

/** One step's waits. Times in seconds; `tail` counts its containers in the report's tail. */
export interface StepWaits {
  step: string;
  containers: number;
  /** Median over its containers of how many containers of the step arrived at the same instant. */
  fanOut: number;
  runP50: number | null;
  waitP50: number;
  waitP90: number;
  tail: number;
  /** Mean seconds by cause over its containers in the tail. */
  tailMean: ByCause;
}

export interface WaitCausesSection {
  /** Mean seconds by cause over the started containers (they add up to the mean wait). */
  mean: ByCause;
  /** The containers that waited at least `threshold` (the p90 wait, s): how many, mean seconds by cause. */
  tail: { threshold: number; containers: number; mean: ByCause };
  /** The steps with the most containers in the tail (at most TOP_STEPS), most first; unnamed: "". */
  steps: StepWaits[];
}

/** How many steps the section lists. */
export const TOP_STEPS = 10;

function meanBy(list: readonly ContainerRecord[]): ByCause {
  const sum = new Array<number>(CAUSES.length).fill(0);
  for (const c of list) c.waitCauses!.forEach((ms, i) => (sum[i]! += ms));
  const out = {} as ByCause;
  CAUSES.forEach((k, i) => (out[k] = list.length === 0 ? 0 : round(sum[i]! / list.length / 1000, 3)));
  return out;
}

const seconds = (xs: number[]): Float64Array => Float64Array.from(xs, (x) => x / 1000).sort();

/** The section, or null when no started container recorded its causes. */
export function waitCausesSection(containers: readonly ContainerRecord[]): WaitCausesSection | null {
  const started = containers.filter((c) => c.start !== null && c.waitCauses !== undefined);
  if (started.length === 0) return null;
  const wait = (c: ContainerRecord): number => c.start! - c.arrival;
  const threshold = percentile(seconds(started.map(wait)), 90)!;
  const inTail = (c: ContainerRecord): boolean => wait(c) / 1000 >= threshold;
  const tail = started.filter(inTail);

  const bySteps = new Map<string, ContainerRecord[]>();
  for (const c of started) {
    const key = c.name === undefined ? '' : runKey(c.name);
    const list = bySteps.get(key);
    if (list === undefined) bySteps.set(key, [c]);
    else list.push(c);
  }
  const steps: StepWaits[] = [];
  for (const [step, list] of bySteps) {
    const atOnce = new Map<number, number>();
    for (const c of list) atOnce.set(c.arrival, (atOnce.get(c.arrival) ?? 0) + 1);
    const waits = seconds(list.map(wait));
    const runs = seconds(list.filter((c) => c.end !== null).map((c) => c.end! - c.start!));
    const stepTail = list.filter(inTail);
    steps.push({
      step,
      containers: list.length,
      fanOut: percentile(Float64Array.from(list, (c) => atOnce.get(c.arrival)!).sort(), 50)!,
      runP50: runs.length === 0 ? null : round(percentile(runs, 50)!, 3),
      waitP50: round(percentile(waits, 50)!, 3),
      waitP90: round(percentile(waits, 90)!, 3),
      tail: stepTail.length,
      tailMean: meanBy(stepTail),
    });
  }
  steps.sort((a, b) => b.tail - a.tail || b.containers - a.containers || (a.step < b.step ? -1 : 1));
  return {
    mean: meanBy(started),
    tail: { threshold: round(threshold, 3), containers: tail.length, mean: meanBy(tail) },
    steps: steps.slice(0, TOP_STEPS),
  };
}
