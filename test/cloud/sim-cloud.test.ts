import { describe, expect, it } from 'vitest';
import {
  CapacityError,
  CloudApiError,
  NotFoundError,
  QuotaError,
  RateLimitError,
} from '../../src/cloud/errors.js';
import { SimCloud, type SimCloudEvent } from '../../src/cloud/sim/sim-cloud.js';
import type { SimCloudOptions } from '../../src/cloud/sim/options.js';
import { VirtualClock } from '../../src/sim/clock.js';
import { itype } from './helpers.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');

function setup(opts: Partial<SimCloudOptions> = {}) {
  const clock = new VirtualClock(T0);
  const cloud = new SimCloud(clock, { seed: 1, bootTime: { kind: 'fixed', ms: 60_000 }, ...opts });
  const events: SimCloudEvent[] = [];
  cloud.onEvent((e) => events.push(e));
  return { clock, cloud, events };
}

/** Outcome of `n` creates: the error class name or "ok" for each. */
async function outcomes(cloud: SimCloud, n: number, typeName = 'a'): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    try {
      await cloud.create(itype(typeName), {}, '');
      out.push('ok');
    } catch (err) {
      out.push((err as Error).name);
    }
  }
  return out;
}

describe('sim cloud: the driver contract', () => {
  it('creates pending instances that run after the boot time and start their agent with the boot data', async () => {
    const { clock, cloud, events } = setup();
    const inst = await cloud.create(itype('a'), { cluster: 'c1' }, 'boot-secret');
    expect(inst).toMatchObject({ id: 'sim-1', providerType: 'a', state: 'pending', tags: { cluster: 'c1' } });
    expect(inst.createdAt).toEqual(new Date(T0));
    clock.runUntil(T0 + 59_999);
    expect(cloud.get('sim-1')!.state).toBe('pending');
    clock.runUntil(T0 + 60_000);
    expect(cloud.get('sim-1')!.state).toBe('running');
    expect(events).toEqual([
      { type: 'agent-started', id: 'sim-1', at: new Date(T0 + 60_000), bootData: 'boot-secret' },
    ]);
  });

  it('lists by tag filter, merges tags, and returns copies', async () => {
    const { cloud } = setup();
    await cloud.create(itype('a'), { cluster: 'c1', role: 'x' }, '');
    await cloud.create(itype('a'), { cluster: 'c2' }, '');
    expect((await cloud.list({ cluster: 'c1' })).map((i) => i.id)).toEqual(['sim-1']);
    expect((await cloud.list({})).map((i) => i.id)).toEqual(['sim-1', 'sim-2']);
    await cloud.setTags('sim-2', { cluster: 'c1', extra: 'y' });
    const both = await cloud.list({ cluster: 'c1' });
    expect(both.map((i) => i.id)).toEqual(['sim-1', 'sim-2']);
    expect(both[1]!.tags).toEqual({ cluster: 'c1', extra: 'y' });
    both[0]!.tags.cluster = 'mutated';
    expect(cloud.get('sim-1')!.tags.cluster).toBe('c1');
  });

  it('destroy terminates, is idempotent, and the cloud forgets the instance after terminatedVisibleMs', async () => {
    const { clock, cloud, events } = setup({ terminatedVisibleMs: 30_000 });
    await cloud.create(itype('a'), {}, '');
    await cloud.destroy('sim-1');
    await cloud.destroy('sim-1');
    expect(cloud.get('sim-1')!.state).toBe('terminated');
    expect(cloud.live).toBe(0);
    clock.runUntil(T0 + 30_000);
    expect(cloud.get('sim-1')).toBeUndefined();
    await expect(cloud.destroy('sim-1')).rejects.toBeInstanceOf(NotFoundError);
    await expect(cloud.setTags('nope', {})).rejects.toThrow('instance not found: nope');
    // Destroyed before booting: no agent ever starts.
    expect(events.map((e) => e.type)).toEqual(['terminated']);
  });
});

