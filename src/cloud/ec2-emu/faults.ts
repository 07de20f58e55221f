// What the emulated EC2's proxy injects in front of moto: API latency, throttling, EC2 errors with their
// real HTTP statuses, lost responses, and the account limits moto never enforces. All of it is one JSON
// document (set at start or through the control API), and every random choice comes from one generator
// seeded by it, so the same document and the same calls give the same faults.
import { seededRng, type Rng } from '../../model/clock.js';
import { parseDuration, UnitError } from '../../model/units.js';
import { TokenBucket } from '../decorators/token-bucket.js';

/** EC2 error codes the proxy can answer with, and the HTTP status EC2 sends them with. */
export const EC2_ERROR_STATUS: Record<string, number> = {
  InsufficientInstanceCapacity: 500,
  InsufficientHostCapacity: 500,
  InternalError: 500,
  Unavailable: 503,
  RequestLimitExceeded: 503,
  Unsupported: 400,
  InstanceLimitExceeded: 400,
  VcpuLimitExceeded: 400,
  MaxSpotInstanceCountExceeded: 400,
  SpotMaxPriceTooLow: 400,
  InsufficientFreeAddressesInSubnet: 400,
  IdempotentParameterMismatch: 400,
  'InvalidInstanceID.NotFound': 400,
  'InvalidAMIID.NotFound': 400,
  AuthFailure: 401,
  UnauthorizedOperation: 403,
};

/** A rule's effect besides an EC2 error: the call reaches moto but its answer never reaches the caller. */
export const LOST_RESPONSE = 'lost-response';

export interface FaultRule {
  /** EC2 action (RunInstances, TerminateInstances …); null: any. */
  action: string | null;
  /** An EC2 error code of EC2_ERROR_STATUS, or "lost-response". */
  error: string;
  /** How many times it fires at most (null: no limit). */
  times: number | null;
  probability: number;
  /** Only calls for this instance type / subnet / purchase option (RunInstances). */
  instanceType: string | null;
  subnet: string | null;
  market: 'spot' | 'on-demand' | null;
  message: string | null;
}

export interface AccountLimits {
  /** Running + pending instances (InstanceLimitExceeded). */
  maxInstances: number | null;
  /** Running + pending spot instances (MaxSpotInstanceCountExceeded). */
  maxSpotInstances: number | null;
  /** vCPUs per quota group ("on-demand/standard", "spot/g-vt"; see ../ec2/quota-groups.ts): VcpuLimitExceeded. */
  maxVcpus: Record<string, number>;
}

export interface EmuFaultConfig {
  seed: number;
  latencyMs: number;
  latencyJitterMs: number;
  /** Calls per second over all actions before RequestLimitExceeded (null: none). */
  throttle: { ratePerSecond: number; burst: number } | null;
  rules: FaultRule[];
  limits: AccountLimits;
}

export class FaultConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FaultConfigError';
  }
}

export const NO_FAULTS: EmuFaultConfig = {
  seed: 1,
  latencyMs: 0,
  latencyJitterMs: 0,
  throttle: null,
  rules: [],
  limits: { maxInstances: null, maxSpotInstances: null, maxVcpus: {} },
};

const TOP = ['seed', 'latency', 'latency_jitter', 'throttle', 'rules', 'limits'];
const RULE = ['action', 'error', 'times', 'probability', 'instance_type', 'subnet', 'market', 'message'];
const LIMITS = ['max_instances', 'max_spot_instances', 'max_vcpus'];

function object(v: unknown, at: string, keys: string[]): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new FaultConfigError(`${at}: expected an object`);
  for (const k of Object.keys(v))
    if (!keys.includes(k)) throw new FaultConfigError(`${at}.${k}: unknown key (known: ${keys.join(', ')})`);
  return v as Record<string, unknown>;
}

function count(v: unknown, at: string, min = 0): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min)
    throw new FaultConfigError(`${at}: expected a whole number ≥ ${min}, got ${JSON.stringify(v)}`);
  return v;
}

