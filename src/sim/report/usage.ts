// The report's right-sizing section: per request name, what completed containers asked for and what
// their traces say they used (SWF fields 6 and 7, WfCommons avgCPU and memoryInBytes, JSON cpu_seconds and
// peak_ram), with src/model/rightsize.ts's suggestion — the same rule as `berth usage` over the API —
// and what the suggestion would do to the cost lower bound.
import type { InstanceType } from '../../model/types.js';
import { aggregateUsage, rightSize, type RightSizing, type UsageSample } from '../../model/rightsize.js';
import { costLowerBound, type Demand } from '../lower-bound.js';
import type { ContainerRecord } from './input.js';
import { round } from './stats.js';

export interface RightSizingSection {
  /** One entry per request name ("" for unnamed requests), sorted by name. */
  items: RightSizing[];
  /**
   * The cost lower bound of the completed containers as they asked, and with every container of a
   * name asking for that name's suggestion instead (where there is one).
   */
  lowerBound: { asked: number; rightSized: number };
}

/** Null when no completed container recorded any usage. */
export function rightSizingSection(
  containers: ContainerRecord[],
  types: InstanceType[],
): RightSizingSection | null {
  const measured = (c: ContainerRecord) =>
    c.usage !== undefined && (c.usage.cpuSeconds !== null || c.usage.peakRam !== null);
  // Most traces record no usage: say so without grouping a million containers first.
  if (!containers.some(measured)) return null;
  const byName = new Map<string, { samples: UsageSample[]; records: ContainerRecord[] }>();
  for (const c of containers) {
    // Completed attempts only: an attempt killed with its machine says nothing about what the job needs.
    if (c.exitCode === undefined || c.exitCode === null || c.start === null || c.end === null) continue;
    const key = c.name ?? '';
    let g = byName.get(key);
    if (g === undefined) byName.set(key, (g = { samples: [], records: [] }));
    g.records.push(c);
    g.samples.push({
      vcpus: c.vcpus,
      ram: c.ram,
      runSeconds: (c.end - c.start) / 1000,
      cpuSeconds: c.usage?.cpuSeconds ?? null,
      peakRam: c.usage?.peakRam ?? null,
    });
  }
  if (![...byName.values()].some((g) => g.records.some(measured))) return null;

  const items: RightSizing[] = [];
  const asked: Demand[] = [];
  const rightSized: Demand[] = [];
  for (const key of [...byName.keys()].sort()) {
    const g = byName.get(key)!;
    const r = rightSize(aggregateUsage(key, g.samples));
    items.push(r);
    for (const c of g.records) {
      const d: Demand = { ...c, duration: c.end! - c.start! };
      asked.push(d);
      rightSized.push({ ...d, vcpus: r.cpu?.suggested ?? d.vcpus, ram: r.ram?.suggested ?? d.ram });
    }
  }
  return {
    items,
    lowerBound: {
      asked: round(costLowerBound(asked, types).cost, 6),
      rightSized: round(costLowerBound(rightSized, types).cost, 6),
    },
  };
}
