// Small builders for scheduler snapshots, and applyPlan: a simulation of the act layer and the agents,
// so tests can run many passes in a row.
import { SCHEDULER_OPTIONS } from '../../src/config/scheduler.js';
import type { InstanceType } from '../../src/model/types.js';
import type {
  Plan,
  SchedulerConfig,
  Snapshot,
  SnapshotContainer,
  SnapshotInstance,
} from '../../src/dispatch/scheduler/types.js';

export const GiB = 1024 ** 3;
export const NOW = new Date('2026-01-01T00:00:00Z');

/** `ago(90)` is 90 seconds before NOW. */
export function ago(seconds: number): Date {
  return new Date(NOW.getTime() - seconds * 1000);
}

export function type(
  name: string,
  vcpus: number,
  ramGiB: number,
  price: number,
  extra: Partial<InstanceType> = {},
): InstanceType {
  return {
    name,
    providerType: name,
    vcpus,
    ram: ramGiB * GiB,
    scratch: 100 * GiB,
    gpus: 0,
    price,
    preemptible: false,
    ...extra,
  };
}

export function inst(
  id: string,
  typeName: string,
  state: SnapshotInstance['state'],
  extra: Partial<SnapshotInstance> = {},
): SnapshotInstance {
  const since = extra.stateSince ?? ago(10);
  return {
    id,
    type: typeName,
    state,
    idleBehavior: 'run',
    containers: [],
    stateSince: since,
    createdAt: since,
    ...extra,
  };
}

let seq = 0;
export function ctr(id: string, extra: Partial<SnapshotContainer> = {}): SnapshotContainer {
  return {
    id,
    state: 'Queued',
    priority: 1,
    // Distinct default queue times in creation order, so rows read in queue order.
    queuedAt: new Date(NOW.getTime() - 3_600_000 + seq++ * 1000),
    vcpus: 1,
    ram: GiB,
    scratch: 0,
    gpus: 0,
    preemptible: false,
    instanceTypes: null,
    instance: null,
    lockCount: 0,
    owner: '',
    spotInterruptions: 0,
    ...extra,
  };
}

/** The declared scheduler defaults (src/config/scheduler.ts). */
export const DEFAULT_CONFIG: SchedulerConfig = SCHEDULER_OPTIONS.defaults();

/** A snapshot; instance `containers` lists are filled in from the containers' `instance` fields. */
export function snap(parts: {
  config?: Partial<SchedulerConfig>;
  types?: InstanceType[];
  instances?: SnapshotInstance[];
  containers?: SnapshotContainer[];
  cloud?: Partial<Snapshot['cloud']>;
  arrivals?: Snapshot['arrivals'];
  now?: Date;
}): Snapshot {
  const instances = (parts.instances ?? []).map((i) => ({ ...i, containers: [...i.containers] }));
  const containers = parts.containers ?? [];
  for (const c of containers) {
    const i = instances.find((x) => x.id === c.instance);
    if (i !== undefined && !i.containers.includes(c.id)) i.containers.push(c.id);
  }
  return {
    now: parts.now ?? NOW,
    config: { ...DEFAULT_CONFIG, ...parts.config },
    instanceTypes: parts.types ?? [type('t1', 1, 2, 0.1), type('t2', 2, 4, 0.2), type('t4', 4, 16, 0.8)],
    instances,
    containers,
    cloud: { quotaMaxInstances: null, unavailableTypes: [], rateLimitedUntil: null, ...parts.cloud },
    arrivals: parts.arrivals ?? [],
  };
}

/** `s` a second later with a queued 1 GiB container of these vcpus and priority (property tests' steps). */
export function withArrival(s: Snapshot, id: string, vcpus: number, priority: number): Snapshot {
  const now = new Date(s.now.getTime() + 1000);
  return { ...s, now, containers: [...s.containers, ctr(id, { vcpus, priority, ram: GiB, queuedAt: now })] };
}

/** `s` without its container at `index` (modulo the count); instances that listed it get new records. */
export function withoutContainer(s: Snapshot, index: number): Snapshot {
  if (s.containers.length === 0) return s;
  const gone = s.containers[index % s.containers.length]!;
  return {
    ...s,
    containers: s.containers.filter((c) => c !== gone),
    instances: s.instances.map((i) =>
      i.containers.includes(gone.id) ? { ...i, containers: i.containers.filter((id) => id !== gone.id) } : i,
    ),
  };
}

/** How the simulated world moves between passes. */
export interface WorldOptions {
  /** Time between passes. */
  stepMs: number;
  /** A created instance becomes idle this long after it was created. */
  bootMs: number;
}

/**
 * Applies a plan as the act layer and the agents would, then advances time by one step:
 * lock → Locked; start → assigned, and the agent starts it (Running) at the next step; unlock → Queued;
 * cancel/kill → gone; create → a booting instance that turns idle after bootMs; shutdown → shutdown,
 * then removed at the next step.
 */
export function applyPlan(s: Snapshot, p: Plan, opts: WorldOptions, created: { n: number }): Snapshot {
  const now = new Date(s.now.getTime() + opts.stepMs);
  let containers = s.containers.map((c) => ({ ...c }));
  let instances = s.instances.filter((i) => i.state !== 'shutdown').map((i) => ({ ...i }));
  const byId = new Map(containers.map((c) => [c.id, c]));
  // Agents start what was assigned to their ready instance before this plan.
  for (const c of containers) {
    const i = instances.find((x) => x.id === c.instance);
    if (c.state === 'Locked' && i !== undefined && (i.state === 'idle' || i.state === 'running'))
      c.state = 'Running';
  }
  const removed = new Set<string>();
  for (const a of p.actions) {
    switch (a.op) {
      case 'lock': {
        const c = byId.get(a.container)!;
        if (c.state !== 'Queued') throw new Error(`lock of ${c.id} in state ${c.state}`);
        c.state = 'Locked';
        c.lockCount++;
        break;
      }
      case 'start': {
        const c = byId.get(a.container)!;
        if (c.state !== 'Locked') throw new Error(`start of ${c.id} in state ${c.state}`);
        c.instance = a.instance;
        break;
      }
      case 'unlock': {
        const c = byId.get(a.container)!;
        if (c.state !== 'Locked') throw new Error(`unlock of ${c.id} in state ${c.state}`);
        c.state = 'Queued';
        c.instance = null;
        break;
      }
      case 'cancel':
      case 'kill':
        removed.add(a.container);
        break;
      case 'create':
        instances.push({
          id: `n-${++created.n}`,
          type: a.type,
          state: 'booting',
          idleBehavior: 'run',
          containers: [],
          stateSince: s.now,
          createdAt: s.now,
          createdFor: a.for,
        });
        break;
      case 'shutdown': {
        const i = instances.find((x) => x.id === a.instance)!;
        i.state = 'shutdown';
        i.stateSince = s.now;
        break;
      }
    }
  }
  containers = containers.filter((c) => !removed.has(c.id));
  instances = instances.map((i) => {
    const mine = containers.filter((c) => c.instance === i.id).map((c) => c.id);
    let { state, stateSince } = i;
    if (state === 'booting' && now.getTime() - i.createdAt.getTime() >= opts.bootMs) {
      state = 'idle';
      stateSince = now;
    }
    if ((state === 'idle' || state === 'running') && mine.length > 0 !== (state === 'running')) {
      state = mine.length > 0 ? 'running' : 'idle';
      stateSince = now;
    }
    return { ...i, state, stateSince, containers: mine };
  });
  return { ...s, now, containers, instances };
}
