// The emulated EC2's machines: moto only records instances, so the booter watches them (DescribeInstances)
// and boots each new one's UserData for real, the way cloud-init runs a `#!` script at first boot: as a
// detached process tree in a cgroup slice sized to the instance type and its own network namespace (both
// by default when root; see ../local/machine.ts), with an IMDSv2 endpoint of its own (imds.ts). An instance
// that leaves the list (terminated) has its machine stopped: every process, container, slice, namespace.
//
// Two environment variables tell the script where it is (user-data.ts): BERTH_IMDS_URL (its metadata
// service) and BERTH_WORK_DIR (a directory per instance, since the machines share this host's file system);
// BERTH_AGENT_FOREGROUND=1 keeps the agent in the machine's process tree.
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  DescribeInstanceAttributeCommand,
  DescribeInstanceTypesCommand,
  TerminateInstancesCommand,
  type EC2Client,
  type Instance,
} from '@aws-sdk/client-ec2';
import type { ProcessRef } from '../../agent/runtimes/procfs.js';
import {
  createMachineSlots,
  slicePaths,
  startMachineProcess,
  stopMachine,
  type MachineSlots,
} from '../local/machine.js';
import { EmulatedImds } from './imds.js';
import { liveInstances } from './util.js';

export interface BooterOptions {
  /** A client of the emulated EC2 whose calls skip the proxy's faults (emulator.ts). */
  ec2: EC2Client;
  /** Machines live in home/<instance-id>/ (user data, work dir, console log). */
  home: string;
  /** Give every machine its own network namespace (root). */
  netns: boolean;
  /** Give every machine a cgroup slice sized to its type (root, cgroup v1). */
  cgroups: boolean;
  /** The host address namespaces reach (the API and the IMDS endpoints listen there); null without netns. */
  hostAddr: string | null;
  pollMs?: number;
  /** Environment of the boot scripts (default: this process's PATH, HOME and locale). */
  env?: NodeJS.ProcessEnv;
  stopGraceMs?: number;
  log?: (line: string) => void;
}

/** One booted machine. */
export interface BootedMachine {
  id: string;
  instanceType: string;
  dir: string;
  /** The boot script's process (null: nothing to run: the user data was empty or not a script). */
  process: ProcessRef | null;
  slots: MachineSlots;
  imds: EmulatedImds;
  /** Why nothing runs, when process is null. */
  note: string | null;
}

/** The cgroup v1 parent of the machines' slices. */
export const EMU_CGROUP_PARENT = 'berth-ec2emu';

export class Booter {
  private readonly machines = new Map<string, BootedMachine>();
  /** Instances being booted or stopped (a poll never handles one twice at once). */
  private readonly busy = new Map<string, Promise<void>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private loop: Promise<void> | null = null;
  private stopped = false;
  private wake: (() => void) | null = null;
  private readonly typeSize = new Map<string, { vcpus: number; ram: number }>();
  private readonly log: (line: string) => void;

  constructor(private readonly o: BooterOptions) {
    this.log = o.log ?? (() => {});
  }

  /** Starts watching (a poll every pollMs, default 250 ms). */
  start(): void {
    this.loop ??= (async () => {
      while (!this.stopped) {
        await this.poll().catch((err: Error) => this.log(`booter: poll failed: ${err.message}`));
        await new Promise<void>((r) => {
          const t = setTimeout(r, this.o.pollMs ?? 250);
          this.wake = () => {
            clearTimeout(t);
            r();
          };
        });
      }
    })();
  }

  /** The machines booted now. */
  list(): BootedMachine[] {
    return [...this.machines.values()];
  }

  get(id: string): BootedMachine | undefined {
    return this.machines.get(id);
  }

  /** One reconciliation: boot new instances, stop the machines of instances that are gone. */
  async poll(): Promise<void> {
    const live = new Map((await liveInstances(this.o.ec2)).map((i) => [i.InstanceId!, i]));
    const work: Promise<void>[] = [];
    for (const [id, inst] of live)
      if (!this.machines.has(id) && !this.busy.has(id)) work.push(this.track(id, () => this.boot(inst)));
    for (const id of this.machines.keys())
      if (!live.has(id) && !this.busy.has(id)) work.push(this.track(id, () => this.halt(id)));
    await Promise.all(work);
  }

  private track(id: string, fn: () => Promise<void>): Promise<void> {
    const p = fn()
      .catch((err: Error) => this.log(`booter: ${id}: ${err.message}`))
      .finally(() => this.busy.delete(id));
    this.busy.set(id, p);
    return p;
  }

