// Shared builders for the simulator harness tests.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseSimConfig, type SimConfig } from '../../src/sim/config.js';
import { runSimulation, type RunResult, type SimJob } from '../../src/sim/run.js';

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

/** A hand-computed run: `jobs` on smallConfig(`extra`), the berth policy, seed 1. */
export function simulateSmall(jobs: SimJob[], extra: Record<string, unknown> = {}): Promise<RunResult> {
  return runSimulation({ jobs, config: smallConfig(extra), seed: 1, policy: 'berth' });
}

/** The containers of job `id` in a run: its attempts, in order. */
export function attemptsOf(r: RunResult, id: string): RunResult['record']['containers'] {
  return r.record.containers.filter((c) => c.id === id || c.id.startsWith(`${id}#`));
}

/** When each attempt of job `id` started, in seconds from the run's start (null: it never did). */
export function startsOf(r: RunResult, id: string): (number | null)[] {
  return attemptsOf(r, id).map((c) => (c.start === null ? null : (c.start - r.record.startTime!) / 1000));
}

/** When each attempt of job `id` ended, in seconds from the run's start (null: it never did). */
export function endsOf(r: RunResult, id: string): (number | null)[] {
  return attemptsOf(r, id).map((c) => (c.end === null ? null : (c.end - r.record.startTime!) / 1000));
}

/** A 1.5 instance: a diamond split → (left, right) → merge, listed out of order. */
export function diamond(): unknown {
  return {
    name: 'diamond',
    schemaVersion: '1.5',
    workflow: {
      specification: {
        tasks: [
          {
            name: 'merge_ID0000004',
            id: 'merge_ID0000004',
            parents: ['left_ID0000002', 'right_ID0000003'],
            children: [],
          },
          {
            name: 'split_ID0000001',
            id: 'split_ID0000001',
            parents: [],
            children: ['left_ID0000002', 'right_ID0000003'],
          },
          {
            name: 'left_ID0000002',
            id: 'left_ID0000002',
            parents: ['split_ID0000001'],
            children: ['merge_ID0000004'],
          },
          {
            name: 'STEP.RIGHT',
            id: 'right_ID0000003',
            parents: ['split_ID0000001'],
            children: ['merge_ID0000004'],
          },
        ],
      },
      execution: {
        makespanInSeconds: 0,
        executedAt: '2020-01-01T00:00:00Z',
        tasks: [
          { id: 'split_ID0000001', runtimeInSeconds: 10, coreCount: 2, memoryInBytes: 1e9, avgCPU: 150 },
          { id: 'left_ID0000002', runtimeInSeconds: 100.4 },
          { id: 'right_ID0000003', runtimeInSeconds: 30, avgCPU: 50 },
          { id: 'merge_ID0000004', runtimeInSeconds: 0, memoryInBytes: 5e8 },
        ],
      },
    },
  };
}

/**
 * The CLI tests' small world, written into `dir`: three jobs (two 1-vcpu ones 10 s apart, a 4-vcpu one an
 * hour later) and a config with one 4-vcpu type at 0.2 $/h and 60 s boots; `scheduler` is the config's
 * scheduler section (absent when not given). Returns the two files' paths.
 */
export function writeCliWorld(
  dir: string,
  scheduler?: Record<string, unknown>,
): { workload: string; config: string } {
  const workload = join(dir, 'w.json');
  writeFileSync(
    workload,
    JSON.stringify({
      jobs: [
        { id: 'a', arrival: 0, vcpus: 1, ram: '1GiB', duration: '100s' },
        { id: 'b', arrival: '10s', vcpus: 1, ram: '1GiB', duration: '200s' },
        { id: 'c', arrival: '1h', vcpus: 4, ram: '8GiB', duration: '10m' },
      ],
    }),
  );
  const config = join(dir, 'c.json');
  writeFileSync(
    config,
    JSON.stringify({
      catalog: { instance_types: [{ name: 't4', vcpus: 4, ram: '16GiB', scratch: '100GiB', price: 0.2 }] },
      boot_time: { kind: 'fixed', time: '60s' },
      ...(scheduler && { scheduler }),
    }),
  );
  return { workload, config };
}
