// The `ec2` cloud driver (DESIGN §7) on the AWS SDK v3.
//
// create: RunInstances in the configured subnets in order; a capacity error in one zone moves on to the
// next (and that subnet is tried last for that type for capacity_ttl), a capacity error everywhere is a
// CapacityError for the type, so the scheduler moves on to the next type. Each attempt carries a ClientToken
// derived from the node id and the subnet: a create retried after a timeout (here, up to create_attempts,
// or by anyone holding the same boot data) returns the instance the first attempt made instead of making
// a second one.
// Mutating calls (RunInstances, TerminateInstances, CreateTags) go through a client without SDK retries:
// EC2 sends capacity shortages as 5xx, which the SDK would retry (and so hide) itself, and a throttled call
// must reach the scheduler as a RateLimitError. Reads (DescribeInstances, DescribeSubnets) keep the SDK's
// retries.
import { createHash } from 'node:crypto';
import {
  CreateTagsCommand,
  DescribeInstancesCommand,
  DescribeSubnetsCommand,
  EC2Client,
  RunInstancesCommand,
  TerminateInstancesCommand,
  type Instance,
  type RunInstancesCommandInput,
  type Tag,
} from '@aws-sdk/client-ec2';
import { systemClock, type Clock } from '../../model/clock.js';
import type { InstanceType } from '../../model/types.js';
import { bootDataOf, type BootData } from '../boot-data.js';
import type { CloudInstance, CloudInstanceState, Driver, Tags } from '../driver.js';
import {
  CapacityError,
  CloudApiError,
  CloudError,
  NotFoundError,
  QuotaError,
  RateLimitError,
} from '../errors.js';
import { amiFor, type Ec2Config } from './config.js';
import {
  classifyEc2Error,
  Ec2AccessError,
  Ec2RequestError,
  statedVcpuLimit,
  type Ec2Failure,
} from './errors.js';
import { quotaGroup } from './quota-groups.js';
import { scratchGiB, userDataScript } from './user-data.js';

// The pinned SDK supports Node 20; its warning is about SDK versions published later (see package.json).
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

export interface Ec2DriverOptions {
  config: Ec2Config;
  /** Static credentials (the emulator, tests); default: the SDK's chain (environment, profile, instance role). */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  clock?: Clock;
}

/** States a listed instance can be in; terminated ones are left out (EC2 shows them for about an hour). */
const LIVE_STATES = ['pending', 'running', 'stopping', 'stopped', 'shutting-down'];

const GiB = 1024 ** 3;

/** The ClientToken of one create attempt: the same node and subnet always give the same token. */
export function clientToken(nodeId: string, subnet: string): string {
  return `berth-${createHash('sha256').update(`${nodeId}\n${subnet}`).digest('hex').slice(0, 40)}`;
}

export class Ec2Driver implements Driver {
  readonly config: Ec2Config;
  /** No SDK retries: Berth decides (capacity errors must not be hidden, see the top of this file). */
  private readonly write: EC2Client;
  private readonly read: EC2Client;
  private readonly clock: Clock;
  /** `${providerType} ${subnet}` → until (ms): no capacity there lately. */
  private readonly noCapacity = new Map<string, number>();
  private zones: Map<string, string> | null = null;
  private throttles = 0;

  constructor(o: Ec2DriverOptions) {
    this.config = o.config;
    this.clock = o.clock ?? systemClock;
    const base = {
      region: o.config.region,
      ...(o.config.endpoint ? { endpoint: o.config.endpoint } : {}),
      ...(o.credentials ? { credentials: o.credentials } : {}),
      requestHandler: { connectionTimeout: 5_000, requestTimeout: o.config.requestTimeoutMs },
    };
    this.write = new EC2Client({ ...base, maxAttempts: 1 });
    this.read = new EC2Client({ ...base, maxAttempts: 3 });
  }

  /** Closes the SDK clients' connections. */
  close(): void {
    this.write.destroy();
    this.read.destroy();
  }

