// `berth sim` and `berth sim compare` in-process, and the simulator config file's validation.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/declare.js';
import { loadSimConfig, parseSimConfig } from '../../src/sim/config.js';
import { berthInProcess } from '../helpers/cli.js';
import { diamond, writeCliWorld } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-sim-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const berth = berthInProcess;

const { workload, config } = writeCliWorld(dir, { idle_timeout: '2m' });

describe('berth sim', () => {
  it('writes report.json and report.html and prints a summary', async () => {
    const out = join(dir, 'berth');
    const r = await berth('sim', '--workload', workload, '--config', config, '--seed', '3', '--out', out);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/policy berth, seed 3: 3 containers, 3 completed/);
    expect(r.stdout).toMatch(/cost \d+\.\d+ {2}lower bound \d+\.\d+ {2}ratio \d\.\d{3}/);
    expect(r.stdout).toMatch(/wait p50 .* p90 .* p99/);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
    expect(report).toMatchObject({ format: 'berth-sim-report/1', policy: 'berth', seed: 3 });
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('<svg');
  });

  it('--wait-causes adds the breakdown to report.json and the summary; without it neither has one', async () => {
    const out = join(dir, 'causes');
    const r = await berth('sim', '--workload', workload, '--config', config, '--out', out, '--wait-causes');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^wait by cause, mean per container: .*boot \d+\.\ds/m);
    expect(r.stdout).toMatch(/^ {2}the \d+ that waited >= \d+\.\ds: /m);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
    expect(Object.keys(report.waitCauses)).toEqual(['mean', 'tail', 'steps']);
    const without = join(dir, 'no-causes');
    const p = await berth('sim', '--workload', workload, '--config', config, '--out', without);
    expect(p.code).toBe(0);
    expect(p.stdout).not.toMatch(/wait by cause/);
    expect(JSON.parse(readFileSync(join(without, 'report.json'), 'utf8')).waitCauses).toBeUndefined();
  });

  it('--json, --policy, --limit-jobs, --time-scale, then compare', async () => {
    const out = join(dir, 'single');
    const r = await berth(
      'sim',
      '--workload',
      workload,
      '--config',
      config,
      '--policy',
      'one-per-instance',
      '--limit-jobs',
      '2',
      '--time-scale',
      '0.5',
      '--out',
      out,
      '--json',
    );
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.report.containers.total).toBe(2);
    expect(j.report.policy).toBe('one-per-instance');
    // b arrives at 5 s and runs 100 s at half time scale.
    expect(j.stats.requests.success).toBe(2);
    const c = await berth('sim', 'compare', join(dir, 'berth', 'report.json'), join(out, 'report.json'));
    expect(c.code).toBe(0);
    expect(c.stdout).toMatch(/A: berth \(seed 3\)\s+B: one-per-instance \(seed 1\)/);
    expect(c.stdout).toMatch(/total cost/);
  });

  it('a WfCommons workflow runs closed loop; the summary shows its makespan and critical path', async () => {
    const wf = join(dir, 'diamond-001.json');
    writeFileSync(wf, JSON.stringify(diamond()));
    const out = join(dir, 'workflow');
    const r = await berth('sim', '--workload', wf, '--config', config, '--out', out);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /workflows: 1 runs, 1 succeeded, 0 failed, 0 open; makespan \/ critical path p50 \d\.\d\d/,
    );
    expect(r.stdout).toMatch(/diamond-001: 1\/1 runs, 4 tasks, critical path 1m50s, makespan p50 \S+/);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
    expect(report.workflows.list[0]).toMatchObject({ id: 'diamond-001/1', outcome: 'success' });
    expect(report.workflows.list[0].makespan).toBeGreaterThan(110);

    // berth usage reads the same report: the diamond's split task recorded 150 % CPU and 1 GB.
    const u = await berth('usage', '--report', join(out, 'report.json'));
    expect(u.code).toBe(0);
    expect(u.stdout).toMatch(/^NAME\s+DONE\s+CPUS ASKED/);
    expect(u.stdout).toMatch(/\nsplit\s+1\s+2\s+1\.5\/1\.5\s+1\.5\s/);
    expect(u.stdout).toMatch(/\nleft\s+1\s+-\s+not recorded/);
    expect(u.stdout).toMatch(/cost lower bound as asked [\d.]+, right-sized [\d.]+/);
    const j = JSON.parse((await berth('usage', '--report', join(out, 'report.json'), '--json')).stdout);
    expect(j.items.map((r: { key: string }) => r.key)).toEqual(['STEP.RIGHT', 'left', 'merge', 'split']);
    for (const [args, message] of [
      [['usage', '--by', 'colour'], /--by: expected name or owner, got "colour"/],
      [
        ['usage', '--report', join(out, 'report.json'), '--by', 'owner'],
        /--report: a simulation report groups by name only/,
      ],
      [['usage', '--since', 'yesterday'], /--since: expected an RFC 3339 time/],
      [['usage', '--report', workload], /format: expected "berth-sim-report\/1"/],
    ] as Array<[string[], RegExp]>) {
      const r = await berth(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
    }
  });

  it('bad flags and files exit 2 naming the flag or key', async () => {
    const cases: [string[], RegExp][] = [
      [['sim', '--out', dir], /--workload: required/],
      [['sim', '--workload', workload], /--out: required/],
      [
        ['sim', '--workload', workload, '--out', dir, '--policy', 'lifo'],
        /--policy: expected one of berth, one-per-instance, fifo/,
      ],
      [['sim', '--workload', workload, '--out', dir, '--seed', 'x'], /--seed: expected a whole number/],
      [
        ['sim', '--workload', workload, '--out', dir, '--limit-jobs', '0'],
        /--limit-jobs: expected a whole number >= 1/,
      ],
      [
        ['sim', '--workload', workload, '--out', dir, '--time-scale', '-1'],
        /--time-scale: expected a number above 0/,
      ],
      [
        ['sim', '--workload', join(dir, 'missing.json'), '--out', dir],
        /--workload .*missing\.json: cannot read/,
      ],
      [['sim', 'compare', workload, workload], /format: expected "berth-sim-report\/1"/],
    ];
    for (const [args, message] of cases) {
      const r = await berth(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ faults: { agent_crash_rate: 2 } }));
    const r = await berth('sim', '--workload', workload, '--out', dir, '--config', bad);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /bad\.json: faults\.agent_crash_rate: expected a probability from 0 to 1, got 2/,
    );
  });
});

