// Reading a workload file: the format comes from the name (.swf, .swf.gz, .json, .json.gz), gzip from
// the content's magic bytes. A JSON file is one of three things, told apart by its top-level keys:
// Berth's job list ({"jobs": [...]} or an array), a WfCommons workflow instance ({"workflow": {...}},
// one run at time 0), or a workflow mix ({"workflows": [...]}, docs/SIMULATOR.md).
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseJsonText, parseJsonWorkload } from './json.js';
import { isMix, parseMix } from './mix.js';
import { decodeMaybeGzip, parseSwf, type SwfOptions } from './swf.js';
import { WorkloadError, type Workflow, type Workload } from './types.js';
import { isWfCommons, parseWfCommons, workflowName, type TaskDefaults } from './wfcommons.js';

/** The workload formats the simulator reads. */
export type WorkloadFormat = 'swf' | 'json';

/** Guesses the format from a file name; null when the name says nothing. */
export function formatOf(path: string): WorkloadFormat | null {
  const name = path.toLowerCase().replace(/\.gz$/, '');
  if (name.endsWith('.swf')) return 'swf';
  if (name.endsWith('.json')) return 'json';
  return null;
}

function readText(path: string): string {
  try {
    return decodeMaybeGzip(readFileSync(path));
  } catch (err) {
    throw new WorkloadError(`${path}: cannot read: ${(err as Error).message}`);
  }
}

/** Prefixes a WorkloadError with the file it came from. */
function inFile<T>(path: string, f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (err instanceof WorkloadError) throw new WorkloadError(`${path}: ${err.message}`);
    throw err;
  }
}

/** Reads one WfCommons file as a workflow (used for a single-workflow workload and by mixes). */
export function loadWorkflow(path: string, defaults?: TaskDefaults): Workflow {
  const value = inFile(path, () => parseJsonText(readText(path)));
  return inFile(path, () => parseWfCommons(value, workflowName(path), defaults));
}

const NO_SKIPS = { skipped: { malformed: 0, cancelled: 0, zeroRuntime: 0 }, skippedExamples: [] };

function jsonWorkload(path: string, value: unknown): Workload {
  if (isWfCommons(value)) {
    const workflow = parseWfCommons(value, workflowName(path));
    return {
      jobs: [],
      workflows: [{ id: `${workflow.name}/1`, workflow, arrival: 0, priority: 500, preemptible: false }],
      ...NO_SKIPS,
    };
  }
  if (isMix(value)) {
    // A file listed several times (or with the same defaults in several entries) is read once.
    const cache = new Map<string, Workflow>();
    const base = dirname(resolve(path));
    const workflows = parseMix(value, (file, defaults) => {
      const full = resolve(base, file);
      const key = `${full}|${defaults.vcpus}|${defaults.ram}`;
      let wf = cache.get(key);
      if (wf === undefined) cache.set(key, (wf = loadWorkflow(full, defaults)));
      return wf;
    });
    return { jobs: [], workflows, ...NO_SKIPS };
  }
  return parseJsonWorkload(value);
}

/** Reads a workload file. SWF options apply to SWF files only. Errors name the file. */
export function loadWorkload(path: string, options: SwfOptions & { format?: WorkloadFormat } = {}): Workload {
  const format = options.format ?? formatOf(path);
  if (format === null)
    throw new WorkloadError(
      `${path}: unknown workload format; expected a .swf, .swf.gz, .json or .json.gz file`,
    );
  const text = readText(path);
  return inFile(path, () =>
    format === 'swf' ? parseSwf(text, options) : jsonWorkload(path, parseJsonText(text)),
  );
}
