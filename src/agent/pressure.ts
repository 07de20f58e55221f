// The agent's way out for opportunistic containers (issue 16, DESIGN §8): a watcher samples the instance's
// memory use (the containers' parent cgroup: memory.current on v2, memory.usage_in_bytes on v1, less the
// inactive file cache the kernel drops first) and, where
// the kernel has it, pressure stall information (PSI), at a short interval. When the guaranteed
// containers grow into the part the opportunistic ones borrowed (free memory under the headroom, or a PSI
// average over its threshold, or, where the kernel has no PSI, the containers' CPU use near the instance's
// vcpus), it freezes every opportunistic container at once (the runtime's freeze: the cgroup freezer, or
// the engine's pause), so they allocate nothing more and take no CPU. It then ends only the fewest that
// cover what must be freed (chooseVictims: the memory to get back above headroom + margin, or the CPU
// above the threshold) and thaws the rest: an ended one is stopped (asked for its checkpoint first) and
// handed back as a temp failure that spends no retry (model/retry.ts, `reclaimed`). The guaranteed
// containers never wait for the scheduler: the freeze needs nothing but this instance.
//
// The decisions are pure (decidePressure, chooseVictims); the watcher only samples, on an injected clock
// and timer.
import { readFile } from 'node:fs/promises';
import { availableParallelism, totalmem } from 'node:os';
import { sleepUnless } from '../model/clock.js';
import { CGROUP_ROOT, cgroupAt, probeCgroups, type Cgroup, type CgroupHost } from './runtimes/cgroup.js';
import type { CgroupStats } from './runtimes/cgroup-common.js';

/** One sample of the instance. */
export interface PressureSample {
  /** Memory the containers use now (their parent group's usage, less the file cache it can drop). */
  ramBytes: number;
  /** The memory they may use together as the sample found it (the group's limit, else the host's). */
  limitBytes: number;
  /** PSI "some avg10" of memory and CPU (percent), when read; absent where the kernel has no PSI. */
  psi?: { memory?: number; cpu?: number };
  /** The containers' CPU time so far (seconds) and when it was read (ms): CPU use is the rate between two. */
  cpu?: { seconds: number; at: number };
  /**
   * The tightest memory limit that holds more than the containers (an ancestor group with a limit, such as
   * an instance's slice that holds the agent too, or the host itself): its name, its limit and what all it
   * holds use (less the file cache it can drop). Absent: none was read.
   */
  enclosing?: { name: string; ramBytes: number; limitBytes: number };
}

/** The instance's memory and when it counts as under pressure. */
export interface PressureLimits {
  /** The memory the containers may use together; null: the sample's limitBytes. */
  capacityBytes: number | null;
  /** Pressure once free memory (capacity - use) is under this many bytes. */
  headroomBytes: number;
  /** Pressure once a PSI "some avg10" (percent) reaches this; null: PSI is not a signal. */
  psiPercent: number | null;
  /** Memory freed on top of the headroom, so that one reclaim is not followed by another at once. */
  marginBytes?: number;
  /**
   * CPU without PSI: pressure once the containers use this percentage of `vcpus` between two samples;
   * null/absent: CPU use is not a signal.
   */
  cpuPercent?: number | null;
  vcpus?: number;
}

/** Why the instance is under pressure, and how much must be freed: bytes, vcpus, or everything (PSI). */
export interface Pressure {
  why: string;
  resource: 'memory' | 'cpu';
  /** How much of `resource` must be freed (Infinity: PSI says there is pressure, not how much). */
  need: number;
}