describe('parseSimConfig', () => {
  const error = (v: unknown): string => {
    try {
      parseSimConfig(v);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    }
    throw new Error('expected an error');
  };

  it('has defaults for everything', () => {
    const c = parseSimConfig({});
    expect(c.catalog.length).toBe(80);
    expect(c.scheduler.idleTimeoutMs).toBe(10_000);
    expect(c.cloud.bootTime).toEqual({ kind: 'lognormal', medianMs: 60_000, sigma: 0.25 });
    expect(c.dispatcher).toEqual({
      nodeLostAfterMs: 60_000,
      syncIntervalMs: 300_000,
      safetyTickMs: 300_000,
      minPassIntervalMs: 0,
    });
  });

  it('reads every section', () => {
    const c = parseSimConfig({
      catalog: 'default',
      scheduler: { max_instances: 5, idle_timeout: '90s' },
      boot_time: { kind: 'uniform', min: '30s', max: '2m' },
      limits: { max_cloud_ops_per_second: 10, burst: 20, max_concurrent_creates: 4 },
      faults: {
        create_error_rate: 0.1,
        capacity_error_rate: { 'compute-2': 0.5 },
        quota: { max_instances: 10 },
        outages: [{ scope: 'type', subject: 'compute-2', from: '1h', until: '2h' }],
        spot: { interruptions_per_hour: 0.5 },
        agent_crash_after: { kind: 'exponential', mean: '30m' },
      },
      agent: { start_delay: '5s', ping_interval: '15s' },
      dispatcher: { node_lost_after: '2m', sync_interval: '1m', safety_tick: '10m' },
      time_limit: '7d',
    });
    expect(c.scheduler.maxInstances).toBe(5);
    expect(c.scheduler.idleTimeoutMs).toBe(90_000);
    expect(c.cloud.bootTime).toEqual({ kind: 'uniform', minMs: 30_000, maxMs: 120_000 });
    expect(c.cloud.outages).toEqual([
      { scope: 'type', subject: 'compute-2', fromMs: 3_600_000, untilMs: 7_200_000 },
    ]);
    expect(c.cloud.quota).toEqual({ maxInstances: 10, maxVcpus: undefined });
    expect(c.cloud.spot).toEqual({ interruptionsPerHour: 0.5, byType: {}, noticeMs: 120_000 });
    expect(c.billing).toEqual({ minimumMs: 60_000, incrementMs: 1000 });
    expect(c.limits).toEqual({ opsPerSecond: 10, burst: 20, maxConcurrentCreates: 4 });
    expect(c.agent).toEqual({ startDelayMs: 5000, pingIntervalMs: 15_000 });
    expect(c.timeLimitMs).toBe(7 * 86_400_000);
  });

  it('reads a catalog file relative to the config file', () => {
    writeFileSync(
      join(dir, 'cat.json'),
      JSON.stringify({ instance_types: [{ name: 'only', vcpus: 8, ram: '32GiB', price: 0.4 }] }),
    );
    const path = join(dir, 'with-catalog.json');
    writeFileSync(path, JSON.stringify({ catalog: 'cat.json' }));
    expect(loadSimConfig(path).catalog.map((t) => t.name)).toEqual(['only']);
    writeFileSync(path, JSON.stringify({ catalog: 'nope.json' }));
    expect(() => loadSimConfig(path)).toThrow(/with-catalog\.json: catalog: .*nope\.json: cannot read/);
  });

  it('names the key of every error', () => {
    expect(error({ colour: 1 })).toMatch(/^colour: unknown field/);
    expect(error({ scheduler: { idle_timeout: 'soon' } })).toMatch(
      /^scheduler\.idle_timeout: expected a duration/,
    );
    expect(error({ scheduler: { max_instance: 3 } })).toMatch(/^scheduler\.max_instance: unknown field/);
    expect(error({ boot_time: { kind: 'gamma' } })).toMatch(/^boot_time\.kind: expected fixed, uniform/);
    expect(error({ boot_time: { kind: 'fixed' } })).toMatch(/^boot_time\.time: required/);
    expect(error({ faults: { quota: { max_instances: -1 } } })).toMatch(
      /^faults\.quota\.max_instances: expected a whole number/,
    );
    expect(error({ faults: { outages: [{ scope: 'type', until: '1h' }] } })).toMatch(
      /^faults\.outages\[0\]\.subject: required/,
    );
    expect(error({ catalog: [{ name: 'x', vcpus: 1, ram: '1GiB', price: -1 }] })).toMatch(
      /^catalog: instance_types\[0\]\.price/,
    );
    expect(error({ agent: { ping_interval: 0 } })).toMatch(/^agent\.ping_interval/);
    expect(error({ dispatcher: { sync: '1m' } })).toMatch(/^dispatcher\.sync: unknown field/);
    expect(error({ faults: { spot: { by_type: { 'compute-2': 1 } } } })).toBe(
      'faults.spot.by_type.compute-2: not a preemptible type of the catalog (the keys are provider types of spot types)',
    );
    expect(error({ faults: { spot: { by_type: { 'compute-2-spot': -1 } } } })).toBe(
      'faults.spot.by_type.compute-2-spot: expected a number >= 0 (per hour, such as 0.05), got -1',
    );
    expect(error({ billing: { increment: 0 } })).toBe(
      'billing.increment: expected a duration above 0, got 0',
    );
    expect(error({ billing: { minimum: '1 minute' } })).toMatch(/^billing\.minimum: expected a duration/);
    expect(error({ billing: { period: '1h' } })).toMatch(/^billing\.period: unknown field/);
  });

  it('billing: EC2 by default; the increment follows the scheduler billing_period unless given', () => {
    expect(parseSimConfig({}).billing).toEqual({ minimumMs: 60_000, incrementMs: 1000 });
    expect(parseSimConfig({ scheduler: { billing_period: '1h' } }).billing).toEqual({
      minimumMs: 60_000,
      incrementMs: 3_600_000,
    });
    expect(parseSimConfig({ billing: { minimum: 0, increment: '1m' } }).billing).toEqual({
      minimumMs: 0,
      incrementMs: 60_000,
    });
  });

  it('spot interruption rates per type', () => {
    const c = parseSimConfig({
      faults: { spot: { interruptions_per_hour: 0.1, by_type: { 'gpu-4-spot': 0.5 }, notice: '30s' } },
    });
    expect(c.cloud.spot).toEqual({
      interruptionsPerHour: 0.1,
      byType: { 'gpu-4-spot': 0.5 },
      noticeMs: 30_000,
    });
  });
});