describe('sim cloud: fault knobs', () => {
  it('createErrorRate fails about that share of creates, identically under the same seed', async () => {
    const a = await outcomes(setup({ createErrorRate: 0.3 }).cloud, 300);
    const b = await outcomes(setup({ createErrorRate: 0.3 }).cloud, 300);
    const failed = a.filter((x) => x === 'CloudApiError').length;
    expect(failed).toBeGreaterThan(60);
    expect(failed).toBeLessThan(120);
    expect(b).toEqual(a);
    const other = await outcomes(setup({ createErrorRate: 0.3, seed: 2 }).cloud, 300);
    expect(other).not.toEqual(a);
  });

  it('destroyErrorRate fails destroys with a retryable CloudApiError, and a retry succeeds eventually', async () => {
    const { cloud } = setup({ destroyErrorRate: 0.5 });
    for (let i = 0; i < 20; i++) await cloud.create(itype('a'), {}, '');
    let failures = 0;
    for (let i = 1; i <= 20; i++) {
      for (;;) {
        try {
          await cloud.destroy(`sim-${i}`);
          break;
        } catch (err) {
          expect(err).toBeInstanceOf(CloudApiError);
          expect((err as CloudApiError).retryable).toBe(true);
          failures++;
        }
      }
    }
    expect(failures).toBeGreaterThan(5);
    expect(cloud.live).toBe(0);
  });

  it('capacityErrorRate applies only to the named type, with scope "type"', async () => {
    const { cloud } = setup({ capacityErrorRate: { a: 1 } });
    const err = await cloud.create(itype('a'), {}, '').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CapacityError);
    expect(err).toMatchObject({ scope: 'type', subject: 'a', retryable: true });
    await expect(cloud.create(itype('b'), {}, '')).resolves.toMatchObject({ providerType: 'b' });
  });

  it('typeCapacity caps live instances of a type until one goes away', async () => {
    const { cloud } = setup({ typeCapacity: { a: 2 } });
    expect(await outcomes(cloud, 3)).toEqual(['ok', 'ok', 'CapacityError']);
    await cloud.destroy('sim-1');
    expect(await outcomes(cloud, 1)).toEqual(['ok']);
  });

  it('outages refuse creates by type, quota group or everywhere, only inside their window', async () => {
    const { clock, cloud } = setup({
      quotaGroups: { a: 'fam1', b: 'fam1', c: 'fam2' },
      outages: [
        { scope: 'quota-group', subject: 'fam1', fromMs: T0 + 1000, untilMs: T0 + 2000 },
        { scope: 'type', subject: 'c', fromMs: T0 + 3000, untilMs: T0 + 4000 },
        { scope: 'all', fromMs: T0 + 5000, untilMs: T0 + 6000 },
      ],
    });
    const scopeOf = (name: string) =>
      cloud.create(itype(name), {}, '').then(
        () => 'ok',
        (e: CapacityError) => `${e.scope}:${e.subject}`,
      );
    expect(await scopeOf('a')).toBe('ok');
    clock.runUntil(T0 + 1000);
    expect([await scopeOf('a'), await scopeOf('b'), await scopeOf('c')]).toEqual([
      'quota-group:fam1',
      'quota-group:fam1',
      'ok',
    ]);
    clock.runUntil(T0 + 3500);
    expect([await scopeOf('a'), await scopeOf('c')]).toEqual(['ok', 'type:c']);
    clock.runUntil(T0 + 5000);
    expect([await scopeOf('a'), await scopeOf('c')]).toEqual(['all:null', 'all:null']);
    clock.runUntil(T0 + 6000);
    expect(await scopeOf('c')).toBe('ok');
  });

  it('quota refuses creates over maxInstances or maxVcpus with the limit as data', async () => {
    const byCount = setup({ quota: { maxInstances: 2 } }).cloud;
    expect(await outcomes(byCount, 3)).toEqual(['ok', 'ok', 'QuotaError']);
    const byVcpus = setup({ quota: { maxVcpus: 10 } }).cloud;
    await byVcpus.create(itype('big', 8), {}, '');
    const err = await byVcpus.create(itype('big', 8), {}, '').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QuotaError);
    expect((err as QuotaError).limit).toEqual({ vcpus: 10 });
    await expect(byVcpus.create(itype('small', 2), {}, '')).resolves.toBeDefined();
  });

  it('the API rate limit refuses calls over the bucket with the exact earliest retry', async () => {
    const { clock, cloud } = setup({ rateLimit: { opsPerSecond: 2, burst: 2 } });
    await cloud.list({});
    await cloud.list({});
    const err = (await cloud.list({}).catch((e: unknown) => e)) as RateLimitError;
    expect(err).toBeInstanceOf(RateLimitError);
    expect(err.source).toBe('cloud');
    expect(err.earliestRetry).toEqual(new Date(T0 + 500));
    clock.runUntil(T0 + 499);
    await expect(cloud.list({})).rejects.toBeInstanceOf(RateLimitError);
    clock.runUntil(T0 + 500);
    await expect(cloud.list({})).resolves.toEqual([]);
  });

  it('neverBootRate makes instances run without an agent', async () => {
    const { clock, cloud, events } = setup({ neverBootRate: 1 });
    await cloud.create(itype('a'), {}, '');
    clock.runAll();
    expect(cloud.get('sim-1')!.state).toBe('running');
    expect(events.map((e) => e.type)).toEqual(['broken']);
    const half = setup({ neverBootRate: 0.5, seed: 7 });
    for (let i = 0; i < 200; i++) await half.cloud.create(itype('a'), {}, '');
    half.clock.runAll();
    const broken = half.events.filter((e) => e.type === 'broken').length;
    expect(broken).toBeGreaterThan(70);
    expect(broken).toBeLessThan(130);
    expect(half.events.filter((e) => e.type === 'agent-started').length).toBe(200 - broken);
  });

  it('agentCrashRate crashes the agent after agentCrashAfter; the machine keeps running', async () => {
    const { clock, cloud, events } = setup({
      agentCrashRate: 1,
      agentCrashAfter: { kind: 'fixed', ms: 600_000 },
    });
    await cloud.create(itype('a'), {}, '');
    await cloud.create(itype('a'), {}, '');
    clock.runUntil(T0 + 120_000);
    await cloud.destroy('sim-2');
    clock.runUntil(T0 + 3_600_000);
    expect(events.filter((e) => e.type === 'agent-crashed')).toEqual([
      { type: 'agent-crashed', id: 'sim-1', at: new Date(T0 + 660_000) },
    ]);
    expect(cloud.get('sim-1')!.state).toBe('running');
  });

  it('spot interruptions give a notice, then terminate preemptible instances only', async () => {
    const { clock, cloud, events } = setup({ spot: { interruptionsPerHour: 4, noticeMs: 120_000 } });
    await cloud.create(itype('spot', 2, { preemptible: true }), {}, '');
    await cloud.create(itype('od', 2), {}, '');
    clock.runUntil(T0 + 24 * 3_600_000);
    const notice = events.find((e) => e.type === 'interruption-notice');
    const end = events.find((e) => e.type === 'terminated');
    expect(notice).toBeDefined();
    expect(end).toMatchObject({ id: 'sim-1', reason: 'interrupted' });
    if (notice?.type !== 'interruption-notice' || end === undefined) throw new Error('missing events');
    expect(notice.terminateAt).toEqual(end.at);
    expect(end.at.getTime() - notice.at.getTime()).toBeLessThanOrEqual(120_000);
    expect(cloud.get('sim-2')!.state).toBe('running');
    // Same seed, same interruption time.
    const again = setup({ spot: { interruptionsPerHour: 4, noticeMs: 120_000 } });
    const ends: SimCloudEvent[] = [];
    again.cloud.onEvent((e) => e.type === 'terminated' && ends.push(e));
    await again.cloud.create(itype('spot', 2, { preemptible: true }), {}, '');
    again.clock.runUntil(T0 + 24 * 3_600_000);
    expect(ends[0]!.at).toEqual(end.at);
  });

  it('interruption rates per provider type: a type set to 0 is never reclaimed, a busier one sooner', async () => {
    const lifetimes = async (byType: Record<string, number>) => {
      const { clock, cloud, events } = setup({ spot: { interruptionsPerHour: 1, byType } });
      for (let i = 0; i < 20; i++) await cloud.create(itype('calm', 2, { preemptible: true }), {}, '');
      for (let i = 0; i < 20; i++) await cloud.create(itype('busy', 2, { preemptible: true }), {}, '');
      clock.runUntil(T0 + 1000 * 3_600_000);
      const ended = new Map<string, number>();
      for (const e of events) if (e.type === 'terminated') ended.set(e.id, e.at.getTime() - T0);
      const ids = (from: number) => Array.from({ length: 20 }, (_, i) => `sim-${from + i}`);
      return { calm: ids(1).map((id) => ended.get(id)), busy: ids(21).map((id) => ended.get(id)) };
    };
    const r = await lifetimes({ calm: 0, busy: 10 });
    expect(r.calm.every((t) => t === undefined)).toBe(true);
    expect(r.busy.every((t) => t !== undefined)).toBe(true);
    // The same draws at 10× the rate: each lifetime is a tenth (rounded), the default rate's for 'busy'.
    const dflt = await lifetimes({});
    r.busy.forEach((t, i) => expect(Math.abs(t! * 10 - dflt.busy[i]!)).toBeLessThanOrEqual(10));
  });

  it('the notice is visible in list() once given', async () => {
    const { clock, cloud, events } = setup({ spot: { interruptionsPerHour: 1, noticeMs: 60_000 } });
    await cloud.create(itype('spot', 2, { preemptible: true }), {}, '');
    while (!events.some((e) => e.type === 'interruption-notice')) clock.next();
    const [listed] = await cloud.list({});
    expect(listed!.interruptionNotice).toEqual(clock.now());
  });

  it('boot times follow the distribution, reproducibly under a seed', async () => {
    const bootTimes = async (seed: number) => {
      const { clock, cloud, events } = setup({
        seed,
        bootTime: { kind: 'uniform', minMs: 30_000, maxMs: 90_000 },
      });
      for (let i = 0; i < 50; i++) await cloud.create(itype('a'), {}, '');
      clock.runAll();
      return events.map((e) => e.at.getTime() - T0);
    };
    const a = await bootTimes(3);
    expect(a).toHaveLength(50);
    for (const t of a) expect(t >= 30_000 && t <= 90_000).toBe(true);
    expect(await bootTimes(3)).toEqual(a);
    expect(await bootTimes(4)).not.toEqual(a);
  });

  it('one knob does not reshuffle another: boot times are the same with or without agent crashes', async () => {
    const boots = async (opts: Partial<SimCloudOptions>) => {
      const { clock, cloud, events } = setup({
        bootTime: { kind: 'lognormal', medianMs: 60_000, sigma: 0.5 },
        ...opts,
      });
      for (let i = 0; i < 20; i++) await cloud.create(itype('a'), {}, '');
      clock.runAll();
      return events.filter((e) => e.type === 'agent-started').map((e) => e.at.getTime());
    };
    expect(await boots({ agentCrashRate: 0.5 })).toEqual(await boots({}));
  });

  it('rejects bad options naming the field', () => {
    const clock = new VirtualClock(T0);
    expect(() => new SimCloud(clock, { seed: 1, createErrorRate: 2 })).toThrow(
      'createErrorRate: expected a probability between 0 and 1, got 2',
    );
    expect(() => new SimCloud(clock, { seed: 1, bootTime: { kind: 'fixed', ms: -1 } })).toThrow(
      /^bootTime\.ms/,
    );
    expect(() => new SimCloud(clock, { seed: 1.5 })).toThrow(/^seed:/);
    expect(
      () => new SimCloud(clock, { seed: 1, outages: [{ scope: 'type', fromMs: 0, untilMs: 1 }] }),
    ).toThrow(/^outages\[0\]\.subject/);
  });
});

