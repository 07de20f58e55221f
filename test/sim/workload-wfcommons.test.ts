// WfCommons workflow instances (1.5 split layout and the 1.4 flat one) → simulator workflows.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { loadWorkflow, loadWorkload } from '../../src/sim/workload/load.js';
import { WorkloadError } from '../../src/sim/workload/types.js';
import { criticalPath, parseWfCommons, workflowName } from '../../src/sim/workload/wfcommons.js';
import { itIf } from '../helpers/needs.js';
import { diamond } from './helpers.js';

const GiB = 1024 ** 3;
const WORKFLOWS = fileURLToPath(new URL('../../../shared/traces/workflows/', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'berth-wfcommons-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('WfCommons 1.5 (specification + execution)', () => {
  const w = parseWfCommons(diamond(), 'diamond');

  it('orders tasks parents first and resolves parents and children to indices', () => {
    expect(w.tasks.map((t) => t.id)).toEqual([
      'split_ID0000001',
      'left_ID0000002',
      'right_ID0000003',
      'merge_ID0000004',
    ]);
    expect(w.tasks.map((t) => t.parents)).toEqual([[], [0], [0], [1, 2]]);
    expect(w.tasks.map((t) => t.children)).toEqual([[1, 2], [3], [3], []]);
  });

  it('asks for the recorded cores and memory, or the defaults; keeps usage for right-sizing', () => {
    const [split, left, right, merge] = w.tasks;
    expect(split).toMatchObject({ name: 'split', vcpus: 2, ram: 1e9, duration: 10_000 });
    expect(split!.usage).toEqual({ cpuSeconds: 15, peakRam: 1e9 });
    // Nothing recorded: 1 vcpu, 2 GiB, and no usage.
    expect(left).toMatchObject({ name: 'left', vcpus: 1, ram: 2 * GiB, duration: 100_400 });
    expect(left!.usage).toEqual({ cpuSeconds: null, peakRam: null });
    expect(right).toMatchObject({ name: 'STEP.RIGHT', duration: 30_000 });
    expect(right!.usage).toEqual({ cpuSeconds: 15, peakRam: null });
    // A zero run time (the file's rounding) becomes 1 ms.
    expect(merge).toMatchObject({ name: 'merge', ram: 5e8, duration: 1 });
  });

  it('the critical path is the longest path of run times: 10 + 100.4 + 0.001 s', () => {
    expect(w.criticalPath).toBe(10_000 + 100_400 + 1);
    expect(criticalPath(w.tasks)).toBe(w.criticalPath);
  });

  it('task defaults can be changed', () => {
    const x = parseWfCommons(diamond(), 'd', { vcpus: 4, ram: GiB });
    expect(x.tasks[1]).toMatchObject({ vcpus: 4, ram: GiB });
  });

  it('rejects what cannot be simulated, naming the task and field', () => {
    // The mutations break the instance's shape on purpose: typed loosely.
    /* eslint-disable @typescript-eslint/no-explicit-any */
    const bad = (mutate: (v: any) => void): string => {
      const v = diamond() as any;
      /* eslint-enable @typescript-eslint/no-explicit-any */
      mutate(v);
      try {
        parseWfCommons(v, 'x');
      } catch (err) {
        expect(err).toBeInstanceOf(WorkloadError);
        return (err as Error).message;
      }
      throw new Error('expected an error');
    };
    expect(bad((v) => (v.workflow.specification.tasks[0].parents = ['nope']))).toBe(
      'workflow.specification.tasks[0].parents[0]: unknown task "nope"',
    );
    expect(bad((v) => (v.workflow.specification.tasks[1].parents = ['merge_ID0000004']))).toMatch(
      /is on a cycle of parents/,
    );
    expect(bad((v) => delete v.workflow.execution.tasks[2].runtimeInSeconds)).toBe(
      "workflow.execution.tasks[2].runtimeInSeconds: required (the task's run time)",
    );
    expect(bad((v) => (v.workflow.execution.tasks[0].coreCount = -1))).toBe(
      'workflow.execution.tasks[0].coreCount: expected a number >= 0, got -1',
    );
    expect(bad((v) => v.workflow.execution.tasks.pop())).toBe(
      'workflow.specification.tasks[0]: task "merge_ID0000004" has no record in workflow.execution.tasks',
    );
    expect(bad((v) => (v.workflow.specification.tasks[2].id = 'split_ID0000001'))).toMatch(
      /tasks\[2\]\.id: duplicate task id "split_ID0000001"/,
    );
    expect(bad((v) => delete v.workflow.execution)).toMatch(/workflow\.execution\.tasks: required/);
    expect(() => parseWfCommons({ jobs: [] }, 'x')).toThrow(/expected a WfCommons instance/);
  });
});

