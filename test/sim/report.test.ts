import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EC2_BILLING } from '../../src/model/billing.js';
import type { InstanceType } from '../../src/model/types.js';
import { buildReport, reportJson, SERIES_BUCKETS } from '../../src/sim/report/build.js';
import { compareReports } from '../../src/sim/report/compare.js';
import { readReport, writeReport } from '../../src/sim/report/files.js';
import { renderReportHtml } from '../../src/sim/report/html.js';
import { ReportInputError, type RunRecord } from '../../src/sim/report/input.js';

const GiB = 1024 ** 3;
const T0 = Date.parse('2026-01-01T00:00:00Z');
const s = (sec: number) => T0 + sec * 1000;

// Two types with the same price per vcpu (0.18/h) and per GiB (0.09/h), so the lower bound is easy by hand.
const small: InstanceType = {
  name: 'small',
  providerType: 'small',
  vcpus: 2,
  ram: 4 * GiB,
  scratch: 0,
  gpus: 0,
  price: 0.36,
  preemptible: false,
};
const big: InstanceType = { ...small, name: 'big', providerType: 'big', vcpus: 4, ram: 8 * GiB, price: 0.72 };

function run(): RunRecord {
  const c = (
    id: string,
    arrival: number,
    start: number,
    end: number,
    vcpus: number,
    ramGiB: number,
    instance: string,
  ) => ({
    id,
    arrival: s(arrival),
    start: s(start),
    end: s(end),
    vcpus,
    ram: ramGiB * GiB,
    scratch: 0,
    gpus: 0,
    preemptible: false,
    instance,
  });
  return {
    policy: 'berth',
    seed: 7,
    instanceTypes: [small, big],
    containers: [
      c('c1', 0, 100, 1100, 2, 2, 'i1'),
      c('c2', 0, 300, 700, 2, 4, 'i2'),
      c('c3', 200, 400, 1000, 1, 4, 'i2'),
    ],
    instances: [
      { id: 'i1', type: 'small', price: 0.36, created: s(0), ready: s(90), destroyed: s(1200) },
      { id: 'i2', type: 'big', price: 0.72, created: s(50), ready: s(280), destroyed: s(1150) },
    ],
  };
}

