// The agent's way out for opportunistic containers (issue 16, DESIGN §8): a watcher samples the instance's
// memory use (the containers' parent cgroup: memory.current on v2, memory.usage_in_bytes on v1) and, where
// the kernel has it, pressure stall information (PSI), at a short interval. When the guaranteed
// containers grow into the part the opportunistic ones borrowed (free memory under the headroom, or a PSI
// average over its threshold), it reclaims every opportunistic container at once: the runner freezes it
// (the runtime's freeze: the cgroup freezer, or the engine's pause), so it allocates nothing more, then
// stops it and hands it back as a temp failure that spends no retry (model/retry.ts, `reclaimed`). The
// guaranteed containers never wait for the scheduler: the freeze needs nothing but this instance.
//
// The decision is pure (decidePressure); the watcher only samples, on an injected clock and timer.
import { readFile } from 'node:fs/promises';
import { totalmem } from 'node:os';
import { CGROUP_ROOT, cgroupAt, probeCgroups, type Cgroup } from './runtimes/cgroup.js';

/** One sample of the instance. */
export interface PressureSample {
  /** Memory the containers use now (their parent group's usage). */
  ramBytes: number;
  /** The memory they may use together as the sample found it (the group's limit, else the host's). */
  limitBytes: number;
  /** PSI "some avg10" of memory and CPU (percent), when read; absent where the kernel has no PSI. */
  psi?: { memory?: number; cpu?: number };
}

/** The instance's memory and when it counts as under pressure. */
export interface PressureLimits {
  /** The memory the containers may use together; null: the sample's limitBytes. */
  capacityBytes: number | null;
  /** Pressure once free memory (capacity - use) is under this many bytes. */
  headroomBytes: number;
  /** Pressure once a PSI "some avg10" (percent) reaches this; null: PSI is not a signal. */
  psiPercent: number | null;
}

/** Why the instance is under pressure, or null when it is not. */
export function decidePressure(s: PressureSample, l: PressureLimits): string | null {
  const capacity = l.capacityBytes ?? s.limitBytes;
  if (capacity - s.ramBytes < l.headroomBytes)
    return `memory pressure: ${mib(s.ramBytes)} of ${mib(capacity)} in use, under ${mib(l.headroomBytes)} free`;
  if (l.psiPercent !== null)
    for (const what of ['memory', 'cpu'] as const) {
      const v = s.psi?.[what];
      if (v !== undefined && v >= l.psiPercent)
        return `${what} pressure: PSI some avg10 ${v.toFixed(1)}% >= ${l.psiPercent}%`;
    }
  return null;
}

const mib = (b: number) => `${Math.round(b / 1048576)}MiB`;

/** A running container the watcher may reclaim. */
export interface Reclaimable {
  readonly id: string;
  /** Freezes the container at once, then stops it and hands it back (reclaimed); resolves once frozen. */
  reclaim(why: string): Promise<void>;
}

/** What the watcher reports of each reclaim (the bench and the agent's log read it). */
export interface ReclaimEvent {
  why: string;
  ids: string[];
  /** When the sample that showed the pressure was read (the signal), on the watcher's clock. */
  signalAt: number;
  /** When every reclaimed container was frozen. */
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
  private readonly reclaimed = new Set<string>();
  private readonly now: () => number;

  constructor(private readonly opts: PressureWatcherOptions) {
    this.now = opts.now ?? (() => performance.now());
  }

  /** One sample and, under pressure, one reclaim of every opportunistic container; the event, if any. */
  async tick(): Promise<ReclaimEvent | null> {
    const all = this.opts.opportunistic();
    // Forget the reclaimed ones that are gone (their runners reported and were dropped).
    for (const id of this.reclaimed) if (!all.some((r) => r.id === id)) this.reclaimed.delete(id);
    const victims = all.filter((r) => !this.reclaimed.has(r.id));
    if (victims.length === 0) return null;
    const s = await this.opts.sample();
    const signalAt = this.now();
    const why = decidePressure(s, this.opts.limits);
    if (!why) return null;
    for (const v of victims) this.reclaimed.add(v.id);
    const results = await Promise.allSettled(victims.map((v) => v.reclaim(why)));
    for (const r of results) if (r.status === 'rejected') this.opts.onError?.(r.reason);
    const e: ReclaimEvent = { why, ids: victims.map((v) => v.id), signalAt, frozenAt: this.now() };
    this.opts.onReclaim?.(e);
    return e;
  }

