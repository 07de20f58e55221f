// An EC2 that runs on this machine: moto_server (the EC2 API), our fault-injecting proxy in front of it
// (proxy.ts) and the booter that runs every new instance's UserData for real (booter.ts). Point the AWS SDK
// (or Berth's ec2 driver) at `endpoint` with `credentials` and `region`. stop() terminates every instance,
// stops every booted machine, the proxy and moto, and removes the host address: nothing is left.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DescribeSubnetsCommand,
  EC2Client,
  RegisterImageCommand,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { cgroupsUnusable } from '../../agent/runtimes/cgroup.js';
import { parseDuration } from '../../model/units.js';
import { createHostAddress, netnsUnusable, removeHostAddress, type HostAddress } from '../local/netns.js';
import { Booter, type BootedMachine } from './booter.js';
import { FaultConfigError } from './faults.js';
import { startMoto, type MotoServer } from './moto.js';
import { Ec2Proxy, INTERNAL_HEADER } from './proxy.js';
import { liveInstances } from './util.js';

// The pinned SDK supports Node 20; its warning is about SDK versions published later.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

export interface EmulatorOptions {
  /** Directory for the booted machines (default: a new temp dir, removed at stop). */
  home?: string;
  /** Boot instances' UserData (default true). */
  boot?: boolean;
  /** Machines in their own network namespaces: true, false, or "auto" (when root; the default). */
  netns?: boolean | 'auto';
  /** Machines in cgroup slices: true, false or "auto" (when cgroup v1 is writable; the default). */
  cgroups?: boolean | 'auto';
  /** The fault document (faults.ts). */
  faults?: unknown;
  pollMs?: number;
  /** Environment of the booted boot scripts. */
  env?: NodeJS.ProcessEnv;
  log?: (line: string) => void;
}

export const EMULATOR_REGION = 'us-east-1';
export const EMULATOR_CREDENTIALS = { accessKeyId: 'berth-emulator', secretAccessKey: 'berth-emulator' };

export class Ec2Emulator {
  private ami: string | null = null;

  private constructor(
    readonly moto: MotoServer,
    readonly proxy: Ec2Proxy,
    readonly booter: Booter | null,
    /** Client of moto itself: no faults, no latency. */
    readonly direct: EC2Client,
    /** Client through the proxy that skips its faults (the booter's). */
    readonly internal: EC2Client,
    private readonly hostAddress: HostAddress | null,
    private readonly home: string,
    private readonly ownHome: boolean,
  ) {}

  /** The EC2 API URL to give the SDK. */
  get endpoint(): string {
    return this.proxy.url;
  }

  /**
   * The address booted machines reach this host at (their API URL must use it), or null when they share
   * the host's network (then 127.0.0.1 works).
   */
  get hostAddr(): string | null {
    return this.hostAddress?.addr ?? null;
  }

  static async start(o: EmulatorOptions = {}): Promise<Ec2Emulator> {
    const log = o.log ?? (() => {});
    const boot = o.boot ?? true;
    const netns =
      boot && (o.netns === true || ((o.netns ?? 'auto') === 'auto' && (await netnsUnusable()) === null));
    const cgroups =
      boot &&
      (o.cgroups === true || ((o.cgroups ?? 'auto') === 'auto' && (await cgroupsUnusable()) === null));
    const home = o.home ?? (await mkdtemp(join(tmpdir(), 'berth-ec2emu-')));
    const moto = await startMoto({ log });
    const client = (endpoint: string) =>
      new EC2Client({ endpoint, region: EMULATOR_REGION, credentials: EMULATOR_CREDENTIALS });
    const direct = client(moto.url);
    let proxy: Ec2Proxy | null = null;
    let hostAddress: HostAddress | null = null;
    let booter: Booter | null = null;
    try {
      let self: Ec2Emulator | null = null;
      proxy = new Ec2Proxy({
        motoUrl: moto.url,
        moto: direct,
        routes: {
          'POST /_emu/interrupt': async (body) => self!.interruptFromApi(body),
          'GET /_emu/instances': async () => ({
            instances: (self!.booter?.list() ?? []).map(describeMachine),
          }),
        },
      });
      if (o.faults !== undefined) proxy.setFaults(o.faults);
      if (netns)
        hostAddress = await createHostAddress(`emu${process.pid.toString(36)}${Date.now().toString(36)}`);
      await proxy.start(hostAddress?.addr ?? '127.0.0.1');
      const internal = client(proxy.url);
      internal.middlewareStack.add(
        (next) => async (args) => {
          (args.request as { headers: Record<string, string> }).headers[INTERNAL_HEADER] = '1';
          return next(args);
        },
        { step: 'build', name: 'berthEmulatorInternal' },
      );
      if (boot)
        booter = new Booter({
          ec2: internal,
          home,
          netns,
          cgroups,
          hostAddr: hostAddress?.addr ?? null,
          pollMs: o.pollMs,
          env: o.env,
          log,
        });
      self = new Ec2Emulator(moto, proxy, booter, direct, internal, hostAddress, home, o.home === undefined);
      booter?.start();
      log(
        `EC2 emulator at ${proxy.url} (moto ${moto.url}; machines ${boot ? `booted in ${home}${netns ? ', own netns' : ''}${cgroups ? ', own cgroup' : ''}` : 'not booted'})`,
      );
      return self;
    } catch (err) {
      await proxy?.stop().catch(() => {});
      if (hostAddress) await removeHostAddress(hostAddress);
      await moto.stop();
      direct.destroy();
      throw err;
    }
  }