describe('WfCommons 1.4 and older (one task list)', () => {
  it('reads parents by name, cores, memory in KB (1.3) and categories', () => {
    const w = parseWfCommons(
      {
        schemaVersion: '1.3',
        workflow: {
          jobs: [
            { name: 'b_ID2', type: 'compute', runtime: 20, cores: 4, memory: 1024, parents: ['a_ID1'] },
            { name: 'a_ID1', category: 'fetch', type: 'compute', runtimeInSeconds: 5, parents: [] },
          ],
        },
      },
      'old',
    );
    expect(w.tasks.map((t) => [t.id, t.name, t.vcpus, t.ram, t.duration])).toEqual([
      ['a_ID1', 'fetch', 1, 2 * GiB, 5000],
      ['b_ID2', 'b', 4, 1024 * 1024, 20_000],
    ]);
    expect(w.tasks[1]!.parents).toEqual([0]);
    expect(w.criticalPath).toBe(25_000);
  });
});

describe('loading workflow files', () => {
  it('a WfCommons file given as a workload is one run at time 0, named after the file', () => {
    const path = join(dir, 'diamond-001.json.gz');
    writeFileSync(path, gzipSync(JSON.stringify(diamond())));
    expect(workflowName(path)).toBe('diamond-001');
    const w = loadWorkload(path);
    expect(w.jobs).toEqual([]);
    expect(w.workflows).toHaveLength(1);
    expect(w.workflows[0]).toMatchObject({
      id: 'diamond-001/1',
      arrival: 0,
      priority: 500,
      preemptible: false,
    });
    expect(w.workflows[0]!.workflow.tasks).toHaveLength(4);
  });

  it('errors name the file', () => {
    const path = join(dir, 'broken.json');
    writeFileSync(path, JSON.stringify({ workflow: { specification: { tasks: [] } } }));
    expect(() => loadWorkload(path)).toThrow(
      `${path}: workflow.specification.tasks: expected a non-empty array`,
    );
  });

  const shared = existsSync(WORKFLOWS) ? null : `${WORKFLOWS} not found (shared/ must sit beside the repo)`;
  itIf(shared)('reads every shared workflow: task counts as documented, parents before children', () => {
    const counts: Record<string, number> = {
      '1000genome-chameleon-8ch-250k-001': 328,
      'blast-chameleon-large-001': 103,
      'epigenomics-chameleon-hep-4seq-100k-001': 347,
      'srasearch-chameleon-50a-005': 104,
      'rnaseq-dirt02-001': 197,
      'sarek-dirt02-001': 26,
    };
    for (const [name, n] of Object.entries(counts)) {
      const w = loadWorkflow(join(WORKFLOWS, `${name}.json.gz`));
      expect(w.name).toBe(name);
      expect(w.tasks).toHaveLength(n);
      w.tasks.forEach((t, i) => {
        for (const p of t.parents) expect(p).toBeLessThan(i);
        expect(t.vcpus).toBeGreaterThan(0);
        expect(t.duration).toBeGreaterThan(0);
      });
      expect(w.criticalPath).toBeGreaterThan(0);
      expect(w.criticalPath).toBeLessThanOrEqual(w.tasks.reduce((s, t) => s + t.duration, 0));
    }
    // Nextflow records memory and CPU use; Pegasus 1000genome only CPU.
    const rnaseq = loadWorkflow(join(WORKFLOWS, 'rnaseq-dirt02-001.json.gz'));
    // (4 of its 197 tasks record memoryInBytes 0: not measured, so the default request and no peak.)
    expect(rnaseq.tasks.every((t) => t.usage.cpuSeconds !== null)).toBe(true);
    const unmeasured = rnaseq.tasks.filter((t) => t.usage.peakRam === null);
    expect(unmeasured).toHaveLength(4);
    expect(unmeasured.every((t) => t.ram === 2 * GiB)).toBe(true);
    const genome = loadWorkflow(join(WORKFLOWS, '1000genome-chameleon-8ch-250k-001.json.gz'));
    expect(genome.tasks[0]!.name).toBe('individuals');
    expect(genome.tasks.every((t) => t.usage.peakRam === null && t.ram === 2 * GiB)).toBe(true);
  });
});