describe('sim cloud: test controls', () => {
  it('records every call with its virtual time and arguments', async () => {
    const { clock, cloud } = setup();
    await cloud.create(itype('a'), { k: 'v' }, 'boot');
    clock.runUntil(T0 + 5000);
    await cloud.list({ k: 'v' });
    await cloud.destroy('sim-1');
    expect(cloud.controls.calls).toEqual([
      { op: 'create', at: new Date(T0), args: ['a', { k: 'v' }, 'boot'] },
      { op: 'list', at: new Date(T0 + 5000), args: [{ k: 'v' }] },
      { op: 'destroy', at: new Date(T0 + 5000), args: ['sim-1'] },
    ]);
    expect(cloud.controls.count('create')).toBe(1);
  });

  it('injects the next errors of an operation, in order, then behaves normally', async () => {
    const { cloud } = setup();
    cloud.controls.failNext('create', new CapacityError('all', null));
    cloud.controls.failNext('create', new QuotaError('test'));
    expect(await outcomes(cloud, 3)).toEqual(['CapacityError', 'QuotaError', 'ok']);
  });

  it('holds operations until released', async () => {
    const { cloud } = setup();
    cloud.controls.hold('create');
    let done = 0;
    const p1 = cloud.create(itype('a'), {}, '').then(() => done++);
    const p2 = cloud.create(itype('a'), {}, '').then(() => done++);
    await Promise.resolve();
    expect(cloud.controls.parked('create')).toBe(2);
    expect(cloud.live).toBe(0);
    expect(cloud.controls.releaseOne('create')).toBe(true);
    await p1;
    expect(done).toBe(1);
    expect(cloud.live).toBe(1);
    // Other operations are not held.
    await expect(cloud.list({})).resolves.toHaveLength(1);
    cloud.controls.release('create');
    await p2;
    expect(done).toBe(2);
    await expect(cloud.create(itype('a'), {}, '')).resolves.toMatchObject({ id: 'sim-3' });
  });
});

