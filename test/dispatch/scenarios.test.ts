// One row per scheduling rule (DESIGN §6.2): a snapshot and the exact actions one pass must produce.
import { describe, expect, it } from 'vitest';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { Action, Snapshot } from '../../src/dispatch/scheduler/types.js';
import { ago, ctr, GiB, inst, NOW, snap, type } from './builders.js';

interface Row {
  name: string;
  snapshot: Snapshot;
  actions: Action[];
  /** Substrings expected in the status of the named containers. */
  status?: Record<string, string>;
}

const lock = (c: string): Action => ({ op: 'lock', container: c });
const start = (c: string, i: string): Action => ({ op: 'start', container: c, instance: i });
const create = (t: string, ...f: string[]): Action => ({ op: 'create', type: t, for: f });
const shutdown = (i: string, reason: string): Action => ({ op: 'shutdown', instance: i, reason });
const cancel = (c: string, reason: string): Action => ({ op: 'cancel', container: c, class: 'perm', reason });
/** No configured type can ever run it: cancelled, and no retry (its request ends). */
const unsatisfiable = (c: string, reason: string): Action => ({
  op: 'cancel',
  container: c,
  class: 'perm',
  reason,
  retryable: false,
});

const rows: Row[] = [
  // Rule 3: packing and preferences.
  {
    name: 'an idle instance is used before a new one is created',
    snapshot: snap({ instances: [inst('i-1', 't1', 'idle')], containers: [ctr('c1')] }),
    actions: [lock('c1'), start('c1', 'i-1')],
    status: { c1: 'starting on instance i-1' },
  },
  {
    name: 'containers pack onto an instance with room',
    snapshot: snap({
      config: { maxPriceFactor: 10 },
      instances: [inst('i-1', 't4', 'running')],
      containers: [ctr('c0', { state: 'Running', instance: 'i-1' }), ctr('c1'), ctr('c2'), ctr('c3')],
    }),
    actions: [lock('c1'), start('c1', 'i-1'), lock('c2'), start('c2', 'i-1'), lock('c3'), start('c3', 'i-1')],
  },
  {
    name: 'a full instance is not packed further',
    snapshot: snap({
      instances: [inst('i-1', 't1', 'running')],
      containers: [ctr('c0', { state: 'Running', instance: 'i-1' }), ctr('c1')],
    }),
    actions: [lock('c1'), create('t1', 'c1')],
  },
  {
    name: 'busier instances are preferred over emptier ones',
    snapshot: snap({
      config: { maxPriceFactor: 10 },
      instances: [inst('i-1', 't2', 'idle'), inst('i-2', 't2', 'running')],
      containers: [ctr('c0', { state: 'Running', instance: 'i-2' }), ctr('c1')],
    }),
    actions: [lock('c1'), start('c1', 'i-2')],
  },
  {
    name: 'ready instances are preferred over booting ones',
    snapshot: snap({
      instances: [inst('i-1', 't1', 'booting'), inst('i-2', 't1', 'idle')],
      containers: [ctr('c1')],
    }),
    actions: [lock('c1'), start('c1', 'i-2')],
  },
  {
    name: 'max_containers_per_instance caps packing',
    snapshot: snap({
      config: { maxContainersPerInstance: 1 },
      instances: [inst('i-1', 't4', 'running')],
      containers: [ctr('c0', { state: 'Running', instance: 'i-1' }), ctr('c1')],
    }),
    actions: [lock('c1'), create('t1', 'c1')],
  },
  {
    name: 'one create covers containers that pack together on the new instance',
    snapshot: snap({ types: [type('t2', 2, 4, 0.2)], containers: [ctr('c1'), ctr('c2'), ctr('c3')] }),
    actions: [lock('c1'), lock('c2'), lock('c3'), create('t2', 'c1', 'c2'), create('t2', 'c3')],
  },
  {
    name: 'ram overhead is reserved on every instance',
    snapshot: snap({
      config: { ramOverhead: GiB },
      instances: [inst('i-1', 't1', 'idle')],
      containers: [ctr('c1', { ram: 1.5 * GiB })],
    }),
    actions: [lock('c1'), create('t2', 'c1')],
  },
  {
    name: 'a held instance gets no new work and is never shut down',
    snapshot: snap({
      instances: [inst('i-1', 't1', 'idle', { idleBehavior: 'hold', stateSince: ago(3600) })],
      containers: [ctr('c1')],
    }),
    actions: [lock('c1'), create('t1', 'c1')],
  },
  {
    name: 'an unknown-state instance counts as capacity',
    snapshot: snap({ instances: [inst('i-1', 't1', 'unknown')], containers: [ctr('c1')] }),
    actions: [lock('c1')],
    status: { c1: 'waiting for instance i-1 (unknown' },
  },
  {
    name: 'a booting instance counts as capacity',
    snapshot: snap({
      instances: [inst('i-3', 't1', 'booting')],
      containers: [ctr('c1', { state: 'Locked' })],
    }),
    actions: [],
    status: { c1: 'waiting for instance i-3 (booting' },
  },
  {
    name: 'a Locked container already assigned needs nothing',
    snapshot: snap({
      instances: [inst('i-1', 't1', 'running')],
      containers: [ctr('c1', { state: 'Locked', instance: 'i-1' })],
    }),
    actions: [],
    status: { c1: 'assigned to instance i-1' },
  },
  {
    name: 'a Locked container whose instance is gone is placed again',
    snapshot: snap({
      instances: [inst('i-1', 't1', 'gone'), inst('i-2', 't1', 'idle')],
      containers: [ctr('c1', { state: 'Locked', instance: 'i-1' })],
    }),
    actions: [start('c1', 'i-2')],
  },
  // Rule 3: price factor.
  {
    name: 'an existing instance priced above max_price_factor is not used',
    snapshot: snap({
      instances: [inst('i-1', 't2', 'idle', { stateSince: ago(5) })],
      containers: [ctr('c1')],
    }),
    actions: [lock('c1'), create('t1', 'c1')],
  },
  {
    name: 'an existing instance within max_price_factor is used',
    snapshot: snap({
      config: { maxPriceFactor: 2 },
      instances: [inst('i-1', 't2', 'idle')],
      containers: [ctr('c1')],
    }),
    actions: [lock('c1'), start('c1', 'i-1')],
  },
  // Rule 2: type choice and tie-breaks.
  {
    name: 'the cheapest fitting type is created',
    snapshot: snap({
      types: [type('big', 8, 32, 0.9), type('small', 2, 4, 0.3), type('cheap-tiny', 1, 0.5, 0.05)],
      containers: [ctr('c1')],
    }),
    actions: [lock('c1'), create('small', 'c1')],
  },
  {
    name: 'equal prices: more ram wins',
    snapshot: snap({ types: [type('a', 2, 4, 0.2), type('b', 2, 8, 0.2)], containers: [ctr('c1')] }),
    actions: [lock('c1'), create('b', 'c1')],
  },
  {
    name: 'equal prices and ram: more vcpus wins',
    snapshot: snap({ types: [type('a', 2, 4, 0.2), type('b', 4, 4, 0.2)], containers: [ctr('c1')] }),
    actions: [lock('c1'), create('b', 'c1')],
  },
  {
    name: 'all equal: the name decides',
    snapshot: snap({ types: [type('zed', 2, 4, 0.2), type('abe', 2, 4, 0.2)], containers: [ctr('c1')] }),
    actions: [lock('c1'), create('abe', 'c1')],
  },
  {
    name: 'the allow-list restricts types',
    snapshot: snap({ containers: [ctr('c1', { instanceTypes: ['t2'] })] }),
    actions: [lock('c1'), create('t2', 'c1')],
  },
  {
    name: 'a non-preemptible container never uses a preemptible type; a preemptible one may',
    snapshot: snap({
      types: [type('spot', 2, 4, 0.05, { preemptible: true }), type('od', 2, 4, 0.2)],
      containers: [ctr('c1'), ctr('c2', { preemptible: true })],
    }),
    actions: [lock('c1'), lock('c2'), create('od', 'c1'), create('spot', 'c2')],
  },
  {
    name: 'a preemptible container interrupted on_demand_after_interruptions times runs on demand; fewer, on spot',
    snapshot: snap({
      types: [type('spot', 2, 4, 0.05, { preemptible: true }), type('od', 2, 4, 0.2)],
      config: { onDemandAfterInterruptions: 2 },
      containers: [
        ctr('c1', { preemptible: true, spotInterruptions: 2 }),
        ctr('c2', { preemptible: true, spotInterruptions: 1 }),
      ],
    }),
    actions: [lock('c1'), lock('c2'), create('od', 'c1'), create('spot', 'c2')],
  },
  {
    name: 'without on_demand_after_interruptions a preemptible container stays on spot, however often interrupted',
    snapshot: snap({
      types: [type('spot', 2, 4, 0.05, { preemptible: true }), type('od', 2, 4, 0.2)],
      containers: [ctr('c1', { preemptible: true, spotInterruptions: 9 })],
    }),
    actions: [lock('c1'), create('spot', 'c1')],
  },
  // Rule 2: unsatisfiable.
  {
    name: 'too much ram: cancelled perm naming the largest type',
    snapshot: snap({ types: [type('t32', 8, 32, 1)], containers: [ctr('c1', { ram: 40 * GiB })] }),
    actions: [unsatisfiable('c1', 'needs 40GiB ram; largest configured type has 32GiB')],
  },
  {
    name: 'too many vcpus, gpus, or an allow-list of unknown types: cancelled perm',
    snapshot: snap({
      containers: [ctr('c1', { vcpus: 16 }), ctr('c2', { gpus: 1 }), ctr('c3', { instanceTypes: ['nope'] })],
    }),
    actions: [
      unsatisfiable('c1', 'needs 16 vcpus; largest configured type has 4'),
      unsatisfiable('c2', 'needs 1 gpus; largest configured type has 0'),
      unsatisfiable('c3', 'allowed instance types [nope] are not configured'),
    ],
  },
  {
    name: 'a container whose cheapest fitting type costs more than max_spend_per_hour is cancelled, not left blocking the queue',
    snapshot: snap({
      types: [type('small', 1, 2, 1), type('big', 8, 32, 10)],
      config: { maxSpendPerHour: 5 },
      containers: [
        ctr('big-job', { vcpus: 8, priority: 900 }),
        ctr('small-job', { vcpus: 1, priority: 100 }),
      ],
    }),
    actions: [
      unsatisfiable('big-job', 'its cheapest fitting type big costs 10/h; max_spend_per_hour is 5'),
      lock('small-job'),
      create('small', 'small-job'),
    ],
  },
  {
    name: 'overhead counts toward the ram a container needs',
    snapshot: snap({
      config: { ramOverhead: GiB / 2 },
      types: [type('t', 4, 4, 1)],
      containers: [ctr('c1', { ram: 4 * GiB })],
    }),
    actions: [
      unsatisfiable('c1', 'needs 4.5GiB ram (4GiB plus 512MiB overhead); largest configured type has 4GiB'),
    ],
  },
  {
    name: 'max_dispatch_attempts: cancelled perm',
    snapshot: snap({ containers: [ctr('c1', { lockCount: 10 }), ctr('c2', { lockCount: 9 })] }),
    actions: [
      cancel('c1', 'locked 10 times without completing; max_dispatch_attempts=10'),
      lock('c2'),
      create('t1', 'c2'),
    ],
  },
  // Priority 0.
  {
    name: 'priority 0: a Running container is killed, a Locked one unlocked, a Queued one ignored',
    snapshot: snap({
      instances: [inst('i-1', 't4', 'running')],
      containers: [
        ctr('c1', { state: 'Running', instance: 'i-1', priority: 0 }),
        ctr('c2', { state: 'Locked', priority: 0 }),
        ctr('c3', { priority: 0 }),
      ],
    }),
    actions: [
      { op: 'kill', container: 'c1', instance: 'i-1' },
      { op: 'unlock', container: 'c2', reason: 'priority is 0' },
    ],
  },
  // Rule 4: capacity errors.
  {
    name: 'an unavailable type is skipped without blocking lower-priority containers',
    snapshot: snap({
      cloud: { unavailableTypes: ['t4'] },
      containers: [ctr('big', { vcpus: 4, priority: 9 }), ctr('small', { priority: 1 })],
    }),
    actions: [lock('small'), create('t1', 'small')],
    status: { big: 't4 unavailable (cloud capacity error)' },
  },
  {
    name: 'an unavailable cheapest type falls back to the next one within the price factor',
    snapshot: snap({
      types: [type('a', 1, 2, 0.1), type('b', 1, 2, 0.14), type('c', 1, 2, 0.5)],
      cloud: { unavailableTypes: ['a'] },
      containers: [ctr('c1')],
    }),
    actions: [lock('c1'), create('b', 'c1')],
  },
  // Rule 6: limits.
  {
    name: 'max_instances: no create past the cap',
    snapshot: snap({
      config: { maxInstances: 1 },
      containers: [ctr('c1', { vcpus: 1 }), ctr('c2', { vcpus: 1 })],
    }),
    actions: [lock('c1'), create('t1', 'c1')],
    status: { c2: 'queue position 1; waits for a t1 instance; max_instances=1 reached' },
  },
  {
    name: 'spend cap: live plus created instances stay under max_spend_per_hour',
    snapshot: snap({
      config: { maxSpendPerHour: 0.25 },
      instances: [inst('i-1', 't1', 'running')],
      containers: [ctr('c0', { state: 'Running', instance: 'i-1' }), ctr('c1'), ctr('c2')],
    }),
    actions: [lock('c1'), create('t1', 'c1')],
    status: { c2: 'max_spend_per_hour=0.25 reached (0.2/h in use; t1 costs 0.1/h)' },
  },
  {
    name: 'per-type cap falls back to the next type within the price factor',
    snapshot: snap({
      types: [type('a', 1, 2, 0.1), type('b', 1, 2, 0.12)],
      config: { maxInstancesPerType: { a: 1 } },
      instances: [inst('i-1', 'a', 'running')],
      containers: [ctr('c0', { state: 'Running', instance: 'i-1' }), ctr('c1')],
    }),
    actions: [lock('c1'), create('b', 'c1')],
  },
  {
    name: 'cloud quota caps instances',
    snapshot: snap({ cloud: { quotaMaxInstances: 0 }, containers: [ctr('c1')] }),
    actions: [],
    status: { c1: 'cloud quota of 0 instances reached' },
  },
  {
    name: 'rate limit: no create before the earliest retry, no head-of-line block either',
    snapshot: snap({ cloud: { rateLimitedUntil: new Date(NOW.getTime() + 5000) }, containers: [ctr('c1')] }),
    actions: [],
    status: { c1: 'cloud rate limit: no create before 2026-01-01T00:00:05.000Z' },
  },
  // Rule 5: priority under limits.
  {
    name: 'at a limit a lower-priority container does not take the instance the head needs',
    snapshot: snap({
      config: { maxInstances: 1 },
      containers: [ctr('low', { priority: 1 }), ctr('high', { priority: 5, vcpus: 4 })],
    }),
    actions: [lock('high'), create('t4', 'high')],
    status: { low: 'queue position 1; waits for a t1 instance; max_instances=1 reached' },
  },
  {
    name: 'at a spend cap a cheaper lower-priority type is not created while the head waits',
    snapshot: snap({
      config: { maxSpendPerHour: 1 },
      instances: [inst('i-1', 't4', 'running')],
      containers: [
        ctr('c0', { state: 'Running', instance: 'i-1', vcpus: 4 }),
        ctr('high', { priority: 5, vcpus: 4 }),
        ctr('low', { priority: 1 }),
      ],
    }),
    actions: [],
    status: { high: 'max_spend_per_hour=1 reached', low: 'new instances go to container high' },
  },
  {
    name: 'at a limit, idle instances no waiting container can use are shut down',
    snapshot: snap({
      config: { maxInstances: 2 },
      instances: [inst('i-1', 't1', 'running'), inst('i-2', 't1', 'idle', { stateSince: ago(5) })],
      containers: [ctr('c0', { state: 'Running', instance: 'i-1' }), ctr('high', { priority: 5, vcpus: 4 })],
    }),
    actions: [
      shutdown(
        'i-2',
        'idle and no waiting container can use it; max_instances=2 reached blocks container high',
      ),
    ],
  },
  {
    name: 'at a limit a lower-priority Locked container gives its booting instance to the head',
    snapshot: snap({
      config: { maxInstances: 1 },
      instances: [inst('i-1', 't4', 'booting')],
      containers: [
        ctr('low', { state: 'Locked', priority: 1, vcpus: 3 }),
        ctr('high', { priority: 5, vcpus: 4 }),
      ],
    }),
    actions: [
      {
        op: 'unlock',
        container: 'low',
        reason: 'its place on instance i-1 went to higher-priority container high (max_instances=1 reached)',
      },
      lock('high'),
    ],
    status: { high: 'waiting for instance i-1 (booting' },
  },
  {
    name: 'without a limit the Locked container keeps its place and the head gets a new instance',
    snapshot: snap({
      instances: [inst('i-1', 't4', 'booting')],
      containers: [
        ctr('low', { state: 'Locked', priority: 1, vcpus: 4 }),
        ctr('high', { priority: 5, vcpus: 4 }),
      ],
    }),
    actions: [lock('high'), create('t4', 'high')],
  },
  {
    name: 'at a limit, lower-priority containers still use existing capacity the head cannot use',
    snapshot: snap({
      config: { maxInstances: 1 },
      instances: [inst('i-1', 't1', 'idle', { stateSince: ago(5) })],
      containers: [ctr('high', { priority: 5, vcpus: 4 }), ctr('low', { priority: 1 })],
    }),
    actions: [lock('low'), start('low', 'i-1')],
    status: { high: 'max_instances=1 reached' },
  },
  {
    name: 'a rate limit is not a limit for rule 5: idle instances are not shut down for it',
    snapshot: snap({
      cloud: { rateLimitedUntil: new Date(NOW.getTime() + 5000) },
      instances: [inst('i-1', 't1', 'idle', { stateSince: ago(5) })],
      containers: [ctr('big', { vcpus: 4 })],
    }),
    actions: [],
    status: { big: 'queue position 1; waits for a t4 instance; cloud rate limit' },
  },
  {
    name: 'a Locked container assigned to a held instance keeps its assignment',
    snapshot: snap({
      instances: [inst('i-1', 't1', 'idle', { idleBehavior: 'hold' })],
      containers: [ctr('c1', { state: 'Locked', instance: 'i-1' })],
    }),
    actions: [],
    status: { c1: 'assigned to instance i-1' },
  },
  {
    name: 'an instance listing containers the snapshot does not describe takes no new work',
    snapshot: snap({
      instances: [inst('i-1', 't4', 'running', { containers: ['mystery'] })],
      containers: [ctr('c1')],
    }),
    actions: [lock('c1'), create('t1', 'c1')],
  },
  // Instance lifecycle.
  {
    name: 'idle past idle_timeout: shut down',
    snapshot: snap({
      instances: [
        inst('i-1', 't1', 'idle', { stateSince: ago(61) }),
        inst('i-2', 't1', 'idle', { stateSince: ago(59) }),
      ],
    }),
    actions: [shutdown('i-1', 'idle for 1m1s (idle_timeout=1m)')],
  },
  {
    name: 'billing window: idle long enough but early in the period: kept',
    snapshot: snap({
      config: { billingPeriodMs: 3_600_000, shutdownWindowMs: 300_000 },
      instances: [inst('i-1', 't1', 'idle', { stateSince: ago(600), createdAt: ago(1800) })],
    }),
    actions: [],
  },
  {
    name: 'billing window: inside the last window of the period: shut down',
    snapshot: snap({
      config: { billingPeriodMs: 3_600_000, shutdownWindowMs: 300_000 },
      instances: [inst('i-1', 't1', 'idle', { stateSince: ago(600), createdAt: ago(3600 + 3400) })],
    }),
    actions: [shutdown('i-1', 'idle for 10m (idle_timeout=1m)')],
  },
  {
    name: 'booting past boot_timeout: shut down, and its waiting container placed elsewhere',
    snapshot: snap({
      instances: [inst('i-1', 't1', 'booting', { stateSince: ago(601) })],
      containers: [ctr('c1', { state: 'Locked' })],
    }),
    actions: [
      shutdown('i-1', 'booting for 10m1s without registering (boot_timeout=10m)'),
      create('t1', 'c1'),
    ],
  },
  {
    name: 'drain: no new work; shut down when empty',
    snapshot: snap({
      instances: [
        inst('i-1', 't4', 'running', { idleBehavior: 'drain' }),
        inst('i-2', 't4', 'idle', { idleBehavior: 'drain' }),
      ],
      containers: [ctr('c0', { state: 'Running', instance: 'i-1' }), ctr('c1')],
    }),
    actions: [shutdown('i-2', 'draining and empty'), lock('c1'), create('t1', 'c1')],
  },
  {
    name: 'a type no longer configured is drained',
    snapshot: snap({
      instances: [inst('i-1', 'old', 'running'), inst('i-2', 'old', 'idle')],
      containers: [ctr('c0', { state: 'Running', instance: 'i-1' })],
    }),
    actions: [shutdown('i-2', 'type old is no longer configured')],
  },
  {
    name: 'min_instances: the warm pool is created with the cheapest type',
    snapshot: snap({ config: { minInstances: 2 } }),
    actions: [create('t1'), create('t1')],
  },
  {
    name: 'min_instances: idle instances are not shut down below the minimum (longest idle goes first)',
    snapshot: snap({
      config: { minInstances: 1 },
      instances: [
        inst('i-1', 't1', 'idle', { stateSince: ago(100) }),
        inst('i-2', 't1', 'idle', { stateSince: ago(200) }),
      ],
    }),
    actions: [shutdown('i-2', 'idle for 3m20s (idle_timeout=1m)')],
  },
];

describe('scheduler rules', () => {
  it.each(rows.map((r) => [r.name, r] as const))('%s', (_name, row) => {
    const p = plan(row.snapshot);
    expect(p.actions).toEqual(row.actions);
    for (const [id, text] of Object.entries(row.status ?? {})) expect(p.status.get(id)).toContain(text);
  });

  it('every waiting container gets a status with its queue position', () => {
    const p = plan(
      snap({ config: { maxInstances: 0 }, containers: [ctr('a', { priority: 3 }), ctr('b'), ctr('c')] }),
    );
    expect(Object.fromEntries(p.status)).toEqual({
      a: 'queue position 1; waits for a t1 instance; max_instances=0 reached; starts when an instance is freed or the limit is raised',
      b: 'queue position 2; 1 higher-priority container ahead; waits for a t1 instance; max_instances=0 reached; new instances go to container a and others ahead first',
      c: 'queue position 3; 1 higher-priority container ahead; waits for a t1 instance; max_instances=0 reached; new instances go to container a and others ahead first',
    });
  });
});
