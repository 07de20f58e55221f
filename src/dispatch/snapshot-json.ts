// The §6.4 snapshot JSON (snake_case, human quantities) to a Snapshot, and a Plan back to JSON.
// Validation is strict: an unknown field or a wrong value is an error naming its path
// ("containers[3].colour: unknown field"), never a crash or a silent default.
import { ConfigError } from '../config/declare.js';
import * as kinds from '../config/kinds.js';
import { SCHEDULER_OPTIONS } from '../config/scheduler.js';
import { parseDuration, parseSize, parseTime, parseVcpus, UnitError } from '../model/units.js';
import {
  IDLE_BEHAVIORS,
  INSTANCE_STATES,
  type IdleBehavior,
  type InstanceState,
  type InstanceType,
} from '../model/types.js';
import type {
  ArrivalCount,
  CloudState,
  ContainerShape,
  FanOut,
  MeasuredUsage,
  Plan,
  RunEstimates,
  SchedulerConfig,
  Snapshot,
  SnapshotContainer,
  SnapshotInstance,
} from './scheduler/types.js';

/** A snapshot that does not follow §6.4; `path` names the offending field. */
export class SnapshotError extends Error {
  constructor(
    readonly path: string,
    readonly problem: string,
  ) {
    super(`${path}: ${problem}`);
  }
}

type Obj = Record<string, unknown>;

/** Reads the fields of one JSON object, remembering which were read so leftovers can be rejected. */
class Fields {
  private readonly seen = new Set<string>();
  constructor(
    private readonly o: Obj,
    readonly path: string,
  ) {}

  static of(value: unknown, path: string): Fields {
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      throw new SnapshotError(path, `expected an object, got ${kinds.describe(value)}`);
    return new Fields(value as Obj, path);
  }

  at(key: string): string {
    return this.path === '' ? key : `${this.path}.${key}`;
  }

  /** The raw value; `undefined` when absent. */
  raw(key: string): unknown {
    this.seen.add(key);
    return this.o[key];
  }

  /** Converts a present value (or the default when absent), turning unit errors into path errors. */
  get<T>(key: string, convert: (v: unknown) => T, fallback?: () => T): T {
    const v = this.raw(key);
    if (v === undefined) {
      if (fallback !== undefined) return fallback();
      throw new SnapshotError(this.at(key), 'required field is missing');
    }
    try {
      return convert(v);
    } catch (err) {
      if (err instanceof UnitError) throw new SnapshotError(this.at(key), err.message);
      if (err instanceof kinds.Expected)
        throw new SnapshotError(this.at(key), `expected ${err.what}, got ${kinds.describe(v)}`);
      throw err;
    }
  }

  /** Rejects every field that was not read. */
  done(): void {
    for (const key of Object.keys(this.o))
      if (!this.seen.has(key)) throw new SnapshotError(this.at(key), 'unknown field');
  }
}

/** A kind's check as a converter of one value (the snapshot's data speaks the options' language). */
const check =
  <T>(kind: kinds.Kind<T>) =>
  (v: unknown): T =>
    kind.parse(v, '', { baseDir: '' });
const str = check(kinds.text());
const anyString = (v: unknown): string => {
  if (typeof v !== 'string') throw new kinds.Expected('a string');
  return v;
};
const bool = check(kinds.bool);
const int = (min: number, max?: number) => check(kinds.int(min, max));
const num = (min: number) => check(kinds.num(min));
const oneOf = <T extends string>(values: readonly T[]) => check(kinds.oneOf(values));
const nullable =
  <T>(f: (v: unknown) => T) =>
  (v: unknown): T | null =>
    v === null ? null : f(v);

function array<T>(value: unknown, path: string, item: (v: unknown, path: string) => T): T[] {
  if (!Array.isArray(value)) throw new SnapshotError(path, `expected an array, got ${kinds.describe(value)}`);
  return value.map((v, i) => item(v, `${path}[${i}]`));
}

/** An absent list is empty; an explicit null is still rejected by the list parser. */
const orEmpty = (v: unknown): unknown => (v === undefined ? [] : v);

function stringList(value: unknown, path: string): string[] {
  return array(value, path, (v, p) => {
    if (typeof v !== 'string' || v === '')
      throw new SnapshotError(p, `expected a non-empty string, got ${kinds.describe(v)}`);
    return v;
  });
}

/** The scheduler keys are declared with every other option (src/config/scheduler.ts). */
function parseConfig(value: unknown): SchedulerConfig {
  try {
    return SCHEDULER_OPTIONS.parse(value, 'config');
  } catch (err) {
    if (err instanceof ConfigError) throw new SnapshotError(err.path, err.problem);
    throw err;
  }
}