  private async sizeOf(type: string): Promise<{ vcpus: number; ram: number }> {
    let s = this.typeSize.get(type);
    if (!s) {
      const r = await this.o.ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: [type as never] }));
      const t = r.InstanceTypes?.[0];
      s = { vcpus: t?.VCpuInfo?.DefaultVCpus ?? 1, ram: (t?.MemoryInfo?.SizeInMiB ?? 1024) * 1024 * 1024 };
      this.typeSize.set(type, s);
    }
    return s;
  }

  private async boot(inst: Instance): Promise<void> {
    const id = inst.InstanceId!;
    const attr = await this.o.ec2.send(
      new DescribeInstanceAttributeCommand({ InstanceId: id, Attribute: 'userData' }),
    );
    const userData = Buffer.from(attr.UserData?.Value ?? '', 'base64').toString('utf8');
    const dir = join(this.o.home, id);
    const workDir = join(dir, 'work');
    await mkdir(workDir, { recursive: true, mode: 0o700 });
    const script = join(dir, 'user-data');
    await writeFile(script, userData, { mode: 0o700 });
    await chmod(script, 0o700);
    const type = inst.InstanceType ?? 'm1.small';
    const slots = await createMachineSlots(id, await this.sizeOf(type), {
      cgroupPath: this.o.cgroups ? `${EMU_CGROUP_PARENT}/${id}` : null,
      netns: this.o.netns,
      routes: this.o.hostAddr ? [this.o.hostAddr] : [],
    });
    const imds = new EmulatedImds({
      instanceId: id,
      instanceType: type,
      availabilityZone: inst.Placement?.AvailabilityZone ?? 'us-east-1a',
      lifecycle: inst.InstanceLifecycle === 'spot' ? 'spot' : 'on-demand',
      userData,
    });
    const m: BootedMachine = { id, instanceType: type, dir, process: null, slots, imds, note: null };
    this.machines.set(id, m);
    await imds.start(this.o.netns && this.o.hostAddr ? this.o.hostAddr : '127.0.0.1');
    // cloud-init runs user data that starts with #! as a program; other formats (#cloud-config…) are not
    // emulated: the machine then runs nothing, as one whose boot failed.
    if (!userData.startsWith('#!')) {
      m.note = userData === '' ? 'no user data' : 'user data is not a #! script (only those are emulated)';
      this.log(`booter: ${id}: ${m.note}`);
      return;
    }
    const base = this.o.env ?? {
      PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
      HOME: process.env.HOME ?? '/root',
      LANG: process.env.LANG ?? 'C.UTF-8',
    };
    m.process = await startMachineProcess(slots, {
      script: `exec ${script}`,
      logFile: join(dir, 'console.log'),
      env: {
        ...base,
        BERTH_IMDS_URL: imds.url,
        BERTH_WORK_DIR: workDir,
        BERTH_AGENT_FOREGROUND: '1',
        // Containers' groups nest in the machine's slice, as on a VM whose whole cgroup tree is its own.
        ...(slots.cgroup ? { BERTH_CGROUP_PARENT: slicePaths(slots.cgroup.path).containers } : {}),
      },
      cwd: dir,
    });
    this.log(`booter: ${id} (${type}) booted${slots.netns ? ` in ${slots.netns.name}` : ''}`);
  }

  private async halt(id: string): Promise<void> {
    const m = this.machines.get(id);
    if (!m) return;
    await stopMachine(
      { process: m.process, cgroup: m.slots.cgroup?.path ?? null, netns: m.slots.netns, dir: m.dir },
      { containersDir: join(m.dir, 'work', 'containers'), graceMs: this.o.stopGraceMs ?? 5000 },
    );
    await m.imds.stop();
    this.machines.delete(id);
    this.log(`booter: ${id} stopped`);
  }

  /**
   * A spot interruption: the instance's IMDS announces it (spot/instance-action) at once, and EC2
   * terminates it `noticeMs` later (on AWS: two minutes). "rebalance" only recommends a rebalance.
   */
  interrupt(id: string, kind: 'terminate' | 'rebalance', noticeMs: number): void {
    const m = this.machines.get(id);
    if (!m) throw new Error(`instance ${id} is not booted`);
    const now = Date.now();
    if (kind === 'rebalance') {
      m.imds.recommendRebalance(new Date(now));
      return;
    }
    m.imds.announceInterruption(new Date(now + noticeMs));
    const t = setTimeout(() => {
      this.timers.delete(t);
      void this.o.ec2
        .send(new TerminateInstancesCommand({ InstanceIds: [id] }))
        .then(() => this.wake?.())
        .catch((err: Error) => this.log(`booter: terminating ${id} after its interruption: ${err.message}`));
    }, noticeMs);
    this.timers.add(t);
  }

  /** Stops watching and stops every machine (the instances stay in EC2's list). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.wake?.();
    await this.loop;
    await Promise.all(this.busy.values());
    await Promise.all([...this.machines.keys()].map((id) => this.halt(id).catch(() => {})));
  }
}