  /** Subnets of moto's default VPC and an AMI registered for Berth: enough for an ec2 driver config. */
  async defaults(): Promise<{ subnets: string[]; ami: string }> {
    const subnets = await this.direct.send(new DescribeSubnetsCommand({}));
    // Registering one is much faster than listing moto's 1,177 built-in images.
    this.ami ??= (
      await this.direct.send(
        new RegisterImageCommand({
          Name: 'berth-emulated',
          Description: 'The host itself: emulated instances boot their user data here',
          Architecture: 'x86_64',
          RootDeviceName: '/dev/xvda',
          VirtualizationType: 'hvm',
        }),
      )
    ).ImageId!;
    const ami = this.ami;
    return {
      subnets: (subnets.Subnets ?? [])
        .sort((a, b) => (a.AvailabilityZone ?? '').localeCompare(b.AvailabilityZone ?? ''))
        .map((s) => s.SubnetId!),
      ami,
    };
  }

  /** Replaces the fault document. */
  setFaults(doc: unknown): void {
    this.proxy.setFaults(doc);
  }

  /** Ids of the instances EC2 lists as pending or running. */
  async liveInstances(): Promise<string[]> {
    return (await liveInstances(this.direct)).map((i) => i.InstanceId!);
  }

  /** A spot interruption notice for an instance (terminated `noticeMs` later), or a rebalance recommendation. */
  interrupt(id: string, kind: 'terminate' | 'rebalance' = 'terminate', noticeMs = 120_000): void {
    if (!this.booter) throw new Error('the emulator boots no machines: nothing to interrupt');
    this.booter.interrupt(id, kind, noticeMs);
  }

  private interruptFromApi(body: unknown): unknown {
    const b = (body ?? {}) as { instance_id?: unknown; kind?: unknown; notice?: unknown };
    if (typeof b.instance_id !== 'string') throw new FaultConfigError('instance_id: expected an instance id');
    const kind = b.kind ?? 'terminate';
    if (kind !== 'terminate' && kind !== 'rebalance')
      throw new FaultConfigError(`kind: expected "terminate" or "rebalance", got ${JSON.stringify(kind)}`);
    let noticeMs: number;
    try {
      noticeMs = parseDuration(b.notice ?? '2m');
    } catch (err) {
      throw new FaultConfigError(`notice: ${(err as Error).message}`);
    }
    try {
      this.interrupt(b.instance_id, kind, noticeMs);
    } catch (err) {
      throw new FaultConfigError((err as Error).message);
    }
    return { instance_id: b.instance_id, kind, notice_ms: noticeMs };
  }

  /** Terminates every instance, stops every machine, the proxy and moto. */
  async stop(): Promise<void> {
    const live = await this.liveInstances().catch(() => [] as string[]);
    if (live.length > 0)
      await this.direct.send(new TerminateInstancesCommand({ InstanceIds: live })).catch(() => {});
    await this.booter?.stop();
    await this.proxy.stop();
    await this.moto.stop();
    this.direct.destroy();
    this.internal.destroy();
    if (this.hostAddress) await removeHostAddress(this.hostAddress);
    if (this.ownHome) await rm(this.home, { recursive: true, force: true });
  }
}

function describeMachine(m: BootedMachine) {
  return {
    instance_id: m.id,
    instance_type: m.instanceType,
    dir: m.dir,
    pid: m.process?.pid ?? null,
    netns: m.slots.netns?.name ?? null,
    cgroup: m.slots.cgroup?.path ?? null,
    imds_url: m.imds.url,
    note: m.note,
  };
}