  /** Samples every intervalMs until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const sleep = this.opts.sleep ?? abortableSleep;
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

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/** "some avg10=1.23 ..." → 1.23; undefined when the file is absent or unreadable. */
export async function readPsi(file: string): Promise<number | undefined> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const m = /^some avg10=(\d+(?:\.\d+)?)/m.exec(text);
  return m ? Number(m[1]) : undefined;
}

/**
 * A sampler of the containers' parent group: its memory use, and PSI from the group (v2) or the host
 * (/proc/pressure, which v1 hosts with PSI have).
 */
export function cgroupSampler(parent: Cgroup, root: string, psi: boolean): () => Promise<PressureSample> {
  const psiFile = (what: 'memory' | 'cpu') =>
    parent.version === 2 ? `${root}/${parent.path}/${what}.pressure` : `/proc/pressure/${what}`;
  return async () => {
    const st = await parent.stats();
    // v1 reports "no limit" as a huge number.
    const limitBytes = Number.isFinite(st.ramLimit) && st.ramLimit < 2 ** 60 ? st.ramLimit : totalmem();
    if (!psi) return { ramBytes: st.ramBytes, limitBytes };
    const [memory, cpu] = await Promise.all([readPsi(psiFile('memory')), readPsi(psiFile('cpu'))]);
    return {
      ramBytes: st.ramBytes,
      limitBytes,
      psi: { ...(memory !== undefined ? { memory } : {}), ...(cpu !== undefined ? { cpu } : {}) },
    };
  };
}

/** How an agent watches its instance (the `pressure_*` and `instance_ram` options). */
export interface AgentPressureOptions {
  intervalMs: number;
  headroomBytes: number;
  psiPercent: number | null;
  /** null: the parent group's limit, else the host's memory. */
  instanceRam: number | null;
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
 */
export async function watchPressure(
  o: AgentPressureOptions,
  runners: () => Iterable<WatchedRunner>,
  log: { info(o: object, m: string): void; warn(o: object, m: string): void },
  signal: AbortSignal,
): Promise<void> {
  const root = o.cgroupRoot ?? CGROUP_ROOT;
  const host = await probeCgroups(root);
  if (host.unusable !== null) {
    log.warn({ reason: host.unusable }, `no pressure watcher: ${host.unusable}`);
    return;
  }
  const parent = cgroupAt(host, o.cgroupParent);
  const limits: PressureLimits = {
    capacityBytes: o.instanceRam,
    headroomBytes: o.headroomBytes,
    psiPercent: o.psiPercent,
  };
  log.info(
    { capacity: limits.capacityBytes, headroom: limits.headroomBytes, psi: limits.psiPercent },
    `pressure watcher: reclaiming opportunistic containers under ${mib(limits.headroomBytes)} free of ${limits.capacityBytes === null ? `the limit of ${o.cgroupParent}` : mib(limits.capacityBytes)}`,
  );
  const watcher = new PressureWatcher({
    limits,
    sample: cgroupSampler(parent, root, o.psiPercent !== null),
    opportunistic: () => [...runners()].filter((r) => r.opportunistic && r.supervised),
    intervalMs: o.intervalMs,
    onReclaim: (e) =>
      log.warn(
        { containers: e.ids, freeze_ms: Math.round((e.frozenAt - e.signalAt) * 10) / 10 },
        `${e.why}: reclaimed ${e.ids.join(', ')}`,
      ),
    onError: (err) => log.warn({ err }, 'pressure watcher'),
  });
  await watcher.run(signal);
}
