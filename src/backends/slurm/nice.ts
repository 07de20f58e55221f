// Berth's priority order as SLURM's (pure). SLURM orders pending jobs by its own priority (age, fair
// share, partition, … or just submission order), from which a job's nice value is subtracted. Berth only
// moves its own jobs, and only with nice:
//
// - jobs are grouped by Berth priority, highest first; every job of a group must end up below every job of
//   the groups above it (equal Berth priorities keep SLURM's own order among themselves);
// - a job whose nice already puts it low enough keeps it (no `scontrol update`); the others of the group
//   get one shared value ("band") with `spread` of room, so one call renices a whole group and a few more
//   arrivals above it need no new renice;
// - nice values are never negative (that needs operator rights), and when the dispatcher may not lower
//   them (`lower_nice` off), they only grow.
import { NICE_MAX } from './sbatch.js';

/** A pending job (or one about to be submitted) as the nice planner sees it. */
export interface NiceJob {
  /** The job's key in the result (a job id, or a container id for a job not yet submitted). */
  key: string;
  /** The container's priority in Berth (higher first). */
  berthPriority: number;
  /** SLURM's priority with nice 0 (its priority plus its nice); null for a job not yet submitted. */
  base: number | null;
  /** Its nice value now (0 for a job not yet submitted). */
  nice: number;
}

export interface NiceOptions {
  spread: number;
  /** Whether nice values may be lowered (SLURM operator or administrator). */
  canLower: boolean;
}

/**
 * The nice value each job should have. Jobs not yet submitted are assumed to get a SLURM priority just
 * below every listed job (newest last, as SLURM's age and submission order do) in the order given.
 */
export function planNice(jobs: NiceJob[], o: NiceOptions): Map<string, number> {
  const known = jobs.filter((j) => j.base !== null).map((j) => j.base!);
  let guess = (known.length > 0 ? Math.min(...known) : 0) - 1;
  const withBase = jobs.map((j) => ({ ...j, base: j.base ?? guess-- }));
  const groups = new Map<number, typeof withBase>();
  for (const j of withBase)
    (groups.get(j.berthPriority) ?? groups.set(j.berthPriority, []).get(j.berthPriority)!).push(j);
  const out = new Map<string, number>();
  // The lowest SLURM priority among the groups above (none yet: no constraint).
  let floor = Infinity;
  for (const p of [...groups.keys()].sort((a, b) => b - a)) {
    const group = groups.get(p)!;
    // The least nice that puts each job strictly below the floor.
    const need = (j: { base: number }) => (floor === Infinity ? 0 : Math.max(0, j.base - floor + 1));
    const band = Math.min(NICE_MAX, Math.max(0, ...group.map(need)) + (floor === Infinity ? 0 : o.spread));
    let lowest = Infinity;
    for (const j of group) {
      const n = need(j);
      const lowEnough = j.nice >= n;
      // With the right to lower, a nice far above what is needed comes down again (keeps values small).
      const tooHigh = o.canLower && j.nice > band + o.spread;
      const target = lowEnough && !tooHigh ? j.nice : o.canLower ? band : Math.max(band, j.nice);
      out.set(j.key, target);
      lowest = Math.min(lowest, j.base - target);
    }
    floor = Math.min(floor, lowest);
  }
  return out;
}

/** The `scontrol update` calls that bring jobs to their planned nice: one per value, listing its jobs. */
export function reniceCalls(
  current: Map<string, number>,
  planned: Map<string, number>,
): { nice: number; jobs: string[] }[] {
  const byNice = new Map<number, string[]>();
  for (const [job, nice] of planned) {
    if (current.get(job) === nice) continue;
    (byNice.get(nice) ?? byNice.set(nice, []).get(nice)!).push(job);
  }
  return [...byNice.entries()].sort((a, b) => a[0] - b[0]).map(([nice, jobs]) => ({ nice, jobs }));
}
