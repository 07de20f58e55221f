// Shared builders for the simulator harness tests.
import { parseSimConfig, type SimConfig } from '../../src/sim/config.js';
import type { SimJob } from '../../src/sim/run.js';

export const GiB = 1024 ** 3;

/** A job arriving at `arrivalS` seconds that runs `durationS` seconds (1 vcpu, 1 GiB unless told). */
export function job(id: string, arrivalS: number, durationS: number, extra: Partial<SimJob> = {}): SimJob {
  return {
    id,
    arrival: arrivalS * 1000,
    vcpus: 1,
    ram: GiB,
    scratch: 0,
    gpus: 0,
    duration: durationS * 1000,
    priority: 500,
    preemptible: false,
    ...extra,
  };
}

/** One 2-vcpu type at $3.60/h (a cent per second), a fixed 60 s boot, no start delay; `extra` overrides. */
export function smallConfig(extra: Record<string, unknown> = {}): SimConfig {
  return parseSimConfig({
    catalog: [{ name: 't2', vcpus: 2, ram: '8GiB', scratch: '100GiB', price: 3.6 }],
    boot_time: { kind: 'fixed', time: '60s' },
    agent: { start_delay: 0 },
    scheduler: { idle_timeout: '60s' },
    ...extra,
  });
}