/** Whether the instance is under pressure (`prev`: the sample before, for the CPU rate), or null. */
export function decidePressure(s: PressureSample, l: PressureLimits, prev?: PressureSample): Pressure | null {
  const capacity = l.capacityBytes ?? s.limitBytes;
  const free = capacity - s.ramBytes;
  const e = s.enclosing;
  // The agent, the system and anything else beside the containers use what the enclosing limit holds too.
  const enclosingFree = e ? e.limitBytes - e.ramBytes : Infinity;
  if (Math.min(free, enclosingFree) < l.headroomBytes)
    return {
      why:
        enclosingFree < free
          ? `memory pressure: ${mib(e!.ramBytes)} of ${mib(e!.limitBytes)} in use in ${e!.name} (the containers ${mib(s.ramBytes)}), under ${mib(l.headroomBytes)} free`
          : `memory pressure: ${mib(s.ramBytes)} of ${mib(capacity)} in use, under ${mib(l.headroomBytes)} free`,
      resource: 'memory',
      need: l.headroomBytes + (l.marginBytes ?? 0) - Math.min(free, enclosingFree),
    };
  if (l.psiPercent !== null)
    for (const what of ['memory', 'cpu'] as const) {
      const v = s.psi?.[what];
      if (v !== undefined && v >= l.psiPercent)
        return {
          why: `${what} pressure: PSI some avg10 ${v.toFixed(1)}% >= ${l.psiPercent}%`,
          resource: what,
          need: Infinity,
        };
    }
  const cpu = cpuRate(prev, s);
  if (l.cpuPercent != null && l.vcpus && cpu !== null) {
    const limit = (l.vcpus * l.cpuPercent) / 100;
    if (cpu >= limit)
      return {
        why: `cpu pressure: ${cpu.toFixed(2)} of ${l.vcpus} vcpus in use, over ${l.cpuPercent}%`,
        resource: 'cpu',
        // Back under the threshold by a twentieth of the instance, as the memory margin does for memory.
        need: cpu - limit + l.vcpus / 20,
      };
  }
  return null;
}

/** vcpus used between two samples (their CPU time over the wall time between them), or null. */
function cpuRate(prev: PressureSample | undefined, s: PressureSample): number | null {
  if (!prev?.cpu || !s.cpu || s.cpu.at <= prev.cpu.at) return null;
  return Math.max(0, s.cpu.seconds - prev.cpu.seconds) / ((s.cpu.at - prev.cpu.at) / 1000);
}

/** An opportunistic container as chooseVictims weighs it. */
export interface VictimCandidate {
  id: string;
  /** What ending it frees of the resource under pressure (bytes, or vcpus). */
  size: number;
  /** When it started (ms): among equals, the most recent is ended first (it lost the least work). */
  startedAt: number;
}

/**
 * The rule of which opportunistic containers to end (the rest are thawed): the fewest that free `need`,
 * taking the largest first, except that the last one taken is the smallest that still covers what is left
 * (so no more is ended than needed); equal sizes: the most recently started first. When all of them do not
 * cover `need` (or it is Infinity), all are ended; when nothing is needed, none.
 */
export function chooseVictims(need: number, candidates: readonly VictimCandidate[]): string[] {
  if (!(need > 0)) return [];
  const order = [...candidates].sort((a, b) => b.size - a.size || b.startedAt - a.startedAt);
  const chosen: string[] = [];
  let left = need;
  while (left > 0 && order.length > 0) {
    // The smallest that covers what is left, else the largest (and go on).
    let pick = 0;
    for (let i = order.length - 1; i >= 0; i--)
      if (order[i]!.size >= left) {
        pick = i;
        break;
      }
    // Among equal sizes, the first in order: the most recently started.
    while (pick > 0 && order[pick - 1]!.size === order[pick]!.size) pick--;
    const [c] = order.splice(pick, 1);
    chosen.push(c!.id);
    left -= c!.size;
  }
  return chosen;
}

const mib = (b: number) => `${Math.round(b / 1048576)}MiB`;

/** A running container the watcher may reclaim. */
export interface Reclaimable {
  readonly id: string;
  /** When it started (ms since the epoch). */
  readonly startedAt: number;
  /** Freezes it at once; resolves once frozen. */
  freeze(): Promise<void>;
  /** Lets it run on (it was not chosen to end); a container paused by its user stays frozen. */
  thaw(): Promise<void>;
  /** Its memory use now (bytes) and its CPU use since it started (vcpus). */
  usage(): Promise<{ ramBytes: number; vcpus: number }>;
  /** Stops the frozen container and hands it back (reclaimed); resolves once that is under way. */
  reclaim(why: string): Promise<void>;
}

