// The ec2 driver through the real AWS SDK against a real EC2 API (moto_server) behind the emulator's
// proxy, which injects EC2's own errors with their HTTP statuses: every error mapping, subnet fallback,
// pagination, idempotent creates (ClientToken), spot, tags and volumes.
import { DescribeInstanceAttributeCommand, DescribeVolumesCommand } from '@aws-sdk/client-ec2';
import { afterAll, afterEach, beforeAll, describe, expect } from 'vitest';
import { clientToken } from '../../src/cloud/ec2/driver.js';
import { Ec2AccessError, Ec2RequestError } from '../../src/cloud/ec2/errors.js';
import {
  CapacityError,
  CloudApiError,
  NotFoundError,
  QuotaError,
  RateLimitError,
} from '../../src/cloud/errors.js';
import { ManualClock } from '../../src/model/clock.js';
import { itIf } from '../helpers/needs.js';
import { bootData, ec2type, ec2World, noMoto, type Ec2World } from './ec2-helpers.js';

const it = itIf(noMoto);
const GiB = 1024 ** 3;
const small = ec2type('small', 't3.small');
const spot = ec2type('small-spot', 't3.small', { preemptible: true, price: 0.007 });
let w: Ec2World;
let seq = 0;
const node = () => `n-test${String(++seq).padStart(12, '0')}`;
const tags = (n: string, extra: Record<string, string> = {}) => ({
  'berth-cluster': 'c1',
  'berth-tag': 't1',
  'berth-node': n,
  ...extra,
});

beforeAll(async () => {
  if (noMoto) return;
  w = await ec2World();
});
afterAll(async () => {
  await w?.stop();
});
afterEach(() => {
  w?.emu.setFaults({});
});

/** Calls the proxy received for an action, by outcome. */
function calls(action: string): Record<string, number> {
  return w.emu.proxy.callCounts()[action] ?? {};
}

