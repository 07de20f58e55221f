// Right-sizing (DESIGN §8: "used 1.2 of 16 GiB requested"): per request name, what containers asked for,
// what they used, what to ask for instead, and the resource-hours that would free. One rule for
// `berth usage` (from the agents' recorded usage, aggregated in SQL) and the simulator's report (from the
// traces' CPU-time and memory fields, aggregated in memory by `aggregateUsage`).
//
// The suggestion: CPU = the 95th percentile (nearest rank) of the cores a container used on average
// (CPU seconds / run seconds), rounded up to a quarter core; RAM = the highest peak seen plus 20 %
// headroom (a container over its memory is killed), rounded up to 64 MiB.

export const CPU_PERCENTILE = 95;
export const CPU_STEP = 0.25;
export const RAM_HEADROOM = 1.2;
export const RAM_STEP = 64 * 1024 ** 2;

const GiB = 1024 ** 3;

/** One completed container: what it asked for, how long it ran, what it used (null = not recorded). */
export interface UsageSample {
  vcpus: number;
  /** Bytes. */
  ram: number;
  runSeconds: number;
  cpuSeconds: number | null;
  /** Bytes. */
  peakRam: number | null;
}

/** CPU figures over the containers of a name whose CPU time was recorded. */
export interface CpuAggregate {
  containers: number;
  /** Σ vcpus asked × run hours. */
  askedHours: number;
  /** Σ run hours. */
  runHours: number;
  askedMin: number;
  askedMax: number;
  /** Σ CPU seconds / 3600. */
  usedHours: number;
  /** The CPU_PERCENTILE-th percentile of cores used (CPU seconds / run seconds). */
  coresP95: number;
}

/** Memory figures over the containers of a name whose peak memory was recorded. */
export interface RamAggregate {
  containers: number;
  /** Σ GiB asked × run hours. */
  askedGiBHours: number;
  runHours: number;
  askedMin: number;
  askedMax: number;
  peakMax: number;
}

/** What right-sizing needs to know about one group's completed containers (a name, or an owner). */
export interface UsageAggregate {
  /** The group: a request name ("" for unnamed requests) or an owner. */
  key: string;
  /** Completed containers, recorded usage or not. */
  containers: number;
  cpu: CpuAggregate | null;
  ram: RamAggregate | null;
}

/** The right-sizing of one group. Hours are resource-hours over the measured containers. */
export interface RightSizing {
  key: string;
  containers: number;
  cpu: {
    measured: number;
    asked: { min: number; max: number };
    /** Mean cores used (CPU hours / run hours) and the percentile the suggestion comes from. */
    used: { mean: number; p95: number };
    suggested: number;
    askedHours: number;
    suggestedHours: number;
    /** askedHours − suggestedHours (negative: the containers need more than they ask). */
    savedHours: number;
    /** savedHours / askedHours. */
    savedShare: number | null;
  } | null;
  ram: {
    measured: number;
    asked: { min: number; max: number };
    used: { max: number };
    suggested: number;
    askedGiBHours: number;
    suggestedGiBHours: number;
    savedGiBHours: number;
    savedShare: number | null;
  } | null;
}

function roundUp(x: number, step: number): number {
  return Math.max(step, Math.ceil(x / step - 1e-9) * step);
}

function r(x: number, digits: number): number {
  const f = 10 ** digits;
  const v = Math.round(x * f) / f;
  return v === 0 ? 0 : v;
}

/** Nearest-rank percentile of ascending values (as SQL's percentile_disc). */
function nearestRank(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1]!;
}

/** The suggested request for CPU: the percentile of cores used, rounded up to a quarter core. */
export function suggestVcpus(coresP95: number): number {
  return roundUp(coresP95, CPU_STEP);
}

/** The suggested request for memory: the highest peak plus headroom, rounded up to 64 MiB. */
export function suggestRam(peakMax: number): number {
  return roundUp(peakMax * RAM_HEADROOM, RAM_STEP);
}

/**
 * Right-sizes one name. The suggested hours are suggestion × run hours: exact when the suggestion is at
 * most every container's request (the usual case), an estimate otherwise.
 */
export function rightSize(a: UsageAggregate): RightSizing {
  let cpu: RightSizing['cpu'] = null;
  if (a.cpu !== null && a.cpu.containers > 0) {
    const c = a.cpu;
    const suggested = suggestVcpus(c.coresP95);
    const suggestedHours = suggested * c.runHours;
    cpu = {
      measured: c.containers,
      asked: { min: c.askedMin, max: c.askedMax },
      used: { mean: c.runHours > 0 ? r(c.usedHours / c.runHours, 3) : 0, p95: r(c.coresP95, 3) },
      suggested,
      askedHours: r(c.askedHours, 4),
      suggestedHours: r(suggestedHours, 4),
      savedHours: r(c.askedHours - suggestedHours, 4),
      savedShare: c.askedHours > 0 ? r((c.askedHours - suggestedHours) / c.askedHours, 4) : null,
    };
  }
  let ram: RightSizing['ram'] = null;
  if (a.ram !== null && a.ram.containers > 0) {
    const m = a.ram;
    const suggested = suggestRam(m.peakMax);
    const suggestedGiBHours = (suggested / GiB) * m.runHours;
    ram = {
      measured: m.containers,
      asked: { min: m.askedMin, max: m.askedMax },
      used: { max: m.peakMax },
      suggested,
      askedGiBHours: r(m.askedGiBHours, 4),
      suggestedGiBHours: r(suggestedGiBHours, 4),
      savedGiBHours: r(m.askedGiBHours - suggestedGiBHours, 4),
      savedShare: m.askedGiBHours > 0 ? r((m.askedGiBHours - suggestedGiBHours) / m.askedGiBHours, 4) : null,
    };
  }
  return { key: a.key, containers: a.containers, cpu, ram };
}

/** Aggregates in-memory samples of one group (the simulator's side; the API aggregates in SQL). */
export function aggregateUsage(key: string, samples: UsageSample[]): UsageAggregate {
  const withCpu = samples.filter((s) => s.cpuSeconds !== null && s.runSeconds > 0);
  const withRam = samples.filter((s) => s.peakRam !== null);
  const cores = withCpu.map((s) => s.cpuSeconds! / s.runSeconds).sort((x, y) => x - y);
  const sum = (xs: UsageSample[], f: (s: UsageSample) => number) => xs.reduce((t, s) => t + f(s), 0);
  return {
    key,
    containers: samples.length,
    cpu:
      withCpu.length === 0
        ? null
        : {
            containers: withCpu.length,
            askedHours: sum(withCpu, (s) => (s.vcpus * s.runSeconds) / 3600),
            runHours: sum(withCpu, (s) => s.runSeconds / 3600),
            askedMin: withCpu.reduce((m, s) => Math.min(m, s.vcpus), Infinity),
            askedMax: withCpu.reduce((m, s) => Math.max(m, s.vcpus), 0),
            usedHours: sum(withCpu, (s) => s.cpuSeconds! / 3600),
            coresP95: nearestRank(cores, CPU_PERCENTILE),
          },
    ram:
      withRam.length === 0
        ? null
        : {
            containers: withRam.length,
            askedGiBHours: sum(withRam, (s) => ((s.ram / GiB) * s.runSeconds) / 3600),
            runHours: sum(withRam, (s) => s.runSeconds / 3600),
            askedMin: withRam.reduce((m, s) => Math.min(m, s.ram), Infinity),
            askedMax: withRam.reduce((m, s) => Math.max(m, s.ram), 0),
            peakMax: withRam.reduce((m, s) => Math.max(m, s.peakRam!), 0),
          },
  };
}