describe('sim cloud: long runs', () => {
  it('recordCalls: false keeps the per-operation counts but no call log', async () => {
    const { cloud } = setup({ recordCalls: false });
    await cloud.create(itype('a'), {}, '');
    await cloud.list({});
    expect(cloud.controls.calls).toEqual([]);
    expect(cloud.controls.count('create')).toBe(1);
    expect(cloud.controls.count()).toBe(2);
  });
});

describe('sim cloud: forced interruption', () => {
  it('interrupt(id) gives a notice now and terminates after the notice period', async () => {
    const { clock, cloud, events } = setup({ spot: { interruptionsPerHour: 0, noticeMs: 30_000 } });
    await cloud.create(itype('spot', 2, { preemptible: true }), {}, '');
    clock.runUntil(T0 + 60_000);
    cloud.interrupt('sim-1');
    expect(cloud.get('sim-1')!.interruptionNotice).toEqual(new Date(T0 + 60_000));
    clock.runUntil(T0 + 89_999);
    expect(cloud.get('sim-1')!.state).toBe('running');
    clock.runUntil(T0 + 90_000);
    expect(events.map((e) => e.type)).toEqual(['agent-started', 'interruption-notice', 'terminated']);
    expect(events[2]).toMatchObject({ reason: 'interrupted', at: new Date(T0 + 90_000) });
    expect(() => cloud.interrupt('sim-1')).toThrow(NotFoundError);
  });
});
