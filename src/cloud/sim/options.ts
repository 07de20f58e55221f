// The sim cloud's knobs. Every random choice draws from a stream seeded by `seed` and the knob's name,
// so turning one knob does not reshuffle the others and the same options give the same run.
import { validateDistribution, type Distribution } from './distribution.js';

/** A window of virtual time during which creates fail with a CapacityError of the given scope. */
export interface CapacityOutage {
  scope: 'type' | 'quota-group' | 'all';
  /** The provider type (scope "type") or quota group (scope "quota-group"); ignored for "all". */
  subject?: string;
  /** Start and end of the outage, ms since the epoch (end exclusive). */
  fromMs: number;
  untilMs: number;
}

/** Everything the sim cloud can be told to do; all fields optional except the seed. */
export interface SimCloudOptions {
  seed: number;
  /** Time from create to the instance running and its agent starting. Default lognormal, median 60 s. */
  bootTime?: Distribution;
  /** Probability that a create fails with a transient CloudApiError. */
  createErrorRate?: number;
  /** Probability that a destroy fails with a transient CloudApiError. */
  destroyErrorRate?: number;
  /** Per provider type: probability that a create fails with CapacityError(scope "type"). */
  capacityErrorRate?: Record<string, number>;
  /** Per provider type: most live instances the cloud has room for; beyond it CapacityError("type"). */
  typeCapacity?: Record<string, number>;
  /** Scheduled capacity outages (type, quota group or whole cloud). */
  outages?: CapacityOutage[];
  /** Provider type → quota group name (e.g. the instance family), for quota-group outages. */
  quotaGroups?: Record<string, string>;
  /** Account quota over live (not terminated) instances; beyond it QuotaError. */
  quota?: { maxInstances?: number; maxVcpus?: number };
  /** API rate limit over all operations; beyond it RateLimitError with the earliest retry time. */
  rateLimit?: { opsPerSecond: number; burst: number };
  /** Probability that an instance comes up in the cloud but its agent never starts (a broken instance). */
  neverBootRate?: number;
  /** Probability that an instance's agent crashes some time after it started. */
  agentCrashRate?: number;
  /** How long after starting a crashing agent crashes. Default exponential, mean 1 h. */
  agentCrashAfter?: Distribution;
  /**
   * Spot interruptions of preemptible instances: mean rate per instance-hour (per provider type in
   * `byType`, else `interruptionsPerHour`) and the notice before the end.
   */
  spot?: { interruptionsPerHour: number; byType?: Record<string, number>; noticeMs?: number };
  /** How long a terminated instance stays visible in list() before the cloud forgets it. Default 60 s. */
  terminatedVisibleMs?: number;
  /** Prefix of instance ids. Default "sim-". */
  idPrefix?: string;
  /** Keep the call log (controls.calls). Default true; a long simulation turns it off to save memory. */
  recordCalls?: boolean;
}

/** Options with every default filled in. */
export type ResolvedSimCloudOptions = Required<Omit<SimCloudOptions, 'quota' | 'rateLimit' | 'spot'>> & {
  quota: { maxInstances: number | null; maxVcpus: number | null };
  rateLimit: { opsPerSecond: number; burst: number } | null;
  spot: { interruptionsPerHour: number; byType: Record<string, number>; noticeMs: number };
};

function probability(v: number | undefined, field: string): number {
  if (v === undefined) return 0;
  if (!Number.isFinite(v) || v < 0 || v > 1)
    throw new Error(`${field}: expected a probability between 0 and 1, got ${String(v)}`);
  return v;
}

function count(v: number | undefined, field: string): number | null {
  if (v === undefined) return null;
  if (!Number.isInteger(v) || v < 0)
    throw new Error(`${field}: expected a whole number >= 0, got ${String(v)}`);
  return v;
}