function duration(v: unknown, at: string): number {
  try {
    return parseDuration(v ?? 0);
  } catch (err) {
    if (err instanceof UnitError) throw new FaultConfigError(`${at}: ${err.message}`);
    throw err;
  }
}

function optString(v: unknown, at: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || v === '') throw new FaultConfigError(`${at}: expected a non-empty string`);
  return v;
}

/** Validates a fault document (the JSON of `--faults` and of PUT /_emu/faults). */
export function parseFaultConfig(value: unknown, at = 'faults'): EmuFaultConfig {
  const o = object(value, at, TOP);
  const seed = count(o.seed, `${at}.seed`) ?? 1;
  let throttle: EmuFaultConfig['throttle'] = null;
  if (o.throttle !== undefined && o.throttle !== null) {
    const t = object(o.throttle, `${at}.throttle`, ['rate', 'burst']);
    if (typeof t.rate !== 'number' || !(t.rate > 0))
      throw new FaultConfigError(
        `${at}.throttle.rate: expected calls per second above 0, got ${JSON.stringify(t.rate)}`,
      );
    throttle = {
      ratePerSecond: t.rate,
      burst: count(t.burst, `${at}.throttle.burst`, 1) ?? Math.max(1, t.rate),
    };
  }
  if (o.rules !== undefined && !Array.isArray(o.rules))
    throw new FaultConfigError(`${at}.rules: expected a list`);
  const rules = ((o.rules as unknown[] | undefined) ?? []).map((r, i) => parseRule(r, `${at}.rules[${i}]`));
  const l = object(o.limits ?? {}, `${at}.limits`, LIMITS);
  const maxVcpus = object(l.max_vcpus ?? {}, `${at}.limits.max_vcpus`, Object.keys(l.max_vcpus ?? {}));
  for (const [g, n] of Object.entries(maxVcpus)) {
    if (!/^(on-demand|spot)\/[a-z-]+$/.test(g))
      throw new FaultConfigError(
        `${at}.limits.max_vcpus.${g}: expected a quota group such as "on-demand/standard"`,
      );
    count(n, `${at}.limits.max_vcpus.${g}`);
  }
  return {
    seed,
    latencyMs: duration(o.latency, `${at}.latency`),
    latencyJitterMs: duration(o.latency_jitter, `${at}.latency_jitter`),
    throttle,
    rules,
    limits: {
      maxInstances: count(l.max_instances, `${at}.limits.max_instances`),
      maxSpotInstances: count(l.max_spot_instances, `${at}.limits.max_spot_instances`),
      maxVcpus: maxVcpus as Record<string, number>,
    },
  };
}

function parseRule(v: unknown, at: string): FaultRule {
  const o = object(v, at, RULE);
  const error = o.error;
  if (typeof error !== 'string' || (error !== LOST_RESPONSE && !(error in EC2_ERROR_STATUS)))
    throw new FaultConfigError(
      `${at}.error: expected "${LOST_RESPONSE}" or one of ${Object.keys(EC2_ERROR_STATUS).join(', ')}, got ${JSON.stringify(error)}`,
    );
  const p = o.probability ?? 1;
  if (typeof p !== 'number' || !(p >= 0 && p <= 1))
    throw new FaultConfigError(`${at}.probability: expected a number from 0 to 1, got ${JSON.stringify(p)}`);
  const market = o.market ?? null;
  if (market !== null && market !== 'spot' && market !== 'on-demand')
    throw new FaultConfigError(`${at}.market: expected "spot" or "on-demand", got ${JSON.stringify(market)}`);
  return {
    action: optString(o.action, `${at}.action`),
    error,
    times: count(o.times, `${at}.times`, 1),
    probability: p,
    instanceType: optString(o.instance_type, `${at}.instance_type`),
    subnet: optString(o.subnet, `${at}.subnet`),
    market,
    message: optString(o.message, `${at}.message`),
  };
}

/** What the proxy does with one call. */
export type FaultDecision =
  | { kind: 'pass' }
  | { kind: 'error'; code: string; status: number; message: string }
  | { kind: 'lost-response' };

