// One row per scheduling rule (DESIGN §6.2): a snapshot and the exact actions one pass must produce.
import { describe, expect, it } from 'vitest';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { Action, Snapshot } from '../../src/dispatch/scheduler/types.js';
import { ago, applyPlan, ctr, GiB, inst, NOW, snap, type } from './builders.js';

interface Row {
  name: string;
  snapshot: Snapshot;
  actions: Action[];
  /** Substrings expected in the status of the named containers. */
  status?: Record<string, string>;
  /** Hand-computed: the summed hourly price of the instances the pass creates (share rule, batch packing). */
  newPerHour?: number;
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

/** Types priced in proportion to size (0.05/h per vcpu with 2 GiB each), and a memory type. */
const FAMILY = [
  type('c1', 1, 2, 0.05),
  type('c2', 2, 4, 0.1),
  type('c4', 4, 8, 0.2),
  type('c8', 8, 16, 0.4),
  type('m4', 4, 32, 0.3),
];
const SPOT = [type('t2', 2, 4, 0.2), type('t2-spot', 2, 4, 0.07, { preemptible: true })];

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
      config: { maxPriceFactor: 10, minBillingPeriodMs: 60_000 },
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
      config: { ramOverhead: GiB, minBillingPeriodMs: 60_000 },
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
    // c1 (1 vcpu, 1 GiB) takes a quarter of t4 (4 vcpus, 16 GiB, 0.8/h): its share is 0.8 × 1/4 = 0.2/h,
    // above 1.5 × 0.1/h (its cheapest type t1).
    name: 'share rule: an existing instance whose share is above max_price_factor is not used',
    newPerHour: 0.1,
    snapshot: snap({
      config: { minBillingPeriodMs: 60_000 },
      instances: [inst('i-1', 't4', 'idle', { stateSince: ago(5) })],
      containers: [ctr('c1')],
    }),
    actions: [lock('c1'), create('t1', 'c1')],
  },
  {
    // The whole t2 costs 0.2/h, twice t1's 0.1/h: above the factor 1.5. But c1 takes half of t2's vcpus
    // (and a quarter of its ram): its share is 0.2 × 1/2 = 0.1/h, within 1.5 × 0.1/h.
    name: 'share rule (share): a free part of a bigger idle instance is used when the share is within max_price_factor',
    newPerHour: 0,
    snapshot: snap({
      config: { shareRule: 'share' },
      instances: [inst('i-1', 't2', 'idle', { stateSince: ago(5) })],
      containers: [ctr('c1')],
    }),
    actions: [lock('c1'), start('c1', 'i-1')],
  },
  {
    // share_rule expected (not the default, `price` is): on an empty instance c1 would be alone (k = 0):
    // 0.1 + (0.2 − 0.1)/1 = 0.2/h > 0.15/h; beside one running container (k = 1): 0.1 + 0.1/2 = 0.15/h,
    // within the factor.
    name: 'share rule (expected): the rest of the price counts by the chance of being left alone there',
    newPerHour: 0.1,
    snapshot: snap({
      config: { minBillingPeriodMs: 60_000, shareRule: 'expected' },
      instances: [inst('i-1', 't2', 'idle', { stateSince: ago(5) }), inst('i-2', 't4', 'running')],
      containers: [ctr('c1'), ctr('r', { state: 'Running', instance: 'i-2', vcpus: 4 })],
    }),
    actions: [lock('c1'), create('t1', 'c1')],
  },
  {
    name: 'share rule (expected): beside one running container the expected share is within the factor',
    newPerHour: 0,
    snapshot: snap({
      config: { shareRule: 'expected' },
      instances: [inst('i-1', 't2', 'running')],
      containers: [ctr('r', { state: 'Running', instance: 'i-1' }), ctr('c1')],
    }),
    actions: [lock('c1'), start('c1', 'i-1')],
  },
  {
    // a and b were locked for i-1, a c2 created for both (batch packing); it is ready now and empty. The
    // expected share of an empty instance is its whole price (0.1/h > 1.5 × 0.05/h), but that price was
    // accepted when i-1 was created for them: they start there instead of getting another instance.
    name: 'share rule (expected): containers locked for a new instance start on it once it is ready',
    newPerHour: 0,
    snapshot: snap({
      types: FAMILY,
      config: { shareRule: 'expected' },
      instances: [inst('i-1', 'c2', 'idle', { stateSince: ago(1), createdFor: ['a', 'b'] })],
      containers: [ctr('a', { state: 'Locked' }), ctr('b', { state: 'Locked' })],
    }),
    actions: [start('a', 'i-1'), start('b', 'i-1')],
  },
  {
    // A booting c2 created for someone else (gone since) is judged as it will be once ready: alone there,
    // a gets the whole 0.1/h, above 1.5 × 0.05/h. It gets its own c1 rather than waiting for one it would
    // refuse.
    name: 'share rule (expected): a container does not wait for a booting instance it would refuse once ready',
    newPerHour: 0.05,
    snapshot: snap({
      types: FAMILY,
      config: { shareRule: 'expected' },
      instances: [inst('i-1', 'c2', 'booting', { stateSince: ago(1), createdFor: ['gone'] })],
      containers: [ctr('a')],
    }),
    actions: [lock('a'), create('c1', 'a')],
  },
  {
    // A running t4 (4 vcpus, 16 GiB, 0.8/h) with 3 vcpus free. c1 (2 vcpus, 1 GiB) would take half of it:
    // share 0.8 × 2/4 = 0.4/h against its cheapest type t2 at 0.2/h × 2 = 0.4/h: used. c2 (1 vcpu): 0.8 ×
    // 1/4 = 0.2/h against t1 at 0.1/h × 2 = 0.2/h: used.
    name: 'share rule: the share is the largest fraction of the instance the container takes (factor 2)',
    newPerHour: 0,
    snapshot: snap({
      config: { maxPriceFactor: 2, shareRule: 'share' },
      instances: [inst('i-1', 't4', 'running')],
      containers: [ctr('c0', { state: 'Running', instance: 'i-1' }), ctr('c1', { vcpus: 2 }), ctr('c2')],
    }),
    actions: [lock('c1'), start('c1', 'i-1'), lock('c2'), start('c2', 'i-1')],
  },
  {
    // The same with the default factor 1.5: 0.4/h > 0.3/h and 0.2/h > 0.15/h, so each gets its cheapest
    // type; c2 cannot join c1's new t2 (full), and growing it into a t4 would make c2's share 0.2/h.
    name: 'share rule: the share is the largest fraction of the instance the container takes (factor 1.5)',
    newPerHour: 0.3,
    snapshot: snap({
      instances: [inst('i-1', 't4', 'running')],
      containers: [ctr('c0', { state: 'Running', instance: 'i-1' }), ctr('c1', { vcpus: 2 }), ctr('c2')],
    }),
    actions: [lock('c1'), lock('c2'), create('t2', 'c1'), create('t1', 'c2')],
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
  // Rule 3: batch packing. A family priced in proportion to size, and a memory type.
  {
    // 4 × c1 = 4 × 0.05/h = 0.2/h = one c4: the same price, one boot instead of four. batch_packing cost
    // grows an instance only by what the newcomer's own share costs (0.05/h): c1 → c2 for b, not c2 → c4
    // (+0.1/h) for c; boots counts the containers like c behind it (d) that the c4 would also hold.
    name: 'batch packing (boots): four 1-vcpu containers get one 4-vcpu instance',
    newPerHour: 0.2,
    snapshot: snap({
      types: FAMILY,
      config: { shareRule: 'share', batchPacking: 'boots' },
      containers: [ctr('a'), ctr('b'), ctr('c'), ctr('d')],
    }),
    actions: [lock('a'), lock('b'), lock('c'), lock('d'), create('c4', 'a', 'b', 'c', 'd')],
    status: { d: 'waiting for a new c4 instance (create requested)' },
  },
  {
    // 2 × c2 = 2 × 0.1/h = 0.2/h, the price of four c1 (4 × 0.05/h) or one c4, with two boots.
    name: 'batch packing (cost): four 1-vcpu containers get two 2-vcpu instances, the same 0.2/h',
    newPerHour: 0.2,
    snapshot: snap({
      types: FAMILY,
      config: { shareRule: 'share' },
      containers: [ctr('a'), ctr('b'), ctr('c'), ctr('d')],
    }),
    actions: [lock('a'), lock('b'), lock('c'), lock('d'), create('c2', 'a', 'b'), create('c2', 'c', 'd')],
    status: { a: 'waiting for a new c2 instance (create requested)' },
  },
  {
    // 2 × c1 = 2 × 0.05/h = 0.1/h: the same price as one c2, but two boots.
    name: 'batch packing (off): a planned instance never grows',
    newPerHour: 0.1,
    snapshot: snap({
      types: FAMILY,
      config: { shareRule: 'share', batchPacking: 'off' },
      containers: [ctr('a'), ctr('b')],
    }),
    actions: [lock('a'), lock('b'), create('c1', 'a'), create('c1', 'b')],
  },
  {
    // c2 + c1 = 0.15/h; one c4 would be 0.2/h with a vcpu paid for and unused.
    name: 'batch packing: three 1-vcpu containers get a 2-vcpu and a 1-vcpu instance, not a half-empty 4-vcpu one',
    newPerHour: 0.15,
    snapshot: snap({
      types: FAMILY,
      config: { shareRule: 'share' },
      containers: [ctr('a'), ctr('b'), ctr('c')],
    }),
    actions: [lock('a'), lock('b'), lock('c'), create('c2', 'a', 'b'), create('c1', 'c')],
  },
  {
    // c4 + c1 = 0.25/h; one c8 would be 0.4/h.
    name: 'batch packing (boots): five 1-vcpu containers get a 4-vcpu and a 1-vcpu instance',
    newPerHour: 0.25,
    snapshot: snap({
      types: FAMILY,
      config: { shareRule: 'share', batchPacking: 'boots' },
      containers: [ctr('a'), ctr('b'), ctr('c'), ctr('d'), ctr('e')],
    }),
    actions: [
      lock('a'),
      lock('b'),
      lock('c'),
      lock('d'),
      lock('e'),
      create('c4', 'a', 'b', 'c', 'd'),
      create('c1', 'e'),
    ],
  },
  {
    // cpu (3 vcpus, 1 GiB) alone: c4 at 0.2/h; mem (1 vcpu, 20 GiB) alone: m4 at 0.3/h; together (4 vcpus,
    // 21 GiB) they fit one m4: 0.3/h instead of 0.5/h. cpu's share of the m4 is 0.3 × 3/4 = 0.225/h, within
    // 1.5 × 0.2/h.
    name: 'batch packing: complementary shapes share one instance of a type that holds both',
    newPerHour: 0.3,
    snapshot: snap({
      config: { shareRule: 'share' },
      types: FAMILY,
      containers: [ctr('cpu', { vcpus: 3 }), ctr('mem', { ram: 20 * GiB })],
    }),
    actions: [lock('cpu'), lock('mem'), create('m4', 'cpu', 'mem')],
  },
  {
    // The one instance max_instances allows goes to the higher priority first: hi and lo1 share a c2;
    // growing it into a c4 for lo2 alone would cost 0.1/h more than lo2's own c1 (0.05/h), which the limit
    // does not allow.
    name: 'batch packing keeps priority order and limits',
    newPerHour: 0.1,
    snapshot: snap({
      types: FAMILY,
      config: { shareRule: 'share', maxInstances: 1 },
      containers: [ctr('lo1', { priority: 1 }), ctr('lo2', { priority: 1 }), ctr('hi', { priority: 5 })],
    }),
    actions: [lock('hi'), lock('lo1'), create('c2', 'hi', 'lo1')],
    status: { lo2: 'queue position 1; waits for a c1 instance; max_instances=1 reached' },
  },
  // Spot (preemptible) containers.
  {
    // c1 was interrupted twice: on demand, even beside free room on a spot instance; c2 once: still spot.
    name: 'spot: after on_demand_after_interruptions a preemptible container runs on demand; fewer, on spot',
    snapshot: snap({
      types: SPOT,
      config: { onDemandAfterInterruptions: 2 },
      instances: [inst('i-1', 't2-spot', 'running')],
      containers: [
        ctr('c0', { state: 'Running', instance: 'i-1', preemptible: true }),
        ctr('c1', { preemptible: true, spotInterruptions: 2 }),
        ctr('c2', { preemptible: true, spotInterruptions: 1 }),
      ],
    }),
    actions: [lock('c1'), lock('c2'), start('c2', 'i-1'), create('t2', 'c1')],
  },
  {
    name: 'spot: a container only spot types can hold stays on spot whatever its interruptions',
    snapshot: snap({
      types: SPOT,
      config: { onDemandAfterInterruptions: 2 },
      containers: [ctr('c1', { preemptible: true, spotInterruptions: 5, instanceTypes: ['t2-spot'] })],
    }),
    actions: [lock('c1'), create('t2-spot', 'c1')],
  },
  // Per-user limits and fair sharing (issue 10).
  {
    name: 'max_running_per_user: an owner at the cap waits; others go ahead',
    snapshot: snap({
      config: { maxRunningPerUser: 1, maxPriceFactor: 10 },
      instances: [inst('i-1', 't4', 'running')],
      containers: [
        ctr('a0', { state: 'Running', instance: 'i-1', owner: 'alice' }),
        ctr('a1', { owner: 'alice' }),
        ctr('b1', { owner: 'bob' }),
      ],
    }),
    actions: [lock('b1'), start('b1', 'i-1')],
    status: {
      a1: "queue position 1; waits for its owner's running containers to finish; owner alice has 1 containers placed; max_running_per_user=1",
    },
  },
  {
    // Room for two: without fair sharing a1 and a2 (the oldest) would take it.
    name: 'fair share: at equal priority owners take turns',
    snapshot: snap({
      config: { maxInstances: 1, maxPriceFactor: 10 },
      instances: [inst('i-1', 't2', 'idle')],
      containers: [
        ctr('a1', { owner: 'alice' }),
        ctr('a2', { owner: 'alice' }),
        ctr('a3', { owner: 'alice' }),
        ctr('b1', { owner: 'bob' }),
      ],
    }),
    actions: [lock('a1'), start('a1', 'i-1'), lock('b1'), start('b1', 'i-1')],
  },
  {
    name: 'fair share: the owner with fewer containers running goes first',
    snapshot: snap({
      config: { maxInstances: 2, maxPriceFactor: 10 },
      instances: [inst('i-1', 't2', 'running'), inst('i-2', 't1', 'idle')],
      containers: [
        ctr('a0', { state: 'Running', instance: 'i-1', owner: 'alice' }),
        ctr('a1', { owner: 'alice' }),
        ctr('b1', { owner: 'bob' }),
      ],
    }),
    actions: [lock('b1'), start('b1', 'i-1'), lock('a1'), start('a1', 'i-2')],
  },
  {
    name: 'fair share off: strict queue time',
    snapshot: snap({
      config: { maxInstances: 1, maxPriceFactor: 10, fairShare: false },
      instances: [inst('i-1', 't2', 'idle')],
      containers: [ctr('a1', { owner: 'alice' }), ctr('a2', { owner: 'alice' }), ctr('b1', { owner: 'bob' })],
    }),
    actions: [lock('a1'), start('a1', 'i-1'), lock('a2'), start('a2', 'i-1')],
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
      containers: [ctr('c1', { vcpus: 2 }), ctr('c2', { vcpus: 2 })],
    }),
    actions: [lock('c1'), create('t2', 'c1')],
    status: { c2: 'queue position 1; waits for a t2 instance; max_instances=1 reached' },
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
      config: { maxInstances: 2 },
      instances: [inst('i-1', 't1', 'idle', { stateSince: ago(5) }), inst('i-2', 't1', 'running')],
      containers: [
        ctr('r', { state: 'Running', instance: 'i-2', vcpus: 0.5 }),
        ctr('high', { priority: 5, vcpus: 4 }),
        ctr('low', { priority: 1, vcpus: 0.5 }),
      ],
    }),
    // i-1 (empty) is drained for the head and goes; the half-free i-2 still takes low.
    actions: [
      shutdown(
        'i-1',
        'idle and no waiting container can use it; max_instances=2 reached blocks container high',
      ),
      lock('low'),
      start('low', 'i-2'),
    ],
    status: { high: 'max_instances=2 reached' },
  },
  {
    // Issue 10 item 5: with max_instances 1, low-priority one-vcpu containers kept taking the one small
    // instance as each one ended, and the high-priority head, which needs t4, waited as long as they came.
    name: 'at a limit, the instance the head needs freed is drained: lower-priority work is not placed on it',
    snapshot: snap({
      config: { maxInstances: 1 },
      instances: [inst('i-1', 't2', 'running')],
      containers: [
        ctr('r', { state: 'Running', instance: 'i-1', priority: 1 }),
        ctr('high', { priority: 1000, vcpus: 4 }),
        ctr('low', { priority: 100 }),
      ],
    }),
    actions: [],
    status: {
      high: 'queue position 1; waits for a t4 instance; max_instances=1 reached',
      low: 'new instances go to container high and others ahead first',
    },
  },
  {
    name: 'at a limit, an instance the head can run on is drained for it, and it takes the room when there is enough',
    snapshot: snap({
      config: { maxInstances: 1, maxPriceFactor: 10 },
      instances: [inst('i-1', 't4', 'running')],
      containers: [
        ctr('r', { state: 'Running', instance: 'i-1', priority: 1, vcpus: 2 }),
        ctr('high', { priority: 1000, vcpus: 3 }),
        ctr('low', { priority: 100 }),
      ],
    }),
    actions: [],
    status: { high: 'queue position 1; waits for a t4 instance; max_instances=1 reached' },
  },
  {
    name: 'a rate limit is not a limit for rule 5: idle instances are not shut down for it',
    snapshot: snap({
      config: { minBillingPeriodMs: 60_000 },
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
  {
    name: 'an instance listing one described and one unknown container takes no new work',
    snapshot: snap({
      config: { maxPriceFactor: 10 },
      instances: [inst('i-1', 't4', 'running', { containers: ['c2', 'mystery'] })],
      containers: [ctr('c1'), ctr('c2', { state: 'Running', instance: 'i-1' })],
    }),
    actions: [lock('c1'), create('t1', 'c1')],
  },
  {
    name: 'an instance listing only described containers takes work in the room they leave',
    snapshot: snap({
      config: { maxPriceFactor: 10 },
      instances: [inst('i-1', 't4', 'running', { containers: ['c2'] })],
      containers: [ctr('c1'), ctr('c2', { state: 'Running', instance: 'i-1' })],
    }),
    actions: [lock('c1'), start('c1', 'i-1')],
  },
  // Instance lifecycle.
  {
    name: 'idle with no arrival likely to use it: shut down at once',
    snapshot: snap({
      instances: [inst('i-1', 't1', 'idle', { stateSince: ago(2) })],
    }),
    actions: [shutdown('i-1', 'idle for 2s; no recent arrival is likely to use it within idle_timeout=10s')],
  },
  {
    // 6 one-vcpu arrivals in the 1-minute arrival_window: 1 expected within idle_timeout (10s): the most
    // recently idle t1 stays warm, the other goes. Arrivals that need 2 vcpus cannot use a t1.
    name: 'idle instances are kept warm for as many arrivals as are expected within idle_timeout',
    snapshot: snap({
      arrivals: [
        { vcpus: 1, ram: GiB, scratch: 0, gpus: 0, preemptible: false, instanceTypes: null, count: 6 },
        { vcpus: 2, ram: GiB, scratch: 0, gpus: 0, preemptible: false, instanceTypes: null, count: 50 },
      ],
      instances: [
        inst('i-1', 't1', 'idle', { stateSince: ago(61) }),
        inst('i-2', 't1', 'idle', { stateSince: ago(59) }),
      ],
    }),
    actions: [
      shutdown(
        'i-1',
        'idle for 1m1s; recent arrivals are likely to use 1 idle instance of its type within idle_timeout=10s, kept',
      ),
    ],
  },
  {
    name: 'an instance kept warm goes after max_idle_time all the same',
    snapshot: snap({
      arrivals: [
        { vcpus: 1, ram: GiB, scratch: 0, gpus: 0, preemptible: false, instanceTypes: null, count: 100 },
      ],
      instances: [inst('i-1', 't1', 'idle', { stateSince: ago(601) })],
    }),
    actions: [shutdown('i-1', 'idle for 10m1s (max_idle_time=10m)')],
  },
  {
    name: 'min_billing_period: an idle instance younger than the billed minimum is kept (it is paid for)',
    snapshot: snap({
      config: { minBillingPeriodMs: 60_000 },
      instances: [
        inst('young', 't1', 'idle', { stateSince: ago(5), createdAt: ago(59) }),
        inst('old', 't1', 'idle', { stateSince: ago(5), createdAt: ago(61) }),
      ],
    }),
    actions: [shutdown('old', 'idle for 5s; no recent arrival is likely to use it within idle_timeout=10s')],
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
    actions: [shutdown('i-1', 'idle for 10m; no recent arrival is likely to use it within idle_timeout=10s')],
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
    actions: [
      shutdown('i-2', 'idle for 3m20s; no recent arrival is likely to use it within idle_timeout=10s'),
    ],
  },
];

describe('scheduler rules', () => {
  it.each(rows.map((r) => [r.name, r] as const))('%s', (_name, row) => {
    const p = plan(row.snapshot);
    if (row.newPerHour !== undefined) {
      const price = new Map(row.snapshot.instanceTypes.map((t) => [t.name, t.price]));
      const created = p.actions.reduce((sum, a) => sum + (a.op === 'create' ? price.get(a.type)! : 0), 0);
      expect(created, 'hourly price of the instances created').toBeCloseTo(row.newPerHour, 9);
    }
    expect(p.actions).toEqual(row.actions);
    for (const [id, text] of Object.entries(row.status ?? {})) expect(p.status.get(id)).toContain(text);
  });

  it('share rule (expected): a batch created for two containers is used when it boots, not replaced', () => {
    // The bug of issue 14: the locked containers refused their own new instance once it was ready (an
    // empty instance's expected share is its whole price) and got another batch instance, again and again.
    let s = snap({ types: FAMILY, config: { shareRule: 'expected' }, containers: [ctr('a'), ctr('b')] });
    const created = { n: 0 };
    for (let pass = 0; pass < 12 && !s.containers.every((c) => c.state === 'Running'); pass++)
      s = applyPlan(s, plan(s), { stepMs: 10_000, bootMs: 30_000 }, created);
    expect(s.containers.map((c) => [c.id, c.state, c.instance])).toEqual([
      ['a', 'Running', 'n-1'],
      ['b', 'Running', 'n-1'],
    ]);
    expect(created.n).toBe(1);
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
