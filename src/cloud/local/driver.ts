// The `local` cloud driver (DESIGN §7): an instance is a `berth agent` process on this machine.
//
// create() writes the instance's directory (BERTH_HOME/instances/<id>/: the bootstrap secret in a 0600
// file, the agent's work dir, its log), and starts a detached boot wrapper (own session, so it outlives the
// dispatcher like a real VM) that joins the instance's cgroup slice, sleeps the boot delay and then execs
// the agent. The slice (berth-local/<id>) holds two kinds of groups: `agent` (the wrapper, the agent and
// the shims it starts) and `containers/<container id>` (the agent's cgroup parent): cgroup v2 allows
// processes only in leaves of a tree whose controllers are delegated, so the slice itself holds none. The list lives in BERTH_HOME/instances.json (see instance-list.ts); an instance whose process
// died is listed as terminated. destroy() stops the agent (SIGTERM, then SIGKILL after a grace), kills every
// container it left (through the runtimes' re-attach, and every process left in its slice), removes its
// cgroups and its directory.
import { existsSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { cgroupsUnusable } from '../../agent/runtimes/cgroup.js';
import { RUNTIME_NAMES, type RuntimeName } from '../../agent/runtimes/detect.js';
import { isAlive, type ProcessRef } from '../../agent/runtimes/procfs.js';
import type { InstanceType } from '../../model/types.js';
import { bootDataOf } from '../boot-data.js';
import { matchesTags, type CloudInstance, type Driver, type Tags } from '../driver.js';
import { CloudApiError, NotFoundError } from '../errors.js';
import { InstanceList, type LocalInstanceRecord } from './instance-list.js';
import {
  createMachineSlots,
  killQuietly,
  slicePaths,
  startMachineProcess,
  stopMachine,
  type MachineSlots,
} from './machine.js';
import { apiUrlFor, netnsUnusable, removeNetns } from './netns.js';

export interface LocalDriverOptions {
  /** BERTH_HOME: instances live in home/instances/<id>/, the list in home/instances.json. */
  home: string;
  /** Time between create() and the agent's start (default 0). */
  bootDelayMs?: number;
  /** Runtime for the agents (default auto). */
  runtime?: 'auto' | RuntimeName;
  /** Extra `berth agent` flags, e.g. ['--ping-wait', '2s', '--kill-grace', '5s']. */
  agentArgs?: string[];
  /** Grace between SIGTERM and SIGKILL when an instance is destroyed (default 5 s). */
  stopGraceMs?: number;
  /** Give each instance a cgroup slice sized to its type (default: when cgroups are writable, i.e. root). */
  cgroups?: boolean;
  /** The berth executable (default: this package's bin/berth.js) and the node binary to run it with. */
  berthBin?: string;
  nodeBin?: string;
  /** Environment for the agents (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /**
   * Run each agent in its own network namespace, linked to the host by a veth pair on a private /30
   * (see netns.ts; root only). The agent reaches the API at the host end's address, so the API must
   * listen there (e.g. on 0.0.0.0). Default false.
   */
  netns?: boolean;
}

/** Parent of the instance slices (below the cgroup root, or in every v1 hierarchy). */
export const LOCAL_CGROUP_PARENT = 'berth-local';

/** This package's bin/berth.js, found from this module's location (src/ or dist/src/). */
export function defaultBerthBin(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = join(dir, 'bin', 'berth.js');
    if (existsSync(candidate)) return candidate;
    dir = dirname(dir);
  }
  throw new Error('cannot find bin/berth.js above ' + fileURLToPath(import.meta.url));
}

const sh = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

export class LocalDriver implements Driver {
  readonly home: string;
  readonly list_: InstanceList;
  private readonly o: LocalDriverOptions;
  private cgroupsUsable: Promise<boolean>;

  constructor(opts: LocalDriverOptions) {
    this.o = opts;
    this.home = resolve(opts.home);
    this.list_ = new InstanceList(this.home);
    this.cgroupsUsable =
      opts.cgroups === false
        ? Promise.resolve(false)
        : cgroupsUnusable().then((why) => {
            if (why && opts.cgroups === true) throw new Error(`local driver: cgroups requested but ${why}`);
            return why === null;
          });
  }