function parseType(value: unknown, path: string): InstanceType {
  const f = Fields.of(value, path);
  const name = f.get('name', str);
  const t: InstanceType = {
    name,
    providerType: f.get('provider_type', str, () => name),
    vcpus: f.get('vcpus', parseVcpus),
    ram: f.get('ram', parseSize),
    scratch: f.get('scratch', parseSize, () => 0),
    gpus: f.get('gpus', int(0), () => 0),
    price: f.get('price', num(0)),
    preemptible: f.get('preemptible', bool, () => false),
  };
  f.done();
  return t;
}

function parseInstance(value: unknown, path: string): SnapshotInstance {
  const f = Fields.of(value, path);
  const stateSince = f.get('state_since', parseTime);
  const inst: SnapshotInstance = {
    id: f.get('id', str),
    type: f.get('type', str),
    state: f.get('state', oneOf<InstanceState>(INSTANCE_STATES)),
    idleBehavior: f.get('idle_behavior', oneOf<IdleBehavior>(IDLE_BEHAVIORS), () => 'run'),
    containers: stringList(orEmpty(f.raw('containers')), f.at('containers')),
    stateSince,
    createdAt: f.get('created_at', parseTime, () => stateSince),
  };
  const createdFor = f.raw('created_for');
  if (createdFor !== undefined && createdFor !== null)
    inst.createdFor = stringList(createdFor, f.at('created_for'));
  // Absent (an older snapshot): false, the safe side: it lends nothing to opportunistic containers.
  if (f.get('reclaims', bool, () => false)) inst.reclaims = true;
  f.done();
  return inst;
}

/** A container's shape: the fields a container and an arrival share. */
function parseShape(f: Fields): ContainerShape {
  const allow = f.raw('instance_types');
  return {
    vcpus: f.get('vcpus', parseVcpus),
    ram: f.get('ram', parseSize),
    scratch: f.get('scratch', parseSize, () => 0),
    gpus: f.get('gpus', int(0), () => 0),
    preemptible: f.get('preemptible', bool, () => false),
    instanceTypes: allow === undefined || allow === null ? null : stringList(allow, f.at('instance_types')),
  };
}

/** A running container's measured use: {"ram": "2GiB", "vcpus": 0.5, "observed": "10m"}. */
function parseUsage(value: unknown, path: string): MeasuredUsage {
  const f = Fields.of(value, path);
  const u: MeasuredUsage = {
    ram: f.get('ram', parseSize),
    vcpus: f.get('vcpus', num(0)),
    observedMs: f.get('observed', parseDuration),
  };
  f.done();
  return u;
}

function parseContainer(value: unknown, path: string): SnapshotContainer {
  const f = Fields.of(value, path);
  const c: SnapshotContainer = {
    id: f.get('id', str),
    state: f.get('state', oneOf(['Queued', 'Locked', 'Running'] as const)),
    priority: f.get('priority', int(0, 1000)),
    queuedAt: f.get('queued_at', parseTime),
    ...parseShape(f),
    instance: f.get('instance', nullable(str), () => null),
    lockCount: f.get('lock_count', int(0), () => 0),
    owner: f.get('owner', anyString, () => ''),
    spotInterruptions: f.get('spot_interruptions', int(0), () => 0),
    opportunistic: f.get('opportunistic', bool, () => false),
  };
  const usage = f.raw('usage');
  if (usage !== undefined && usage !== null) c.usage = parseUsage(usage, f.at('usage'));
  const reclaimed = f.raw('reclaimed_from');
  if (reclaimed !== undefined && reclaimed !== null) {
    const r = Fields.of(reclaimed, f.at('reclaimed_from'));
    c.reclaimedFrom = { instance: r.get('instance', str), at: r.get('at', parseTime).getTime() };
    r.done();
  }
  const name = f.get('name', nullable(anyString), () => null);
  if (name !== null) c.name = name;
  const startedAt = f.get('started_at', nullable(parseTime), () => null);
  if (startedAt !== null) c.startedAt = startedAt;
  const expectedRun = f.get('expected_run', nullable(parseDuration), () => null);
  if (expectedRun !== null) c.expectedRunMs = expectedRun;
  f.done();
  if (c.state === 'Running' && c.instance === null)
    throw new SnapshotError(f.at('instance'), 'expected the instance a Running container runs on, got null');
  if (c.state === 'Queued' && c.instance !== null)
    throw new SnapshotError(
      f.at('instance'),
      `expected null for a Queued container, got ${kinds.describe(c.instance)}`,
    );
  return c;
}

function parseCloud(value: unknown): CloudState {
  const f = Fields.of(value, 'cloud');
  const cloud: CloudState = {
    quotaMaxInstances: f.get('quota_max_instances', nullable(int(0)), () => null),
    unavailableTypes: stringList(orEmpty(f.raw('unavailable_types')), 'cloud.unavailable_types'),
    rateLimitedUntil: f.get('rate_limited_until', nullable(parseTime), () => null),
  };
  f.done();
  return cloud;
}

