// The chaos run's fixed world: instance types (one always out of capacity), the dispatcher's config, the
// sim cloud's fault knobs and the seeded workload. Everything random is derived from the seed, per
// request, so a request's size, priority, injected failure and durations do not depend on run order.
import type { SimCloudOptions } from '../cloud/sim/options.js';
import { sample, type Distribution } from '../cloud/sim/distribution.js';
import { seededRng } from '../model/clock.js';
import type { InstanceType } from '../model/types.js';
import { SCHEDULER_OPTIONS, type SchedulerConfig } from '../config/scheduler.js';
import { DISPATCHER_TIMERS, type DispatcherTimers } from '../dispatch/config.js';

const GiB = 1024 ** 3;

function type(name: string, vcpus: number, ramGiB: number, price: number): InstanceType {
  const t = { name, providerType: name, vcpus, ram: ramGiB * GiB, scratch: 200 * GiB };
  return { ...t, gpus: 0, price, preemptible: false };
}

/** The type that is always out of capacity. Every container that fits it also fits `small`. */
export const OUT_OF_CAPACITY = 'tiny';

export const TYPES: InstanceType[] = [
  type('tiny', 1, 2, 0.05),
  type('small', 2, 8, 0.07),
  type('large', 8, 32, 0.4),
];

/** Share of agents that crash part-way through the first container they run. */
export const AGENT_CRASH_RATE = 1 / 7;

/** The cloud's account quota (instances). */
export const QUOTA = 10;

export const CONFIG: SchedulerConfig = SCHEDULER_OPTIONS.parse({
  // Above the cloud quota, so the quota is found the hard way (QuotaError) and remembered.
  max_instances: 12,
  boot_timeout: '5m',
  // The stall check was calibrated with this; the default (10 s since issue 14) leaves the run's longest
  // stall close to the limit when the machine is loaded.
  idle_timeout: '30s',
  // The stall check counts any wait while there is room to create as a stall; duration-aware reuse (on by
  // default since issue 14) waits on purpose, up to a boot time, for a busy instance to free up (one of four
  // loaded runs saw a 36 s wait). Its own tests are test/dispatch/durations.test.ts and the sim's.
  wait_for_running: false,
});

export const TIMERS: DispatcherTimers = DISPATCHER_TIMERS.parse({ shutdown_retry: '5s' });
/** Agents ping this often (the long poll's timeout); assignments wake them at once. */
export const PING_INTERVAL_MS = 15_000;

export function cloudOptions(seed: number): SimCloudOptions {
  return {
    seed,
    bootTime: { kind: 'lognormal', medianMs: 45_000, sigma: 0.3 },
    createErrorRate: 0.1,
    destroyErrorRate: 0.1,
    capacityErrorRate: { [OUT_OF_CAPACITY]: 1 },
    quota: { maxInstances: QUOTA },
    neverBootRate: 1 / 7,
    // Agent crashes are driven by the simulated agents (AGENT_CRASH_RATE), not the cloud's timer: the
    // cloud's crash comes at a time drawn from boot, often when the agent is idle or already gone, and
    // the issue asks for agents that crash in the middle of a container.
    recordCalls: false,
  };
}

/** Container sizes (vcpus, ram GiB): from tiny-sized to large-only. */
const SIZES: [number, number][] = [
  [0.5, 1],
  [1, 2],
  [2, 4],
  [2, 7],
  [4, 12],
  [8, 30],
];
const PRIORITIES = [100, 500, 900];
const DURATION: Distribution = { kind: 'lognormal', medianMs: 90_000, sigma: 0.6 };
/** Share of requests whose first reported exit is non-zero (first attempt only; the retry succeeds). */
export const FAIL_FIRST_RATE = 0.1;

/** One request of the workload. */
export interface Job {
  index: number;
  vcpus: number;
  ramGiB: number;
  priority: number;
  /** The first container of this request to report an exit reports 1; later ones report 0. */
  failFirst: boolean;
  /** When it is submitted, ms after the start. */
  submitAtMs: number;
}

const WAVE = 100;
const WAVE_EVERY_MS = 1_000_000;

export function workload(n: number, seed: number): Job[] {
  const jobs: Job[] = [];
  // Waves of 100 every 1000 s: the pool drains a wave in a bit less, so it scales down to nothing and
  // up again between waves (idle shutdowns, new creates, boots), and a big run's queue stays bounded.
  for (let i = 0; i < n; i++) {
    const r = seededRng((seed * 1_000_003 + i * 7919) >>> 0);
    const [vcpus, ramGiB] = SIZES[Math.floor(r() * SIZES.length)]!;
    jobs.push({
      index: i,
      vcpus,
      ramGiB,
      priority: PRIORITIES[Math.floor(r() * PRIORITIES.length)]!,
      failFirst: r() < FAIL_FIRST_RATE,
      submitAtMs: Math.floor(i / WAVE) * WAVE_EVERY_MS,
    });
  }
  return jobs;
}

/** How long a container of the job runs, for its n-th start (seeded per request and start). */
export function durationMs(job: Job, start: number, seed: number): number {
  const r = seededRng((seed * 2_000_003 + job.index * 104_729 + start * 31) >>> 0);
  return Math.max(1_000, sample(DURATION, r));
}

/** True when the job fits some type that is not always out of capacity. */
export function fitsAvailableType(job: { vcpus: number; ramGiB: number }): boolean {
  return TYPES.some((t) => t.name !== OUT_OF_CAPACITY && t.vcpus >= job.vcpus && t.ram >= job.ramGiB * GiB);
}