/** What the watcher reports of each reclaim (the bench and the agent's log read it). */
export interface ReclaimEvent {
  why: string;
  /** The containers ended (reclaimed). */
  ids: string[];
  /** The containers frozen with them, then thawed: ending the others was enough. */
  thawed: string[];
  /** When the sample that showed the pressure was read (the signal), on the watcher's clock. */
  signalAt: number;
  /** When every opportunistic container was frozen. */
  frozenAt: number;
}

export interface PressureWatcherOptions {
  limits: PressureLimits;
  /** Reads one sample of the instance. */
  sample: () => Promise<PressureSample>;
  /** The opportunistic containers running now that are not being reclaimed yet. */
  opportunistic: () => Reclaimable[];
  intervalMs: number;
  /** Milliseconds on the watcher's clock (injected in tests). */
  now?: () => number;
  /** Waits `ms` or until `signal` aborts (injected in tests). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  onReclaim?: (e: ReclaimEvent) => void;
  onError?: (err: unknown) => void;
}

export class PressureWatcher {
  /** The containers reclaimed and still listed (being stopped), with what ending each frees. */
  private readonly reclaimed = new Map<string, { resource: Pressure['resource']; size: number }>();
  private readonly now: () => number;
  /** The sample before, for the CPU rate. */
  private prev: PressureSample | undefined;

  constructor(private readonly opts: PressureWatcherOptions) {
    this.now = opts.now ?? (() => performance.now());
  }

  /**
   * One sample and, under pressure, a freeze of every opportunistic container, the end of those
   * chooseVictims picks and the thaw of the others; the event, if any.
   */
  async tick(): Promise<ReclaimEvent | null> {
    const all = this.opts.opportunistic();
    // Forget the reclaimed ones that are gone (their runners reported and were dropped).
    for (const id of this.reclaimed.keys()) if (!all.some((r) => r.id === id)) this.reclaimed.delete(id);
    const live = all.filter((r) => !this.reclaimed.has(r.id));
    if (live.length === 0) {
      this.prev = undefined;
      return null;
    }
    const s = await this.opts.sample();
    const signalAt = this.now();
    const p = decidePressure(s, this.opts.limits, this.prev);
    this.prev = s;
    if (!p) return null;
    // What the containers being stopped will free counts: a pressure they cover needs nothing more.
    let need = p.need;
    for (const r of this.reclaimed.values()) if (r.resource === p.resource) need -= r.size;
    if (!(need > 0)) return null;
    const report = (results: PromiseSettledResult<unknown>[]) => {
      for (const r of results) if (r.status === 'rejected') this.opts.onError?.(r.reason);
    };
    report(await Promise.allSettled(live.map((v) => v.freeze())));
    const frozenAt = this.now();
    const sizes = await Promise.all(
      live.map(async (v): Promise<VictimCandidate> => {
        const u = await v.usage().catch(() => ({ ramBytes: 0, vcpus: 0 }));
        return { id: v.id, size: p.resource === 'memory' ? u.ramBytes : u.vcpus, startedAt: v.startedAt };
      }),
    );
    const chosen = new Set(chooseVictims(need, sizes));
    const ended = live.filter((v) => chosen.has(v.id));
    const thawed = live.filter((v) => !chosen.has(v.id));
    for (const c of sizes)
      if (chosen.has(c.id)) this.reclaimed.set(c.id, { resource: p.resource, size: c.size });
    report(await Promise.allSettled([...ended.map((v) => v.reclaim(p.why)), ...thawed.map((v) => v.thaw())]));
    const e: ReclaimEvent = {
      why: p.why,
      ids: ended.map((v) => v.id),
      thawed: thawed.map((v) => v.id),
      signalAt,
      frozenAt,
    };
    this.opts.onReclaim?.(e);
    return e;
  }