/** The live state of a fault document: its generator, throttle bucket and how often each rule fired. */
export class Faults {
  readonly config: EmuFaultConfig;
  private readonly rng: Rng;
  private readonly bucket: TokenBucket | null;
  private readonly fired: number[];

  constructor(config: EmuFaultConfig) {
    this.config = config;
    this.rng = seededRng(config.seed);
    this.bucket = config.throttle
      ? new TokenBucket(config.throttle.ratePerSecond, config.throttle.burst)
      : null;
    this.fired = config.rules.map(() => 0);
  }

  /** The latency to add to one call (ms). */
  latency(): number {
    const { latencyMs, latencyJitterMs } = this.config;
    return latencyMs + (latencyJitterMs > 0 ? Math.round(this.rng() * latencyJitterMs) : 0);
  }

  /**
   * Decides the fate of one call of `action` with its query parameters, at `nowMs`. `replay`: the call
   * repeats a ClientToken that already made an instance; EC2 answers such a call with that instance before
   * it looks at capacity or limits, so only throttling and a lost response can still befall it.
   */
  decide(action: string, params: URLSearchParams, nowMs: number, replay = false): FaultDecision {
    if (this.bucket && this.bucket.take(nowMs) !== null)
      return error('RequestLimitExceeded', 'Request limit exceeded.');
    const spot = params.get('InstanceMarketOptions.MarketType') === 'spot';
    for (const [i, r] of this.config.rules.entries()) {
      if (r.action !== null && r.action !== action) continue;
      if (replay && r.error !== LOST_RESPONSE && r.error !== 'RequestLimitExceeded') continue;
      if (r.instanceType !== null && params.get('InstanceType') !== r.instanceType) continue;
      if (r.subnet !== null && params.get('SubnetId') !== r.subnet) continue;
      if (r.market !== null && (r.market === 'spot') !== spot) continue;
      if (r.times !== null && this.fired[i]! >= r.times) continue;
      if (r.probability < 1 && this.rng() >= r.probability) continue;
      this.fired[i]!++;
      if (r.error === LOST_RESPONSE) return { kind: 'lost-response' };
      return error(r.error, r.message ?? defaultMessage(r.error, params));
    }
    return { kind: 'pass' };
  }

  /** How many times each rule fired. */
  firedCounts(): number[] {
    return [...this.fired];
  }
}

export function error(code: string, message: string): Extract<FaultDecision, { kind: 'error' }> {
  return { kind: 'error', code, status: EC2_ERROR_STATUS[code] ?? 400, message };
}

function defaultMessage(code: string, params: URLSearchParams): string {
  const type = params.get('InstanceType') ?? 'the requested';
  switch (code) {
    case 'InsufficientInstanceCapacity':
      return `We currently do not have sufficient ${type} capacity in the Availability Zone you requested. Our system will be working on provisioning additional capacity.`;
    case 'Unsupported':
      return `Your requested instance type (${type}) is not supported in your requested Availability Zone.`;
    case 'RequestLimitExceeded':
      return 'Request limit exceeded.';
    case 'InstanceLimitExceeded':
      return 'Your quota allows for 0 more running instance(s). You requested at least 1.';
    case 'VcpuLimitExceeded':
      return 'You have requested more vCPU capacity than your current vCPU limit of 0 allows for the instance bucket that the specified instance type belongs to.';
    case 'MaxSpotInstanceCountExceeded':
      return 'Max spot instance count exceeded';
    case 'AuthFailure':
      return 'AWS was not able to validate the provided access credentials';
    case 'UnauthorizedOperation':
      return 'You are not authorized to perform this operation.';
    default:
      return `${code} (injected by the EC2 emulator)`;
  }
}

/** EC2's XML error document. */
export function errorXml(code: string, message: string, requestId: string): string {
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>${esc(code)}</Code><Message>${esc(message)}</Message></Error></Errors><RequestID>${requestId}</RequestID></Response>`;
}