describe('buildReport on a hand-computed run', () => {
  const r = buildReport(run());

  it('cost: price × lifetime per instance, per-second billing', () => {
    // i1: 0.36/h × 1200 s = 0.12; i2: 0.72/h × 1100 s = 0.22.
    expect(r.cost.total).toBe(0.34);
    expect(r.cost.byType).toEqual({ big: 0.22, small: 0.12 });
    expect(r.instances.hoursByType).toEqual({ big: 0.305556, small: 0.333333 });
    expect(r.instances.created).toBe(2);
  });

  it('lower bound: vcpu-seconds × the per-vcpu price, here above the ram bound; ratio 2', () => {
    // vcpu-seconds: 2·1000 + 2·400 + 1·600 = 3400 → 3400/3600 h × 0.18 = 0.17.
    // GiB-seconds: 2·1000 + 4·400 + 4·600 = 6000 → 6000/3600 h × 0.09 = 0.15.
    expect(r.cost.lowerBound).toBe(0.17);
    expect(r.lowerBound).toEqual({ weights: { vcpus: 1, ram: 0, gpus: 0 }, unfitContainers: 0 });
    expect(r.cost.ratio).toBe(2);
  });

  it('cost split: boot (create → registered), work (a container running), idle (the rest)', () => {
    // i1 ($0.0001/s): boot 0–90 s = 0.009, busy 100–1100 s = 0.1, idle 1200 − 90 − 1000 = 110 s = 0.011.
    // i2 ($0.0002/s): boot 50–280 s = 0.046, busy 300–1000 s (overlap merged) = 0.14, idle 170 s = 0.034.
    expect(r.cost.boot).toBe(0.055);
    expect(r.cost.work).toBe(0.24);
    expect(r.cost.idle).toBe(0.045);
    expect(r.cost.boot + r.cost.work + r.cost.idle).toBeCloseTo(r.cost.total, 9);
  });

  it('billing rule: a minimum, then whole increments', () => {
    // EC2: at least 60 s. i3 lives 20 s and never registers: billed 60 s ($0.006), 20 s boot, 40 s idle.
    const rec = run();
    rec.instances.push({
      id: 'i3',
      type: 'small',
      price: 0.36,
      created: s(0),
      ready: null,
      destroyed: s(20),
    });
    const ec2 = buildReport({ ...rec, billing: EC2_BILLING });
    expect(ec2.cost.total).toBe(0.346);
    expect(ec2.cost.boot).toBe(0.057);
    expect(ec2.cost.idle).toBe(0.049);
    // Hourly: i1 1200 s → 1 h = 0.36, i2 1100 s → 1 h = 0.72, i3 → 1 h = 0.36; the padding is idle.
    const hourly = buildReport({ ...rec, billing: { minimumMs: 0, incrementMs: 3_600_000 } });
    expect(hourly.cost.total).toBe(1.44);
    expect(hourly.cost.boot + hourly.cost.work + hourly.cost.idle).toBeCloseTo(1.44, 9);
    expect(hourly.instances.hoursByType).toEqual({ big: 1, small: 2 });
  });

  it('waits, makespan and boot times', () => {
    // Waits 100, 300, 200 s → sorted 100, 200, 300; nearest rank.
    expect(r.wait).toEqual({ p50: 200, p90: 300, p99: 300, max: 300, mean: 200 });
    expect(r.makespan).toBe(1100);
    expect(r.instances.bootSeconds).toEqual({ p50: 90, max: 230 });
    expect(r.waitHistogram.find((b) => b.bucket === '1m-10m')!.count).toBe(3);
    expect(r.waitHistogram.reduce((n, b) => n + b.count, 0)).toBe(3);
  });

  it('utilization: allocated over paid resource-seconds', () => {
    // vcpu: 3400 / (2·1200 + 4·1100 = 6800) = 0.5. ram: 6000 / (4·1200 + 8·1100 = 13600) GiB-s = 0.4412.
    expect(r.utilization).toEqual({ vcpu: 0.5, ram: 0.4412 });
  });

  it('series: instances and queue over the period', () => {
    expect(r.period).toEqual({
      start: '2026-01-01T00:00:00.000Z',
      end: '2026-01-01T00:20:00.000Z',
      seconds: 1200,
    });
    expect(r.series.bucketSeconds).toBe(6);
    expect(r.series.instances).toHaveLength(SERIES_BUCKETS);
    expect(Math.max(...r.series.instances)).toBe(2);
    expect(r.series.instances[0]).toBe(1); // 0–6 s: only i1
    expect(r.series.instances[10]).toBe(2); // 60–66 s
    expect(r.series.instances[195]).toBe(1); // 1170–1176 s: i2 gone at 1150 s
    // Queue: c1, c2 at 0 s; c3 arrives at 200 s while c2 still waits (until 300 s).
    expect(r.series.queue[0]).toBe(2);
    expect(r.series.queue[20]).toBe(1); // 120–126 s: c1 started at 100 s
    expect(r.series.queue[40]).toBe(2); // 240–246 s: c2 and c3
    expect(r.series.queue[199]).toBe(0);
    expect(r.containers).toEqual({ total: 3, started: 3, completed: 3, neverStarted: 0 });
  });

  it('the same record gives a byte-identical report.json and report.html', () => {
    const again = buildReport(run());
    expect(reportJson(again)).toBe(reportJson(r));
    expect(renderReportHtml(again)).toBe(renderReportHtml(r));
    // Input order does not matter for the figures.
    const shuffled = run();
    shuffled.containers.reverse();
    shuffled.instances.reverse();
    expect(reportJson(buildReport(shuffled))).toBe(reportJson(r));
  });
});