  /** Samples every intervalMs until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const sleep = this.opts.sleep ?? sleepUnless;
    while (!signal.aborted) {
      try {
        await this.tick();
      } catch (err) {
        this.opts.onError?.(err);
      }
      await sleep(this.opts.intervalMs, signal);
    }
  }
}

/** "some avg10=1.23 ..." → 1.23; undefined when the file is absent or unreadable. */
export async function readPsi(file: string): Promise<number | undefined> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const m = /^some avg10=(\d+(?:\.\d+)?)/m.exec(text);
  return m ? Number(m[1]) : undefined;
}

/** A group's memory limit, or null when it has none (v1 reports "no limit" as a huge number). */
function limitOf(st: CgroupStats): number | null {
  return Number.isFinite(st.ramLimit) && st.ramLimit < 2 ** 60 ? st.ramLimit : null;
}

/** What a group uses less the inactive file cache the kernel drops first. */
function workingSet(st: CgroupStats): number {
  return Math.max(0, st.ramBytes - st.inactiveFileBytes);
}

/** A memory limit around the containers' group, read at each sample (null: it has none now). */
export interface Enclosing {
  read(): Promise<PressureSample['enclosing'] | null>;
}

/** The ancestor `group` of the containers' group, when it has a memory limit. */
export function enclosingGroup(group: Cgroup): Enclosing {
  return {
    async read() {
      const st = await group.stats();
      const limitBytes = limitOf(st);
      return limitBytes === null
        ? null
        : { name: `cgroup ${group.path}`, ramBytes: workingSet(st), limitBytes };
    },
  };
}

/** The host's memory (/proc/meminfo): in use is MemTotal less MemAvailable, the kernel's own estimate. */
export function enclosingHost(file = '/proc/meminfo'): Enclosing {
  return {
    async read() {
      const text = await readFile(file, 'utf8').catch(() => '');
      const kb = (key: string) => {
        const m = new RegExp(`^${key}:\\s+(\\d+) kB$`, 'm').exec(text);
        return m ? Number(m[1]) * 1024 : null;
      };
      const total = kb('MemTotal');
      const available = kb('MemAvailable');
      return total === null || available === null
        ? null
        : { name: 'the host', ramBytes: Math.max(0, total - available), limitBytes: total };
    },
  };
}

/**
 * The limits around the containers' group `path`: the host, and every ancestor group with a memory limit
 * now (an instance's slice holds its agent too): whatever else runs there uses the same memory.
 */
export async function enclosingLimits(host: CgroupHost, path: string): Promise<Enclosing[]> {
  const parts = path.split('/').filter((p) => p !== '');
  const out: Enclosing[] = [enclosingHost()];
  for (let i = 1; i < parts.length; i++) {
    const e = enclosingGroup(cgroupAt(host, parts.slice(0, i).join('/')));
    if ((await e.read().catch(() => null)) !== null) out.push(e);
  }
  return out;
}

/**
 * A sampler of the containers' parent group: its memory use, and PSI from the group (v2) or the host
 * (/proc/pressure, which v1 hosts with PSI have); and of the limits around it (`enclosing`: the tightest
 * one's use and limit).
 */
export function cgroupSampler(
  parent: Cgroup,
  root: string,
  psi: boolean,
  enclosing: Enclosing[] = [],
): () => Promise<PressureSample> {
  const psiFile = (what: 'memory' | 'cpu') =>
    parent.version === 2 ? `${root}/${parent.path}/${what}.pressure` : `/proc/pressure/${what}`;
  return async () => {
    const [st, ...around] = await Promise.all([parent.stats(), ...enclosing.map((e) => e.read())]);
    const at = performance.now();
    const limitBytes = limitOf(st) ?? totalmem();
    // Use is the working set: the group's usage counts file cache, which the kernel drops before the
    // containers' own memory is short. Without this a container that only wrote a large file (the cache
    // stays charged after it exits) looked like pressure and got opportunistic containers reclaimed.
    const ramBytes = workingSet(st);
    let tightest: PressureSample['enclosing'];
    for (const e of around)
      if (e != null && (!tightest || e.limitBytes - e.ramBytes < tightest.limitBytes - tightest.ramBytes))
        tightest = e;
    const base = {
      ramBytes,
      limitBytes,
      cpu: { seconds: st.cpuSeconds, at },
      ...(tightest && { enclosing: tightest }),
    };
    if (!psi) return base;
    const [memory, cpu] = await Promise.all([readPsi(psiFile('memory')), readPsi(psiFile('cpu'))]);
    return {
      ...base,
      psi: { ...(memory !== undefined ? { memory } : {}), ...(cpu !== undefined ? { cpu } : {}) },
    };
  };
}