  async create(type: InstanceType, tags: Tags, bootData: string): Promise<CloudInstance> {
    const boot = bootDataOf(bootData);
    const ami = amiFor(this.config, type);
    if (!ami)
      throw new CloudApiError(
        `ec2: no AMI for type ${type.name}: set ec2.ami or ec2.ami_by_type.${type.name}`,
        false,
      );
    const userData = Buffer.from(userDataScript(this.config, type, boot)).toString('base64');
    const misses: string[] = [];
    for (const subnet of this.subnetOrder(type.providerType)) {
      const input = this.runInput(type, tags, boot, ami, subnet, userData);
      let f: Ec2Failure;
      try {
        const out = await this.runInstance(input);
        this.noCapacity.delete(`${type.providerType} ${subnet}`);
        return toCloud(out, { ...tagsOf(out.Tags), ...tags });
      } catch (err) {
        if (err instanceof CloudError) throw err;
        f = classifyEc2Error(err);
      }
      if (f.kind !== 'capacity') throw this.cloudError(f, 'RunInstances', type);
      this.noCapacity.set(
        `${type.providerType} ${subnet}`,
        this.clock.now().getTime() + this.config.capacityTtlMs,
      );
      const zone = await this.zoneOf(subnet);
      misses.push(`${subnet}${zone ? ` (${zone})` : ''}: ${f.code}`);
    }
    throw new CapacityError(
      'type',
      type.providerType,
      `no ${type.preemptible ? 'spot ' : ''}capacity for ${type.providerType} in ${misses.join(', ')}`,
    );
  }

  async list(tagFilter: Tags): Promise<CloudInstance[]> {
    const Filters = [
      ...Object.entries(tagFilter).map(([k, v]) => ({ Name: `tag:${k}`, Values: [v] })),
      { Name: 'instance-state-name', Values: LIVE_STATES },
    ];
    const out: CloudInstance[] = [];
    let NextToken: string | undefined;
    do {
      let page;
      try {
        page = await this.read.send(
          new DescribeInstancesCommand({ Filters, MaxResults: this.config.pageSize, NextToken }),
        );
      } catch (err) {
        throw this.cloudError(classifyEc2Error(err), 'DescribeInstances');
      }
      this.throttles = 0;
      for (const r of page.Reservations ?? [])
        for (const i of r.Instances ?? []) out.push(toCloud(i, tagsOf(i.Tags)));
      NextToken = page.NextToken || undefined;
    } while (NextToken);
    return out;
  }

  async destroy(id: string): Promise<void> {
    try {
      await this.write.send(new TerminateInstancesCommand({ InstanceIds: [id] }));
      this.throttles = 0;
    } catch (err) {
      throw this.cloudError(classifyEc2Error(err), 'TerminateInstances', undefined, id);
    }
  }