async function caught(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

describe('ec2 driver', () => {
  it('create: RunInstances with instance and volume tags, user data, root and scratch volumes, IMDSv2 only', async () => {
    const d = w.driver({ tags: { 'cost-center': 'research' }, root_volume: '30GiB' });
    const n = node();
    const ci = await d.create({ ...small, scratch: 10 * GiB }, tags(n), bootData(n, 'http://10.0.0.5:8470'));
    expect(ci).toMatchObject({ providerType: 't3.small', state: 'pending', preemptible: false });
    const [inst] = await w.instances([{ Name: 'instance-id', Values: [ci.id] }]);
    const instTags = Object.fromEntries((inst!.Tags ?? []).map((t) => [t.Key, t.Value]));
    expect(instTags).toMatchObject({ ...tags(n), 'cost-center': 'research', Name: 'berth c1 small' });
    expect(inst!.SubnetId).toBe(w.subnets[0]);
    expect(inst!.MetadataOptions).toMatchObject({ HttpTokens: 'required', HttpPutResponseHopLimit: 1 });
    // Both volumes carry the tags (cost allocation) and have the configured sizes.
    const vols = await w.emu.direct.send(
      new DescribeVolumesCommand({ Filters: [{ Name: 'attachment.instance-id', Values: [ci.id] }] }),
    );
    expect(vols.Volumes!.map((v) => v.Size).sort((a, b) => a! - b!)).toEqual([10, 30]);
    for (const t of await w.volumeTags(ci.id))
      expect(t).toMatchObject({ ...tags(n), 'cost-center': 'research' });
    const ud = await w.emu.direct.send(
      new DescribeInstanceAttributeCommand({ InstanceId: ci.id, Attribute: 'userData' }),
    );
    const script = Buffer.from(ud.UserData!.Value!, 'base64').toString();
    expect(script.startsWith('#!/bin/bash\n')).toBe(true);
    expect(script).toContain(`'--node-id' '${n}'`);
    expect(script).toContain(`'http://10.0.0.5:8470'`);
    expect(script).toContain(`'secret-${n}'`);
    expect(script).toContain('SCRATCH_GIB=10');
  });

  it('spot: a preemptible type runs as a spot instance', async () => {
    const d = w.driver();
    const n = node();
    const ci = await d.create(spot, tags(n), bootData(n));
    expect(ci.preemptible).toBe(true);
    const [inst] = await w.instances([{ Name: 'instance-id', Values: [ci.id] }]);
    expect(inst!.InstanceLifecycle).toBe('spot');
    const listed = (await d.list({ 'berth-node': n }))[0]!;
    expect(listed.preemptible).toBe(true);
  });

  it('list: by tags, every page (NextToken), live instances only', async () => {
    const d = w.driver({ page_size: 5 });
    const mine: string[] = [];
    for (let i = 0; i < 12; i++) {
      const n = node();
      mine.push((await d.create(small, tags(n, { 'berth-tag': 'paged' }), bootData(n))).id);
    }
    const other = node();
    await d.create(small, tags(other, { 'berth-tag': 'other' }), bootData(other));
    const before = calls('DescribeInstances').ok ?? 0;
    const listed = await d.list({ 'berth-cluster': 'c1', 'berth-tag': 'paged' });
    expect(listed.map((i) => i.id).sort()).toEqual([...mine].sort());
    expect((calls('DescribeInstances').ok ?? 0) - before).toBeGreaterThanOrEqual(3); // 12 at 5 a page
    expect(listed.every((i) => i.tags['berth-tag'] === 'paged' && i.state === 'running')).toBe(true);
    await d.destroy(mine[0]!);
    const after = await d.list({ 'berth-tag': 'paged' });
    expect(after.map((i) => i.id)).not.toContain(mine[0]);
    expect(after).toHaveLength(11);
  });

  it('destroy terminates; an unknown id is NotFoundError; a terminated one destroys again without error', async () => {
    const d = w.driver();
    const n = node();
    const ci = await d.create(small, tags(n), bootData(n));
    await d.destroy(ci.id);
    const [inst] = await w.instances([{ Name: 'instance-id', Values: [ci.id] }]);
    expect(inst!.State!.Name).toBe('terminated');
    await d.destroy(ci.id);
    const err = await caught(d.destroy('i-0123456789abcdef0'));
    expect(err).toBeInstanceOf(NotFoundError);
    expect((err as NotFoundError).id).toBe('i-0123456789abcdef0');
  });

  it('setTags adds and overwrites tags and keeps the others; an unknown id is NotFoundError', async () => {
    const d = w.driver();
    const n = node();
    const ci = await d.create(small, tags(n, { 'berth-idle-behavior': 'run' }), bootData(n));
    await d.setTags(ci.id, { 'berth-idle-behavior': 'drain', extra: 'x' });
    const [listed] = await d.list({ 'berth-node': n });
    expect(listed!.tags).toMatchObject({ ...tags(n), 'berth-idle-behavior': 'drain', extra: 'x' });
    // moto tags unknown ids without complaint; EC2 answers InvalidInstanceID.NotFound, injected here.
    w.emu.setFaults({ rules: [{ action: 'CreateTags', error: 'InvalidInstanceID.NotFound' }] });
    const err = await caught(d.setTags('i-0123456789abcdef0', { a: 'b' }));
    expect(err).toBeInstanceOf(NotFoundError);
    expect((err as NotFoundError).id).toBe('i-0123456789abcdef0');
  });

  it('a create repeated for the same node (same ClientToken) returns the first instance, also concurrently', async () => {
    const d = w.driver();
    const n = node();
    const [a, b] = await Promise.all([
      d.create(small, tags(n), bootData(n)),
      d.create(small, tags(n), bootData(n)),
    ]);
    const c = await w.driver().create(small, tags(n), bootData(n));
    expect(b.id).toBe(a.id);
    expect(c.id).toBe(a.id);
    expect(await w.instances([{ Name: 'tag:berth-node', Values: [n] }])).toHaveLength(1);
    expect(clientToken(n, w.subnets[0]!)).toBe(clientToken(n, w.subnets[0]!));
    expect(clientToken(n, w.subnets[0]!)).not.toBe(clientToken(n, w.subnets[1]!));
  });

  it('a lost RunInstances answer is retried with the same ClientToken: one instance, not two', async () => {
    w.emu.setFaults({ rules: [{ action: 'RunInstances', error: 'lost-response', times: 1 }] });
    const d = w.driver();
    const n = node();
    const ci = await d.create(small, tags(n), bootData(n));
    const made = await w.instances([{ Name: 'tag:berth-node', Values: [n] }]);
    expect(made.map((i) => i.InstanceId)).toEqual([ci.id]);
    expect(calls('RunInstances')['lost-response']).toBe(1);
    expect(calls('RunInstances').replayed).toBeGreaterThanOrEqual(1);
  });

  it('a lost answer retried into a capacity shortage still returns the first instance (EC2 checks the ClientToken first)', async () => {
    w.emu.setFaults({
      rules: [
        { action: 'RunInstances', error: 'lost-response', times: 1 },
        { action: 'RunInstances', error: 'InsufficientInstanceCapacity', subnet: w.subnets[0] },
      ],
    });
    const d = w.driver();
    const n = node();
    const ci = await d.create(small, tags(n), bootData(n));
    const made = await w.instances([{ Name: 'tag:berth-node', Values: [n] }]);
    expect(made.map((i) => [i.InstanceId, i.SubnetId])).toEqual([[ci.id, w.subnets[0]]]);
    expect(calls('RunInstances')).toEqual({ 'lost-response': 1, replayed: 1, ok: 1 });
  });

  it('concurrent creates for different nodes make one instance each', async () => {
    const d = w.driver();
    const nodes = Array.from({ length: 16 }, node);
    const made = await Promise.all(
      nodes.map((n) => d.create(small, tags(n, { 'berth-tag': 'conc' }), bootData(n))),
    );
    expect(new Set(made.map((m) => m.id)).size).toBe(16);
    expect(await w.instances([{ Name: 'tag:berth-tag', Values: ['conc'] }])).toHaveLength(16);
  });

  it('no capacity in one zone: the create moves on to the next subnet (the SDK retries nothing)', async () => {
    w.emu.setFaults({
      rules: [{ action: 'RunInstances', error: 'InsufficientInstanceCapacity', subnet: w.subnets[0] }],
    });
    const clock = new ManualClock();
    const d = w.driver({ capacity_ttl: '60s' }, clock);
    const n1 = node();
    const ci = await d.create(small, tags(n1), bootData(n1));
    const [inst] = await w.instances([{ Name: 'instance-id', Values: [ci.id] }]);
    expect(inst!.SubnetId).toBe(w.subnets[1]);
    // One call refused (a 500): the SDK did not repeat it.
    expect(calls('RunInstances').InsufficientInstanceCapacity).toBe(1);
    // The next create of that type goes to the other subnets first...
    const n2 = node();
    await d.create(small, tags(n2), bootData(n2));
    expect(calls('RunInstances').InsufficientInstanceCapacity).toBe(1);
    // ...until capacity_ttl has passed.
    clock.advance(61_000);
    const n3 = node();
    await d.create(small, tags(n3), bootData(n3));
    expect(calls('RunInstances').InsufficientInstanceCapacity).toBe(2);
  });

  it('no capacity in any zone: CapacityError for the type, naming each subnet; nothing made', async () => {
    w.emu.setFaults({
      rules: [{ action: 'RunInstances', error: 'InsufficientInstanceCapacity', instance_type: 't3.small' }],
    });
    const d = w.driver();
    const n = node();
    const err = await caught(d.create(small, tags(n), bootData(n)));
    expect(err).toBeInstanceOf(CapacityError);
    expect((err as CapacityError).scope).toBe('type');
    expect((err as CapacityError).subject).toBe('t3.small');
    for (const s of w.subnets.slice(0, 3)) expect(err.message).toContain(s);
    expect(err.message).toContain('us-east-1');
    expect(calls('RunInstances').InsufficientInstanceCapacity).toBe(3);
    expect(await w.instances([{ Name: 'tag:berth-node', Values: [n] }])).toHaveLength(0);
    // Another type is not affected.
    const m = node();
    await expect(d.create(ec2type('medium', 't3.medium'), tags(m), bootData(m))).resolves.toMatchObject({
      providerType: 't3.medium',
    });
  });

  it('Unsupported (the type is not offered in the zone) is a capacity error too', async () => {
    w.emu.setFaults({ rules: [{ action: 'RunInstances', error: 'Unsupported' }] });
    const n = node();
    const err = await caught(w.driver().create(small, tags(n), bootData(n)));
    expect(err).toBeInstanceOf(CapacityError);
    expect(err.message).toContain('Unsupported');
  });

  it('the account instance limit: InstanceLimitExceeded is a QuotaError of its group', async () => {
    const d = w.driver();
    const live = (await w.instances([{ Name: 'instance-state-name', Values: ['pending', 'running'] }]))
      .length;
    w.emu.setFaults({ limits: { max_instances: live + 1 } });
    const n1 = node();
    await d.create(small, tags(n1), bootData(n1));
    const n2 = node();
    const err = await caught(d.create(small, tags(n2), bootData(n2)));
    expect(err).toBeInstanceOf(QuotaError);
    expect((err as QuotaError).group).toBe('on-demand/standard');
    expect(err.message).toContain('InstanceLimitExceeded');
    expect(calls('RunInstances').InstanceLimitExceeded).toBe(1);
    expect(await w.instances([{ Name: 'tag:berth-node', Values: [n2] }])).toHaveLength(0);
  });

  it('the vCPU limit of a quota group: VcpuLimitExceeded with the stated limit; other groups unaffected', async () => {
    const d = w.driver();
    const used = (
      await w.instances([{ Name: 'instance-state-name', Values: ['pending', 'running'] }])
    ).filter((i) => i.InstanceType?.startsWith('g4dn')).length;
    expect(used).toBe(0);
    w.emu.setFaults({ limits: { max_vcpus: { 'on-demand/g-vt': 4 } } });
    const gpu = ec2type('gpu', 'g4dn.xlarge', { vcpus: 4, gpus: 1 });
    const n1 = node();
    await d.create(gpu, tags(n1), bootData(n1));
    const n2 = node();
    const err = await caught(d.create(gpu, tags(n2), bootData(n2)));
    expect(err).toBeInstanceOf(QuotaError);
    expect((err as QuotaError).group).toBe('on-demand/g-vt');
    expect((err as QuotaError).limit.vcpus).toBe(4);
    const n3 = node();
    await expect(d.create(small, tags(n3), bootData(n3))).resolves.toBeTruthy();
  });

  it('the spot instance limit: MaxSpotInstanceCountExceeded is a QuotaError of the spot group', async () => {
    const d = w.driver();
    const spots = (
      await w.instances([{ Name: 'instance-state-name', Values: ['pending', 'running'] }])
    ).filter((i) => i.InstanceLifecycle === 'spot').length;
    w.emu.setFaults({ limits: { max_spot_instances: spots } });
    const n = node();
    const err = await caught(d.create(spot, tags(n), bootData(n)));
    expect(err).toBeInstanceOf(QuotaError);
    expect((err as QuotaError).group).toBe('spot/standard');
    const m = node();
    await expect(d.create(small, tags(m), bootData(m))).resolves.toBeTruthy(); // on-demand is not limited
  });

  it('throttling: RequestLimitExceeded is a RateLimitError whose earliest retry backs off (mutations not retried by the SDK)', async () => {
    w.emu.setFaults({ rules: [{ error: 'RequestLimitExceeded', action: 'RunInstances' }] });
    const clock = new ManualClock('2026-01-01T00:00:00Z');
    const d = w.driver({}, clock);
    const n = node();
    const e1 = await caught(d.create(small, tags(n), bootData(n)));
    expect(e1).toBeInstanceOf(RateLimitError);
    expect((e1 as RateLimitError).earliestRetry.toISOString()).toBe('2026-01-01T00:00:01.000Z');
    const e2 = await caught(d.create(small, tags(n), bootData(n)));
    expect((e2 as RateLimitError).earliestRetry.toISOString()).toBe('2026-01-01T00:00:02.000Z');
    expect(calls('RunInstances').RequestLimitExceeded).toBe(2);
    // Destroy and setTags: the same.
    w.emu.setFaults({ rules: [{ error: 'RequestLimitExceeded', action: 'TerminateInstances' }] });
    expect(await caught(d.destroy('i-0123456789abcdef0'))).toBeInstanceOf(RateLimitError);
    expect(calls('TerminateInstances').RequestLimitExceeded).toBe(1);
  });

  it('the proxy throttle (calls per second) reaches the driver as RateLimitError', async () => {
    w.emu.setFaults({ throttle: { rate: 0.001, burst: 1 } });
    const d = w.driver();
    const n = node();
    await d.create(small, tags(n), bootData(n)); // the burst
    const m = node();
    expect(await caught(d.create(small, tags(m), bootData(m)))).toBeInstanceOf(RateLimitError);
  });

  it('reads keep the SDK retries: a throttled DescribeInstances page is retried', async () => {
    w.emu.setFaults({ rules: [{ error: 'RequestLimitExceeded', action: 'DescribeInstances', times: 1 }] });
    const listed = await w.driver().list({ 'berth-cluster': 'c1' });
    expect(listed.length).toBeGreaterThan(0);
    expect(calls('DescribeInstances').RequestLimitExceeded).toBe(1);
  });

  it('AuthFailure and UnauthorizedOperation are fatal errors naming the refused action', async () => {
    const d = w.driver();
    w.emu.setFaults({ rules: [{ error: 'UnauthorizedOperation', action: 'RunInstances' }] });
    const n = node();
    const e1 = await caught(d.create(small, tags(n), bootData(n)));
    expect(e1).toBeInstanceOf(Ec2AccessError);
    expect((e1 as Ec2AccessError).retryable).toBe(false);
    expect(e1.message).toContain('EC2 refused RunInstances (UnauthorizedOperation)');
    expect(e1.message).toContain('ec2:RunInstances');
    w.emu.setFaults({ rules: [{ error: 'AuthFailure', action: 'TerminateInstances' }] });
    const e2 = await caught(d.destroy('i-0123456789abcdef0'));
    expect(e2).toBeInstanceOf(Ec2AccessError);
    expect(e2.message).toContain('TerminateInstances');
    w.emu.setFaults({ rules: [{ error: 'AuthFailure', action: 'DescribeInstances' }] });
    expect((await caught(d.list({}))).message).toContain('EC2 refused DescribeInstances');
  });

  it('a 5xx on create is retried with the same ClientToken; after create_attempts it is a retryable CloudApiError', async () => {
    const d = w.driver({ create_attempts: 3 });
    w.emu.setFaults({ rules: [{ error: 'InternalError', action: 'RunInstances', times: 1 }] });
    const n = node();
    const ci = await d.create(small, tags(n), bootData(n));
    expect((await w.instances([{ Name: 'tag:berth-node', Values: [n] }])).map((i) => i.InstanceId)).toEqual([
      ci.id,
    ]);
    w.emu.setFaults({ rules: [{ error: 'InternalError', action: 'RunInstances' }] });
    const m = node();
    const err = await caught(d.create(small, tags(m), bootData(m)));
    expect(err).toBeInstanceOf(CloudApiError);
    expect((err as CloudApiError).retryable).toBe(true);
    expect(err.message).toContain('RunInstances failed 3 times');
    expect(calls('RunInstances').InternalError).toBe(3); // counted since the second fault document
  });

  it('a request EC2 rejects (unknown AMI) is a non-retryable error naming the code', async () => {
    w.emu.setFaults({ rules: [{ error: 'InvalidAMIID.NotFound', action: 'RunInstances' }] });
    const n = node();
    const err = await caught(w.driver().create(small, tags(n), bootData(n)));
    expect(err).toBeInstanceOf(Ec2RequestError);
    expect((err as Ec2RequestError).retryable).toBe(false);
    expect(err.message).toContain('InvalidAMIID.NotFound');
  });

  it('bad boot data or a type without an AMI is refused before any call', async () => {
    const before = calls('RunInstances');
    const d = w.driver({ ami: undefined, ami_by_type: { small: w.ami } });
    const bad = JSON.parse(bootData('n-x')) as Record<string, unknown>;
    const refused = await caught(d.create(small, tags('n-x'), JSON.stringify({ ...bad, api_url: 1 })));
    expect(refused).toBeInstanceOf(CloudApiError);
    expect((refused as CloudApiError).retryable).toBe(false);
    expect(refused.message).toContain('boot data: api_url:');
    const other = ec2type('other', 't3.micro');
    expect((await caught(d.create(other, tags('n-y'), bootData('n-y')))).message).toContain(
      'no AMI for type other',
    );
    expect(calls('RunInstances')).toEqual(before);
  });

  it('the control API: fault documents are validated (400 naming the field), calls are counted', async () => {
    const put = (body: string) =>
      fetch(`${w.emu.endpoint}/_emu/faults`, {
        method: 'PUT',
        body,
        headers: { 'content-type': 'application/json' },
      });
    const bad = await put(JSON.stringify({ rules: [{ error: 'Nope' }] }));
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toContain('faults.rules[0].error');
    expect((await put('{not json')).status).toBe(400);
    const ok = await put(
      JSON.stringify({ rules: [{ action: 'TerminateInstances', error: 'InternalError' }] }),
    );
    expect(ok.status).toBe(200);
    expect(await caught(w.driver().destroy('i-0123456789abcdef0'))).toBeInstanceOf(CloudApiError);
    const got = (await (await fetch(`${w.emu.endpoint}/_emu/calls`)).json()) as {
      calls: Record<string, Record<string, number>>;
    };
    expect(got.calls.TerminateInstances).toEqual({ InternalError: 1 });
    const interrupt = await fetch(`${w.emu.endpoint}/_emu/interrupt`, {
      method: 'POST',
      body: JSON.stringify({ instance_id: 'i-0123456789abcdef0', kind: 'explode' }),
    });
    expect(interrupt.status).toBe(400);
    expect(((await interrupt.json()) as { error: string }).error).toContain(
      'kind: expected "terminate" or "rebalance"',
    );
    expect((await fetch(`${w.emu.endpoint}/_emu/nothing`)).status).toBe(404);
  });
});