/** Validates options (errors name the field) and fills in defaults. */
export function resolveOptions(o: SimCloudOptions): ResolvedSimCloudOptions {
  if (!Number.isInteger(o.seed)) throw new Error(`seed: expected an integer, got ${String(o.seed)}`);
  const bootTime = o.bootTime ?? { kind: 'lognormal', medianMs: 60_000, sigma: 0.25 };
  validateDistribution(bootTime, 'bootTime');
  const agentCrashAfter = o.agentCrashAfter ?? { kind: 'exponential', meanMs: 3_600_000 };
  validateDistribution(agentCrashAfter, 'agentCrashAfter');
  const capacityErrorRate: Record<string, number> = {};
  for (const [t, p] of Object.entries(o.capacityErrorRate ?? {}))
    capacityErrorRate[t] = probability(p, `capacityErrorRate.${t}`);
  const typeCapacity: Record<string, number> = {};
  for (const [t, n] of Object.entries(o.typeCapacity ?? {})) typeCapacity[t] = count(n, `typeCapacity.${t}`)!;
  const outages = (o.outages ?? []).map((w, i) => {
    if (!['type', 'quota-group', 'all'].includes(w.scope))
      throw new Error(
        `outages[${i}].scope: expected type, quota-group or all, got ${JSON.stringify(w.scope)}`,
      );
    if (w.scope !== 'all' && typeof w.subject !== 'string')
      throw new Error(
        `outages[${i}].subject: expected the ${w.scope} name, got ${JSON.stringify(w.subject)}`,
      );
    if (!Number.isFinite(w.fromMs) || !Number.isFinite(w.untilMs) || w.untilMs < w.fromMs)
      throw new Error(`outages[${i}]: expected fromMs <= untilMs, got ${w.fromMs}..${w.untilMs}`);
    return { ...w };
  });
  const rl = o.rateLimit;
  if (rl !== undefined && (!(rl.opsPerSecond > 0) || !(rl.burst >= 1)))
    throw new Error(
      `rateLimit: expected opsPerSecond > 0 and burst >= 1, got ${rl.opsPerSecond} and ${rl.burst}`,
    );
  const spot = o.spot ?? { interruptionsPerHour: 0 };
  const rate = (v: number, field: string): number => {
    if (!Number.isFinite(v) || v < 0) throw new Error(`${field}: expected a number >= 0, got ${String(v)}`);
    return v;
  };
  rate(spot.interruptionsPerHour, 'spot.interruptionsPerHour');
  const byType: Record<string, number> = {};
  for (const [t, r] of Object.entries(spot.byType ?? {})) byType[t] = rate(r, `spot.byType.${t}`);
  const noticeMs = spot.noticeMs ?? 120_000;
  if (!Number.isFinite(noticeMs) || noticeMs < 0)
    throw new Error(`spot.noticeMs: expected a number of ms >= 0, got ${String(noticeMs)}`);
  const terminatedVisibleMs = o.terminatedVisibleMs ?? 60_000;
  if (!Number.isFinite(terminatedVisibleMs) || terminatedVisibleMs < 0)
    throw new Error(`terminatedVisibleMs: expected a number of ms >= 0, got ${String(terminatedVisibleMs)}`);
  return {
    seed: o.seed,
    bootTime,
    createErrorRate: probability(o.createErrorRate, 'createErrorRate'),
    destroyErrorRate: probability(o.destroyErrorRate, 'destroyErrorRate'),
    capacityErrorRate,
    typeCapacity,
    outages,
    quotaGroups: { ...(o.quotaGroups ?? {}) },
    quota: {
      maxInstances: count(o.quota?.maxInstances, 'quota.maxInstances'),
      maxVcpus: count(o.quota?.maxVcpus, 'quota.maxVcpus'),
    },
    rateLimit: rl === undefined ? null : { ...rl },
    neverBootRate: probability(o.neverBootRate, 'neverBootRate'),
    agentCrashRate: probability(o.agentCrashRate, 'agentCrashRate'),
    agentCrashAfter,
    spot: { interruptionsPerHour: spot.interruptionsPerHour, byType, noticeMs },
    terminatedVisibleMs,
    idPrefix: o.idPrefix ?? 'sim-',
    recordCalls: o.recordCalls ?? true,
  };
}