/** An object whose every value is converted alike: {"key": value, ...}. */
function recordOf(value: unknown, path: string, convert: (v: unknown) => number): Record<string, number> {
  const f = Fields.of(value, path);
  const out: Record<string, number> = {};
  for (const key of Object.keys(value as Obj)) out[key] = f.get(key, convert);
  return out;
}

/**
 * `estimates` (wait_for_running, boot_ahead): {"boot": "60s", "ends_at": {"c1": time}, "steps": {"align":
 * "30s"}, "fan_out": {"align": {"per_end": 4, "vcpus": 1, "ram": "2GiB"}}}.
 */
function parseEstimates(value: unknown): RunEstimates {
  const f = Fields.of(value, 'estimates');
  const e: RunEstimates = {
    bootMs: f.get('boot', nullable(parseDuration), () => null),
    endsAt: recordOf(orObject(f.raw('ends_at')), f.at('ends_at'), (v) => parseTime(v).getTime()),
    steps: recordOf(orObject(f.raw('steps')), f.at('steps'), parseDuration),
  };
  const fanOut = f.raw('fan_out');
  if (fanOut !== undefined) {
    const g = Fields.of(fanOut, f.at('fan_out'));
    e.fanOut = {};
    for (const key of Object.keys(fanOut as Obj)) e.fanOut[key] = parseFanOut(g.raw(key), g.at(key));
  }
  f.done();
  return e;
}

/** One step's fan-out: {"per_end": 4, "vcpus": 1, "ram": "2GiB", ...the shape of its arrivals}. */
function parseFanOut(value: unknown, path: string): FanOut {
  const f = Fields.of(value, path);
  const o: FanOut = { perEnd: f.get('per_end', num(0)), shape: parseShape(f) };
  f.done();
  return o;
}

const orObject = (v: unknown): unknown => (v === undefined ? {} : v);

/** One entry of `arrivals`: a container shape and how many of it arrived in the last arrival_window. */
function parseArrival(value: unknown, path: string): ArrivalCount {
  const f = Fields.of(value, path);
  const a: ArrivalCount = { ...parseShape(f), count: f.get('count', int(0)) };
  f.done();
  return a;
}

function unique<T>(items: T[], id: (t: T) => string, path: string): void {
  const seen = new Set<string>();
  items.forEach((t, i) => {
    const k = id(t);
    if (seen.has(k)) throw new SnapshotError(`${path}[${i}]`, `duplicate id ${JSON.stringify(k)}`);
    seen.add(k);
  });
}

/** A list of §6.4 instance types (also the `instance_types` of the dispatch config file). */
export function parseInstanceTypes(value: unknown, path: string): InstanceType[] {
  const types = array(value, path, parseType);
  unique(types, (t) => t.name, path);
  return types;
}

/** Parses and validates a §6.4 snapshot (already JSON-decoded). Throws SnapshotError. */
export function parseSnapshot(value: unknown): Snapshot {
  Fields.of(value, 'snapshot'); // the whole document must be an object; its fields have bare paths
  const f = Fields.of(value, '');
  const now = f.get('now', parseTime);
  const config = parseConfig(f.raw('config') === undefined ? {} : f.raw('config'));
  const instanceTypes = parseInstanceTypes(orEmpty(f.raw('instance_types')), 'instance_types');
  const instances = array(orEmpty(f.raw('instances')), 'instances', parseInstance);
  const containers = array(orEmpty(f.raw('containers')), 'containers', parseContainer);
  const cloud = parseCloud(f.raw('cloud') === undefined ? {} : f.raw('cloud'));
  const arrivals = array(orEmpty(f.raw('arrivals')), 'arrivals', parseArrival);
  const est = f.raw('estimates');
  f.done();
  unique(instances, (i) => i.id, 'instances');
  unique(containers, (c) => c.id, 'containers');
  const snap: Snapshot = { now, config, instanceTypes, instances, containers, cloud, arrivals };
  if (est !== undefined && est !== null) snap.estimates = parseEstimates(est);
  return snap;
}

/** Parses snapshot text; JSON syntax errors become SnapshotErrors too. */
export function parseSnapshotText(text: string): Snapshot {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new SnapshotError('snapshot', `not valid JSON: ${(err as Error).message}`);
  }
  return parseSnapshot(value);
}

/** The §6.4 output: actions in plan order, status keys sorted so the bytes never depend on insertion order. */
export function planToJson(p: Pick<Plan, 'actions' | 'status'>, pretty = false): string {
  const status: Record<string, string> = {};
  for (const k of [...p.status.keys()].sort()) status[k] = p.status.get(k)!;
  return JSON.stringify({ actions: p.actions, status }, null, pretty ? 2 : undefined);
}