  /** Why instances get no cgroup slice here, or null when they do. */
  async limitsNote(): Promise<string | null> {
    if (await this.cgroupsUsable) return null;
    return this.o.cgroups === false
      ? 'cgroups disabled by configuration: instances run without CPU and memory limits'
      : `${(await cgroupsUnusable()) ?? 'cgroups unusable'}: instances run without CPU and memory limits`;
  }

  instanceDir(id: string): string {
    return join(this.home, 'instances', id);
  }

  async create(type: InstanceType, tags: Tags, bootData: string): Promise<CloudInstance> {
    const boot = bootDataOf(bootData);
    const runtime = this.o.runtime ?? 'auto';
    if (runtime !== 'auto' && !RUNTIME_NAMES.includes(runtime))
      throw new CloudApiError(`runtime: expected auto or ${RUNTIME_NAMES.join(', ')}, got ${runtime}`, false);
    const id = `local-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
    const dir = this.instanceDir(id);
    await mkdir(join(dir, 'work'), { recursive: true, mode: 0o700 });
    const secretFile = join(dir, 'bootstrap-secret');
    await writeFile(secretFile, boot.bootstrap_secret, { mode: 0o600 });

    if (this.o.netns) {
      const why = await netnsUnusable();
      if (why) {
        await rm(dir, { recursive: true, force: true });
        throw new CloudApiError(`local driver: netns requested but ${why}`, false);
      }
    }
    let slots: MachineSlots;
    try {
      slots = await createMachineSlots(
        id,
        { vcpus: type.vcpus, ram: type.ram },
        {
          cgroupPath: (await this.cgroupsUsable) ? `${LOCAL_CGROUP_PARENT}/${id}` : null,
          netns: this.o.netns ?? false,
        },
      );
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw new CloudApiError(
        `cannot create the instance's cgroup or network namespace: ${(err as Error).message}`,
      );
    }
    const { cgroup, netns } = slots;
    const now = new Date();
    const bootDelayMs = this.o.bootDelayMs ?? 0;
    const args = [
      this.o.berthBin ?? defaultBerthBin(),
      'agent',
      '--api-url',
      netns ? apiUrlFor(netns, boot.api_url) : boot.api_url,
      '--node-id',
      boot.node_id,
      '--bootstrap-secret-file',
      secretFile,
      '--work-dir',
      join(dir, 'work'),
      '--runtime',
      runtime,
      ...(this.o.agentArgs ?? []),
    ];
    const script = [
      `sleep ${(bootDelayMs / 1000).toFixed(3)}`,
      // Like an init system on a VM: an agent that dies (killed, crashed) is started again and re-attaches
      // to its containers from its journal. It stays down when it exits on purpose: 0 (stopped), 2 (bad
      // flags), 3 (node failed or token revoked).
      // A destroy (SIGTERM to the group) ends the wrapper too, so it never starts the agent again.
      "trap 'exit 143' TERM",
      `while :; do ${[this.o.nodeBin ?? process.execPath, ...args].map(sh).join(' ')}; rc=$?; case $rc in 0|2|3) exit $rc;; esac; sleep 1; done`,
    ].join('; ');
    let ref: ProcessRef;
    try {
      ref = await startMachineProcess(slots, {
        script,
        logFile: join(dir, 'agent.log'),
        env: {
          ...(this.o.env ?? process.env),
          // The agent's cgroup_parent: its containers' groups nest in the instance's slice.
          ...(cgroup ? { BERTH_CGROUP_PARENT: slicePaths(cgroup.path).containers } : {}),
          // The pressure watcher's capacity: the instance's memory and vcpus (the containers' group has no
          // limit of its own).
          ...(cgroup
            ? { BERTH_INSTANCE_RAM: String(type.ram), BERTH_INSTANCE_VCPUS: String(type.vcpus) }
            : {}),
        },
        cwd: dir,
      });
    } catch (err) {
      await slots.agentGroup?.remove().catch(() => {});
      await cgroup?.remove().catch(() => {});
      if (netns) await removeNetns(netns);
      await rm(dir, { recursive: true, force: true });
      throw new CloudApiError(`cannot start the instance's agent: ${(err as Error).message}`);
    }
    const rec: LocalInstanceRecord = {
      id,
      providerType: type.providerType ?? type.name,
      typeName: type.name,
      vcpus: type.vcpus,
      ram: type.ram,
      preemptible: type.preemptible,
      tags: { ...tags },
      process: ref,
      createdAt: now.toISOString(),
      bootAt: new Date(now.getTime() + bootDelayMs).toISOString(),
      state: 'running',
      terminatedAt: null,
      interruptionNotice: null,
      dir,
      cgroup: cgroup?.path ?? null,
      ...(netns ? { netns } : {}),
    };
    await this.list_.update((list) => void list.push(rec));
    return toCloud(rec, 'pending');
  }

  async list(tagFilter: Tags): Promise<CloudInstance[]> {
    const recs = await this.list_.read();
    const out: CloudInstance[] = [];
    const died: string[] = [];
    for (const r of recs) {
      if (!matchesTags(r.tags, tagFilter)) continue;
      let state: CloudInstance['state'] = 'terminated';
      if (r.state === 'running') {
        if (r.process && (await isAlive(r.process)))
          state = Date.now() < Date.parse(r.bootAt) ? 'pending' : 'running';
        else died.push(r.id);
      }
      out.push(toCloud(r, state));
    }
    // A real cloud's terminated machine has nothing left running: neither has ours.
    for (const id of died) {
      const rec = recs.find((r) => r.id === id)!;
      await this.teardown(rec).catch(() => {});
    }
    if (died.length > 0)
      await this.list_.update((list) => {
        for (const r of list)
          if (died.includes(r.id) && r.state === 'running') {
            r.state = 'terminated';
            r.terminatedAt = new Date().toISOString();
          }
      });
    return out;
  }

  async setTags(id: string, tags: Tags): Promise<void> {
    await this.list_.update((list) => {
      const r = list.find((x) => x.id === id);
      if (!r) throw new NotFoundError(id);
      Object.assign(r.tags, tags);
    });
  }

  async destroy(id: string): Promise<void> {
    const rec = (await this.list_.read()).find((r) => r.id === id);
    if (!rec) throw new NotFoundError(id);
    await this.teardown(rec);
    await this.list_.update((list) => {
      const r = list.find((x) => x.id === id);
      if (r && r.state !== 'terminated') {
        r.state = 'terminated';
        r.terminatedAt = new Date().toISOString();
      }
    });
  }

  /**
   * A spot interruption: the instance is marked with an interruption notice (list() shows it) and is
   * killed — agent and containers, without a graceful stop — after `noticeMs`.
   */
  async interrupt(id: string, noticeMs = 0): Promise<void> {
    const at = new Date();
    await this.list_.update((list) => {
      const r = list.find((x) => x.id === id);
      if (!r) throw new NotFoundError(id);
      r.interruptionNotice = at.toISOString();
    });
    if (noticeMs > 0) await new Promise((r) => setTimeout(r, noticeMs));
    const rec = (await this.list_.read()).find((r) => r.id === id);
    if (!rec || rec.state === 'terminated') return;
    if (rec.process && (await isAlive(rec.process))) killQuietly(-rec.process.pid, 'SIGKILL');
    await this.destroy(id);
  }

  /** Stops the agent, kills its containers, removes its cgroups and directory. Idempotent. */
  private async teardown(rec: LocalInstanceRecord): Promise<void> {
    await stopMachine(rec, {
      containersDir: join(rec.dir, 'work', 'containers'),
      graceMs: this.o.stopGraceMs ?? 5000,
    });
  }
}

function toCloud(r: LocalInstanceRecord, state: CloudInstance['state']): CloudInstance {
  return {
    id: r.id,
    providerType: r.providerType,
    tags: { ...r.tags },
    state,
    createdAt: new Date(r.createdAt),
    preemptible: r.preemptible,
    interruptionNotice: r.interruptionNotice ? new Date(r.interruptionNotice) : null,
  };
}
