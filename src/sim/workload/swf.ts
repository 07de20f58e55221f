// Standard Workload Format (SWF) traces from the Parallel Workloads Archive (shared/traces/README.md):
// one job per line, 18 whitespace-separated numeric fields, -1 = unknown, ';' starts a header comment.
import { gunzipSync } from 'node:zlib';
import { sortByArrival, WorkloadError, type SkipCounts, type Workload, type WorkloadJob } from './types.js';

const GiB = 1024 ** 3;

/** How SWF jobs become container requests. */
export interface SwfOptions {
  /** Multiplies arrival offsets: 0.5 submits the trace twice as fast. Default 1. */
  arrivalScale?: number;
  /** Multiplies run times. Default 1. */
  durationScale?: number;
  /** Keep only the first `limit` usable jobs (in file order). Default: all. */
  limit?: number;
  /** RAM per vcpu in bytes where the trace records no memory. Default 2 GiB (a compute-optimized ratio). */
  ramPerVcpu?: number;
  /** Which memory field to prefer when both are known: requested (field 10) or used (field 7). Default requested. */
  memory?: 'requested' | 'used';
  /** Priority given to every job (SWF has none). Default 500. */
  priority?: number;
  /** Whether jobs may run on preemptible instances. Default false. */
  preemptible?: boolean;
}

// Field numbers from the SWF definition (1-based in the README, 0-based here).
const F = {
  job: 0,
  submit: 1,
  runTime: 3,
  allocProcs: 4,
  avgCpuTime: 5,
  usedMemKB: 6,
  reqProcs: 7,
  reqTime: 8,
  reqMemKB: 9,
  status: 10,
  user: 11,
  executable: 13,
} as const;
const STATUS_CANCELLED = 5;

function positiveOption(v: number | undefined, name: string, dflt: number): number {
  if (v === undefined) return dflt;
  if (!Number.isFinite(v) || v <= 0)
    throw new WorkloadError(`${name}: expected a positive number, got ${String(v)}`);
  return v;
}

/** Parses SWF text. Unusable lines are skipped and counted, never fatal. */
export function parseSwf(text: string, options: SwfOptions = {}): Workload {
  const arrivalScale = positiveOption(options.arrivalScale, 'arrivalScale', 1);
  const durationScale = positiveOption(options.durationScale, 'durationScale', 1);
  const ramPerVcpu = positiveOption(options.ramPerVcpu, 'ramPerVcpu', 2 * GiB);
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  if (!(limit >= 0) || (Number.isFinite(limit) && !Number.isInteger(limit)))
    throw new WorkloadError(`limit: expected a whole number >= 0, got ${String(options.limit)}`);
  const priority = options.priority ?? 500;
  if (!Number.isInteger(priority) || priority < 1 || priority > 1000)
    throw new WorkloadError(
      `priority: expected a whole number from 1 to 1000, got ${String(options.priority)}`,
    );
  const preferUsed = (options.memory ?? 'requested') === 'used';
  if (options.memory !== undefined && options.memory !== 'used' && options.memory !== 'requested')
    throw new WorkloadError(`memory: expected "requested" or "used", got ${JSON.stringify(options.memory)}`);

  const skipped: SkipCounts = { malformed: 0, cancelled: 0, zeroRuntime: 0 };
  const examples: string[] = [];
  const skip = (reason: keyof SkipCounts, lineNo: number, why: string): void => {
    skipped[reason]++;
    if (examples.length < 5) examples.push(`line ${lineNo}: ${why}`);
  };

  const raw: Array<{
    id: string;
    submit: number;
    runTime: number;
    reqTime: number;
    user: number;
    procs: number;
    memKB: number;
    cpuS: number;
    usedKB: number;
    exe: number;
  }> = [];
  let lineNo = 0;
  let start = 0;
  // Walk lines by index rather than split(): a million-line trace need not exist twice in memory.
  while (start <= text.length && raw.length < limit) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const line = text.slice(start, end).trim();
    start = end + 1;
    lineNo++;
    if (line === '' || line.startsWith(';')) continue;
    const fields = line.split(/\s+/).map(Number);
    if (fields.length !== 18 || fields.some((f) => !Number.isFinite(f))) {
      skip(
        'malformed',
        lineNo,
        `expected 18 numeric fields, got ${fields.length === 18 ? 'a non-number' : fields.length}`,
      );
      continue;
    }
    const [submit, runTime, status] = [fields[F.submit]!, fields[F.runTime]!, fields[F.status]!];
    const alloc = fields[F.allocProcs]!;
    const procs = alloc > 0 ? alloc : fields[F.reqProcs]!;
    if (status === STATUS_CANCELLED) {
      skip('cancelled', lineNo, 'cancelled (status 5)');
      continue;
    }
    if (submit < 0 || procs <= 0 || runTime < 0) {
      skip(
        'malformed',
        lineNo,
        submit < 0 ? 'unknown submit time' : procs <= 0 ? 'unknown processors' : 'unknown run time',
      );
      continue;
    }
    if (runTime === 0) {
      skip('zeroRuntime', lineNo, 'zero run time');
      continue;
    }
    const used = fields[F.usedMemKB]!;
    const requested = fields[F.reqMemKB]!;
    const memKB = preferUsed ? (used > 0 ? used : requested) : requested > 0 ? requested : used;
    raw.push({
      id: String(fields[F.job]),
      submit,
      runTime,
      reqTime: fields[F.reqTime]!,
      user: fields[F.user]!,
      procs,
      memKB,
      cpuS: fields[F.avgCpuTime]!,
      usedKB: used,
      exe: fields[F.executable]!,
    });
  }

  let first = Number.POSITIVE_INFINITY;
  for (const r of raw) if (r.submit < first) first = r.submit;
  const jobs: WorkloadJob[] = raw.map((r) => ({
    id: r.id,
    arrival: Math.round((r.submit - first) * 1000 * arrivalScale),
    vcpus: r.procs,
    // SWF memory fields are per processor, in KB.
    ram: r.memKB > 0 ? Math.round(r.memKB * 1024 * r.procs) : Math.round(ramPerVcpu * r.procs),
    scratch: 0,
    gpus: 0,
    duration: Math.max(1, Math.round(r.runTime * 1000 * durationScale)),
    ...(r.user >= 0 ? { user: String(r.user) } : {}),
    ...(r.reqTime > 0 ? { requestedTime: Math.max(1, Math.round(r.reqTime * 1000 * durationScale)) } : {}),
    priority,
    preemptible: options.preemptible ?? false,
    // Field 14 numbers the application; right-sizing groups by it.
    ...(r.exe >= 0 ? { name: `exe-${r.exe}` } : {}),
    // Fields 6 and 7 are averages per processor: CPU seconds and used memory (KB).
    ...(r.cpuS >= 0 || r.usedKB >= 0
      ? {
          usage: {
            cpuSeconds: r.cpuS >= 0 ? r.cpuS * r.procs : null,
            peakRam: r.usedKB >= 0 ? Math.round(r.usedKB * 1024 * r.procs) : null,
          },
        }
      : {}),
  }));
  return { jobs: sortByArrival(jobs), workflows: [], skipped, skippedExamples: examples };
}

/** Decodes file contents, gunzipping when they start with the gzip magic bytes. */
export function decodeMaybeGzip(data: Buffer): string {
  const gz = data.length >= 2 && data[0] === 0x1f && data[1] === 0x8b;
  return (gz ? gunzipSync(data) : data).toString('utf8');
}