describe('buildReport edge cases', () => {
  it('bills live instances to the end of the run, counts never-started containers, ignores them in waits', () => {
    const rec = run();
    rec.instances[1]!.destroyed = null;
    rec.containers.push({
      ...rec.containers[0]!,
      id: 'c4',
      start: null,
      end: null,
      instance: null,
      arrival: s(500),
    });
    rec.endTime = s(1800);
    const r = buildReport(rec);
    // i2 now billed 50–1800 s: 1750 s × 0.0002 = 0.35; plus i1 0.12.
    expect(r.cost.total).toBe(0.47);
    expect(r.containers).toEqual({ total: 4, started: 3, completed: 3, neverStarted: 1 });
    expect(r.wait.max).toBe(300);
  });

  it('an empty run gives an empty report, not a crash', () => {
    const r = buildReport({ policy: 'p', seed: 1, instanceTypes: [small], containers: [], instances: [] });
    expect(r.cost).toEqual({ total: 0, lowerBound: 0, ratio: null, boot: 0, work: 0, idle: 0, byType: {} });
    expect(r.workflows).toBeNull();
    expect(r.criticalPathBound).toBeNull();
    expect(r.wait.p50).toBeNull();
    expect(r.makespan).toBeNull();
    expect(r.utilization).toEqual({ vcpu: null, ram: null });
    expect(renderReportHtml(r)).toContain('No instances.');
  });

  it.each([
    [(r: RunRecord) => (r.instances[0]!.type = 'huge'), 'instance i1: unknown type huge'],
    [(r: RunRecord) => (r.containers[0]!.instance = 'i9'), 'container c1: instance i9 is not in the run'],
    [(r: RunRecord) => (r.containers[0]!.start = s(-5)), 'container c1: start before arrival'],
    [(r: RunRecord) => (r.instances[1]!.destroyed = s(10)), 'instance i2: destroyed before created'],
    [(r: RunRecord) => r.instances.push(r.instances[0]!), 'instance i1: recorded twice'],
  ])('refuses an inconsistent record (%#)', (mutate, message) => {
    const rec = run();
    mutate(rec);
    expect(() => buildReport(rec)).toThrow(ReportInputError);
    expect(() => buildReport(rec)).toThrow(message);
  });
});

describe('report.html', () => {
  it('is self-contained: inline SVG charts, no scripts or external resources, escaped text', () => {
    const rec = run();
    rec.policy = '<b>mine</b>';
    const html = renderReportHtml(buildReport(rec));
    expect(html.match(/<svg /g)).toHaveLength(3);
    expect(html).toContain('Instances over time');
    expect(html).toContain('Queue length over time');
    expect(html).toContain('Queue wait distribution');
    expect(html).not.toMatch(/<script|<link|https?:\/\//);
    expect(html).toContain('&#60;b&#62;mine&#60;/b&#62;');
    expect(html).not.toContain('<b>mine</b>');
  });
});

describe('compareReports', () => {
  it('prints both reports side by side with B relative to A', () => {
    const a = buildReport(run());
    const rec = run();
    rec.policy = 'baseline';
    rec.instances[1]!.destroyed = s(1700);
    const b = buildReport(rec);
    const text = compareReports(a, b);
    const lines = text.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^\s+A: berth \(seed 7\)\s+B: baseline \(seed 7\)\s+B vs A$/);
    // B's i2 lives 550 s longer: +0.11 → 0.45, +32.4 %.
    expect(lines.find((l) => l.startsWith('total cost'))).toMatch(
      /^total cost\s+0\.3400\s+0\.4500\s+\+32\.4%$/,
    );
    expect(lines.find((l) => l.startsWith('cost lower bound'))).toMatch(/0\.1700\s+0\.1700\s+=$/);
    expect(lines.find((l) => l.startsWith('hours big'))).toMatch(/0\.31\s+0\.46\s+\+50\.0%$/);
    expect(compareReports(a, b)).toBe(text);
  });

  it('a report written before the cost split and workflows existed compares with "-", not a crash', () => {
    const a = buildReport(run());
    const old = JSON.parse(JSON.stringify(a)) as Record<string, Record<string, unknown>>;
    delete old.cost!.boot;
    delete old.cost!.work;
    delete old.instances!.interrupted;
    delete old.workflows;
    delete old.rightSizing;
    const text = compareReports(old as unknown as typeof a, a);
    expect(text).toMatch(/\nboot cost\s+-\s+0\.0550\n/);
    expect(text).toMatch(/\nworkflow makespan \/ critical path p50\s+-\s+-\n/);
  });
});

