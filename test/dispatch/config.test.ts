// The dispatch config file: every key has its declared default, human quantities are read, and every
// error names the file and the key's path; the scheduler section is the snapshot's, without
// max_dispatch_attempts (a server option the dispatcher reads from the database).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/declare.js';
import { SCHEDULER_OPTIONS } from '../../src/config/scheduler.js';
import { loadDispatchConfig, parseDispatchConfig } from '../../src/dispatch/config.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-dispatch-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function errorOf(value: unknown): string {
  try {
    parseDispatchConfig(value);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('parsed without error');
}

const one = [{ name: 't1', vcpus: 2, ram: '4GiB', price: 0.1 }];

describe('parseDispatchConfig', () => {
  it('fills every key with its default', () => {
    const c = parseDispatchConfig({ instance_types: one });
    const { maxDispatchAttempts: _, ...scheduler } = SCHEDULER_OPTIONS.defaults();
    expect(c).toEqual({
      cluster: 'local',
      tag: 'default',
      driver: 'local',
      ec2: null,
      instanceTypes: [
        {
          name: 't1',
          providerType: 't1',
          vcpus: 2,
          ram: 4 * 1024 ** 3,
          scratch: 0,
          gpus: 0,
          price: 0.1,
          preemptible: false,
        },
      ],
      scheduler,
      nodeLostAfterMs: 60_000,
      dispatcherLostAfterMs: 60_000,
      syncIntervalMs: 10_000,
      shutdownRetryMs: 30_000,
      stopGraceMs: 30_000,
      capacityTtlMs: 60_000,
      quotaTtlMs: 300_000,
      statusIntervalMs: 2_000,
      fullReloadPasses: 100,
      tickIntervalMs: 1_000,
      maxCloudOpsPerSecond: 10,
      maxConcurrentCreates: 4,
      bootDelayMs: 1_000,
      netns: false,
    });
  });

  it('caps the local default types at twice the CPUs unless max_instances is given', () => {
    expect(parseDispatchConfig({}).scheduler.maxInstances).toBe(Math.max(4, 2 * cpus().length));
    expect(parseDispatchConfig({ scheduler: { max_instances: 2 } }).scheduler.maxInstances).toBe(2);
    expect(parseDispatchConfig({ instance_types: one }).scheduler.maxInstances).toBe(null);
  });

  it('reads durations and sizes as people write them, or as numbers', () => {
    const c = parseDispatchConfig({
      instance_types: one,
      node_lost_after: '1m30s',
      sync_interval: 5,
      scheduler: { ram_overhead: '512MiB', idle_timeout: 90 },
      max_cloud_ops_per_second: 0.5,
      max_concurrent_creates: null,
    });
    expect(c).toMatchObject({ nodeLostAfterMs: 90_000, syncIntervalMs: 5000 });
    expect(c.scheduler).toMatchObject({ ramOverhead: 512 * 1024 ** 2, idleTimeoutMs: 90_000 });
    expect(c).toMatchObject({ maxCloudOpsPerSecond: 0.5, maxConcurrentCreates: null });
  });

  it('names the key of every error', () => {
    expect(errorOf({ colour: 1 })).toBe('colour: unknown field');
    expect(errorOf({ scheduler: { colour: 1 } })).toBe('scheduler.colour: unknown field');
    expect(errorOf({ scheduler: { max_dispatch_attempts: 3 } })).toBe(
      'scheduler.max_dispatch_attempts: a server option (--max-dispatch-attempts, $BERTH_MAX_DISPATCH_ATTEMPTS): the dispatcher reads it from the database',
    );
    expect(errorOf({ scheduler: { idle_timeout: 'soon' } })).toBe(
      'scheduler.idle_timeout: expected a duration such as 90s, 10m, 1h30m or a number of seconds, got "soon"',
    );
    expect(errorOf({ scheduler: { billing_period: '1h', shutdown_window: '2h' } })).toBe(
      'scheduler.shutdown_window: expected a duration no longer than billing_period',
    );
    expect(errorOf({ cluster: 'Prod' })).toBe(
      'cluster: expected lower-case letters, digits and - (at most 32), got "Prod"',
    );
    expect(errorOf({ driver: 'gce' })).toBe('driver: expected one of local, ec2, got "gce"');
    expect(errorOf({ instance_types: [] })).toBe(
      'instance_types: expected at least one instance type, got an array',
    );
    expect(errorOf({ instance_types: [{ name: 't', vcpus: 1, ram: 'lots', price: 1 }] })).toBe(
      'instance_types[0].ram: expected a size such as 4GiB, 512MiB or a number of bytes, got "lots"',
    );
    expect(errorOf({ tick_interval: 0 })).toBe('tick_interval: expected a duration above 0, got 0');
    expect(errorOf({ max_concurrent_creates: 0 })).toBe(
      'max_concurrent_creates: expected a whole number >= 1, got 0',
    );
    expect(errorOf({ netns: 'yes' })).toBe('netns: expected true or false, got "yes"');
    expect(errorOf([])).toBe('expected an object, got an array');
  });
});

describe('loadDispatchConfig', () => {
  it('names the file in its errors', () => {
    const file = join(dir, 'dispatch.json');
    writeFileSync(file, JSON.stringify({ scheduler: { colour: 'red' } }));
    expect(() => loadDispatchConfig(file)).toThrow(`${file}: scheduler.colour: unknown field`);
    writeFileSync(file, '{');
    expect(() => loadDispatchConfig(file)).toThrow(
      new RegExp(`^${file}: cannot read a JSON dispatch config`),
    );
    writeFileSync(file, '3');
    expect(() => loadDispatchConfig(file)).toThrow(`${file}: expected a JSON object`);
  });

  it('applies overrides over the file', () => {
    const file = join(dir, 'ok.json');
    writeFileSync(file, JSON.stringify({ instance_types: one, sync_interval: '1m' }));
    expect(loadDispatchConfig(file).syncIntervalMs).toBe(60_000);
    expect(loadDispatchConfig(file, { sync_interval: '2s' }).syncIntervalMs).toBe(2_000);
  });
});