/** How an agent watches its instance (the `pressure_*` and `instance_ram` options). */
export interface AgentPressureOptions {
  intervalMs: number;
  headroomBytes: number;
  marginBytes: number;
  psiPercent: number | null;
  /** CPU use (percent of instanceVcpus) that is pressure, for hosts without PSI; null: not a signal. */
  cpuPercent: number | null;
  /** null: the parent group's limit, else the host's memory. */
  instanceRam: number | null;
  /** null: the host's CPUs. */
  instanceVcpus: number | null;
  cgroupParent: string;
  cgroupRoot?: string;
}

/** A runner as the watcher sees it (src/agent/runner.ts). */
export interface WatchedRunner extends Reclaimable {
  readonly opportunistic: boolean;
  readonly supervised: boolean;
}

/**
 * Runs the agent's watcher until `signal` aborts; resolves at once (with the reason logged) where the
 * containers' parent group cannot be read (no usable cgroups: nothing opportunistic is ever reclaimed).
 * `watching` is called once the watcher runs: from then until this resolves the agent can claim lent room
 * back, which it tells the API in its pings (`reclaims`), so that only its instance lends room.
 */
export async function watchPressure(
  o: AgentPressureOptions,
  runners: () => Iterable<WatchedRunner>,
  log: { info(o: object, m: string): void; warn(o: object, m: string): void },
  signal: AbortSignal,
  watching: () => void = () => {},
): Promise<void> {
  const root = o.cgroupRoot ?? CGROUP_ROOT;
  const host = await probeCgroups(root);
  if (host.unusable !== null) {
    log.warn({ reason: host.unusable }, `no pressure watcher: ${host.unusable}`);
    return;
  }
  const parent = cgroupAt(host, o.cgroupParent);
  const enclosing = await enclosingLimits(host, o.cgroupParent);
  const limits: PressureLimits = {
    capacityBytes: o.instanceRam,
    headroomBytes: o.headroomBytes,
    marginBytes: o.marginBytes,
    psiPercent: o.psiPercent,
    cpuPercent: o.cpuPercent,
    vcpus: o.instanceVcpus ?? availableParallelism(),
  };
  log.info(
    { capacity: limits.capacityBytes, headroom: limits.headroomBytes, psi: limits.psiPercent },
    `pressure watcher: reclaiming opportunistic containers under ${mib(limits.headroomBytes)} free of ${limits.capacityBytes === null ? `the limit of ${o.cgroupParent}` : mib(limits.capacityBytes)}`,
  );
  const watcher = new PressureWatcher({
    limits,
    sample: cgroupSampler(parent, root, o.psiPercent !== null, enclosing),
    opportunistic: () => [...runners()].filter((r) => r.opportunistic && r.supervised),
    intervalMs: o.intervalMs,
    onReclaim: (e) =>
      log.warn(
        { containers: e.ids, thawed: e.thawed, freeze_ms: Math.round((e.frozenAt - e.signalAt) * 10) / 10 },
        `${e.why}: reclaimed ${e.ids.join(', ') || 'none'}${e.thawed.length ? `; thawed ${e.thawed.join(', ')}` : ''}`,
      ),
    onError: (err) => log.warn({ err }, 'pressure watcher'),
  });
  watching();
  await watcher.run(signal);
}