describe('report files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-report-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  it('writes report.json and report.html and reads the JSON back', () => {
    const r = buildReport(run());
    const paths = writeReport(join(dir, 'out'), r);
    expect(readReport(paths.json)).toEqual(r);
    expect(readFileSync(paths.html, 'utf8')).toBe(renderReportHtml(r));
    writeFileSync(join(dir, 'other.json'), '{"format":"x"}');
    expect(() => readReport(join(dir, 'other.json'))).toThrow(
      /other\.json: format: expected "berth-sim-report\/1", got "x"/,
    );
  });
});

describe('right-sizing in the report', () => {
  // One 2-vcpu, 8 GiB type at $3.60/h: the lower bound of a container is its largest share of it.
  const t2: InstanceType = { ...small, name: 't2', providerType: 't2', vcpus: 2, ram: 8 * GiB, price: 3.6 };
  const rec = (over: Partial<RunRecord['containers'][number]>): RunRecord['containers'][number] => ({
    id: 'x',
    arrival: s(0),
    start: s(0),
    end: s(3600),
    vcpus: 2,
    ram: 4 * GiB,
    scratch: 0,
    gpus: 0,
    preemptible: false,
    instance: 'i1',
    exitCode: 0,
    ...over,
  });
  const base = (containers: RunRecord['containers']): RunRecord => ({
    policy: 'berth',
    seed: 1,
    instanceTypes: [t2],
    containers,
    instances: [{ id: 'i1', type: 't2', price: 3.6, created: s(0), ready: s(0), destroyed: s(7200) }],
  });

  it('per name from completed containers: suggestion and the lower bound it would give', () => {
    const r = buildReport(
      base([
        rec({ id: 'a', name: 'align', usage: { cpuSeconds: 1800, peakRam: GiB } }),
        // Killed with its machine: says nothing about the job's needs, left out.
        rec({ id: 'b', name: 'align', exitCode: null, usage: { cpuSeconds: 3600 * 2, peakRam: 6 * GiB } }),
      ]),
    ).rightSizing!;
    expect(r.items).toHaveLength(1);
    // 0.5 cores used → 0.5 vcpu; 1 GiB peak × 1.2 → 1.25 GiB (64 MiB steps).
    expect(r.items[0]).toMatchObject({
      key: 'align',
      containers: 1,
      cpu: { suggested: 0.5, askedHours: 2, suggestedHours: 0.5, savedHours: 1.5, savedShare: 0.75 },
      ram: { suggested: 1.25 * GiB, askedGiBHours: 4, suggestedGiBHours: 1.25, savedShare: 0.6875 },
    });
    // As asked: max(2/2, 4/8) of $3.60 for an hour = 3.6. Right-sized: max(0.5/2, 1.25/8) → 0.9.
    expect(r.lowerBound).toEqual({ asked: 3.6, rightSized: 0.9 });
  });

  it('null when the workload recorded no usage', () => {
    expect(buildReport(base([rec({ id: 'a', name: 'x' })])).rightSizing).toBeNull();
    expect(buildReport(run()).rightSizing).toBeNull();
  });
});
