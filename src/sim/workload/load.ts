// Reading a workload file: the format comes from the name (.swf, .swf.gz, .json, .json.gz), gzip from
// the content's magic bytes.
import { readFileSync } from 'node:fs';
import { parseJsonWorkloadText } from './json.js';
import { decodeMaybeGzip, parseSwf, type SwfOptions } from './swf.js';
import { WorkloadError, type Workload } from './types.js';

/** The workload formats the simulator reads. */
export type WorkloadFormat = 'swf' | 'json';

/** Guesses the format from a file name; null when the name says nothing. */
export function formatOf(path: string): WorkloadFormat | null {
  const name = path.toLowerCase().replace(/\.gz$/, '');
  if (name.endsWith('.swf')) return 'swf';
  if (name.endsWith('.json')) return 'json';
  return null;
}

/** Reads a workload file. SWF options apply to SWF files only. Errors name the file. */
export function loadWorkload(path: string, options: SwfOptions & { format?: WorkloadFormat } = {}): Workload {
  const format = options.format ?? formatOf(path);
  if (format === null)
    throw new WorkloadError(
      `${path}: unknown workload format; expected a .swf, .swf.gz, .json or .json.gz file`,
    );
  let text: string;
  try {
    text = decodeMaybeGzip(readFileSync(path));
  } catch (err) {
    throw new WorkloadError(`${path}: cannot read: ${(err as Error).message}`);
  }
  try {
    return format === 'swf' ? parseSwf(text, options) : parseJsonWorkloadText(text);
  } catch (err) {
    if (err instanceof WorkloadError) throw new WorkloadError(`${path}: ${err.message}`);
    throw err;
  }
}