  async setTags(id: string, tags: Tags): Promise<void> {
    try {
      await this.write.send(
        new CreateTagsCommand({
          Resources: [id],
          Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })),
        }),
      );
      this.throttles = 0;
    } catch (err) {
      throw this.cloudError(classifyEc2Error(err), 'CreateTags', undefined, id);
    }
  }

  /** Subnets in configured order, those that lately had no capacity for this type last. */
  private subnetOrder(providerType: string): string[] {
    const now = this.clock.now().getTime();
    const short = (s: string) => (this.noCapacity.get(`${providerType} ${s}`) ?? 0) > now;
    return [...this.config.subnets.filter((s) => !short(s)), ...this.config.subnets.filter(short)];
  }

  /** RunInstances with retries of the same request (same ClientToken) after timeouts and 5xx errors. */
  private async runInstance(input: RunInstancesCommandInput): Promise<Instance> {
    let last: Ec2Failure | null = null;
    for (let attempt = 1; attempt <= this.config.createAttempts; attempt++) {
      try {
        const out = await this.write.send(new RunInstancesCommand(input));
        this.throttles = 0;
        const inst = out.Instances?.[0];
        if (!inst?.InstanceId) throw new CloudApiError('RunInstances answered without an instance');
        return inst;
      } catch (err) {
        if (err instanceof CloudError) throw err;
        last = classifyEc2Error(err);
        if (last.kind !== 'transient') throw err;
      }
      if (attempt < this.config.createAttempts)
        await new Promise((r) => setTimeout(r, 100 * 2 ** attempt * (0.5 + Math.random())));
    }
    throw new CloudApiError(
      `RunInstances failed ${this.config.createAttempts} times (last: ${last!.code}: ${last!.message})` +
        (last!.outcomeUnknown
          ? `; an instance may exist: it carries this node's tags, and the dispatcher's sync finds it`
          : ''),
    );
  }

  private runInput(
    type: InstanceType,
    tags: Tags,
    boot: BootData,
    ami: string,
    subnet: string,
    userData: string,
  ): RunInstancesCommandInput {
    const c = this.config;
    const allTags: Tag[] = Object.entries({
      Name: `berth ${tags['berth-cluster'] ?? ''} ${type.name}`.replace(/\s+/g, ' ').trim(),
      ...c.tags,
      ...tags,
    }).map(([Key, Value]) => ({ Key, Value }));
    const ebs = (bytes: number) => ({
      VolumeSize: Math.max(1, Math.ceil(bytes / GiB)),
      VolumeType: c.volumeType as 'gp3',
      DeleteOnTermination: true,
      Encrypted: c.encryptedVolumes,
    });
    const scratch = scratchGiB(type);
    const profile = c.iamInstanceProfile;
    return {
      ImageId: ami,
      InstanceType: type.providerType as never,
      MinCount: 1,
      MaxCount: 1,
      ClientToken: clientToken(boot.node_id, subnet),
      SubnetId: subnet,
      ...(c.securityGroups.length > 0 ? { SecurityGroupIds: c.securityGroups } : {}),
      ...(profile
        ? { IamInstanceProfile: profile.startsWith('arn:') ? { Arn: profile } : { Name: profile } }
        : {}),
      ...(c.keyName ? { KeyName: c.keyName } : {}),
      UserData: userData,
      BlockDeviceMappings: [
        { DeviceName: c.rootDevice, Ebs: ebs(c.rootVolumeBytes) },
        ...(scratch > 0 ? [{ DeviceName: c.scratchDevice, Ebs: ebs(scratch * GiB) }] : []),
      ],
      TagSpecifications: [
        { ResourceType: 'instance', Tags: allTags },
        { ResourceType: 'volume', Tags: allTags },
      ],
      ...(type.preemptible
        ? {
            InstanceMarketOptions: {
              MarketType: 'spot',
              SpotOptions: {
                SpotInstanceType: 'one-time',
                InstanceInterruptionBehavior: 'terminate',
                ...(c.spotMaxPrice !== null ? { MaxPrice: String(c.spotMaxPrice) } : {}),
              },
            },
          }
        : {}),
      // IMDSv2 only; hop limit 1 keeps containers behind a bridge (docker) away from the instance's role
      // credentials and user data.
      MetadataOptions: { HttpTokens: 'required', HttpEndpoint: 'enabled', HttpPutResponseHopLimit: 1 },
      // A machine that powers itself off is gone, not a stopped instance whose volumes still bill.
      InstanceInitiatedShutdownBehavior: 'terminate',
    };
  }

  /** The subnet's availability zone, for messages (looked up once; unknown when the lookup fails). */
  private async zoneOf(subnet: string): Promise<string | undefined> {
    if (!this.zones) {
      try {
        const r = await this.read.send(new DescribeSubnetsCommand({ SubnetIds: this.config.subnets }));
        this.zones = new Map((r.Subnets ?? []).map((s) => [s.SubnetId ?? '', s.AvailabilityZone ?? '']));
      } catch {
        return undefined;
      }
    }
    return this.zones.get(subnet) || undefined;
  }

  /** The typed cloud error for a classified failure of `action`. */
  private cloudError(f: Ec2Failure, action: string, type?: InstanceType, id?: string): CloudError {
    switch (f.kind) {
      case 'capacity':
        return new CapacityError('type', type?.providerType ?? null, `${f.code}: ${f.message}`);
      case 'quota':
        return new QuotaError(
          `${f.code}: ${f.message}`,
          f.code === 'VcpuLimitExceeded' ? { vcpus: statedVcpuLimit(f.message) } : {},
          type ? quotaGroup(type.providerType, type.preemptible) : null,
        );
      case 'throttle': {
        // Back off further with every throttle in a row: 1 s, 2 s, 4 s … 30 s.
        const delay = Math.min(30_000, 1000 * 2 ** this.throttles++);
        return new RateLimitError(
          new Date(this.clock.now().getTime() + delay),
          'cloud',
          `EC2 throttled ${action} (${f.code})`,
        );
      }
      case 'not-found':
        return new NotFoundError(id ?? '?');
      case 'access':
        return new Ec2AccessError(action, f.code, f.message);
      case 'invalid':
        return new Ec2RequestError(action, f.code, f.message);
      case 'transient':
        return new CloudApiError(`EC2 ${action} failed: ${f.code}: ${f.message}`);
    }
  }
}

function tagsOf(tags: Tag[] | undefined): Tags {
  const out: Tags = {};
  for (const t of tags ?? []) if (t.Key !== undefined) out[t.Key] = t.Value ?? '';
  return out;
}

function stateOf(name: string | undefined): CloudInstanceState {
  if (name === 'pending') return 'pending';
  // A stopped instance still exists (and its volumes bill): it counts as live until it is terminated.
  if (name === 'running' || name === 'stopping' || name === 'stopped') return 'running';
  return 'terminated';
}

function toCloud(i: Instance, tags: Tags): CloudInstance {
  return {
    id: i.InstanceId!,
    providerType: i.InstanceType ?? '',
    tags: { ...tags },
    state: stateOf(i.State?.Name),
    createdAt: i.LaunchTime ?? new Date(),
    preemptible: i.InstanceLifecycle === 'spot',
    // EC2 announces spot interruptions to the instance (IMDS), not in DescribeInstances: the agent reports it.
    interruptionNotice: null,
  };
}
