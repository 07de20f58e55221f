// Sizes and durations as people write them ("4GiB", "90s") and as the code keeps them (bytes, ms).

/** A user-facing parse failure: `expected` says what would have been accepted. */
export class UnitError extends Error {
  constructor(
    readonly expected: string,
    readonly got: unknown,
  ) {
    super(`expected ${expected}, got ${JSON.stringify(got)}`);
  }
}

/**
 * Runs a unit parser on the value at `path`; a UnitError becomes the caller's own error type with the
 * path in front ("jobs[3].ram: expected a size such as 4GiB ..."). Other errors pass through.
 */
export function parseAt<T>(
  path: string,
  parse: (v: unknown) => T,
  value: unknown,
  wrap: new (message: string) => Error,
): T {
  try {
    return parse(value);
  } catch (err) {
    if (err instanceof UnitError) throw new wrap(`${path}: ${err.message}`);
    throw err;
  }
}

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1e3,
  kb: 1e3,
  m: 1e6,
  mb: 1e6,
  g: 1e9,
  gb: 1e9,
  t: 1e12,
  tb: 1e12,
  ki: 1024,
  kib: 1024,
  mi: 1024 ** 2,
  mib: 1024 ** 2,
  gi: 1024 ** 3,
  gib: 1024 ** 3,
  ti: 1024 ** 4,
  tib: 1024 ** 4,
};

const SIZE_EXPECTED = 'a size such as 4GiB, 512MiB or a number of bytes';

/** Parses a size ("4GiB", "512MiB", "1.5G", 1024) to a whole number of bytes. */
export function parseSize(value: unknown): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value >= 0 && Number.isSafeInteger(Math.round(value)))
      return Math.round(value);
    throw new UnitError(SIZE_EXPECTED, value);
  }
  if (typeof value !== 'string') throw new UnitError(SIZE_EXPECTED, value);
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(value);
  const unit = m ? SIZE_UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new UnitError(SIZE_EXPECTED, value);
  const bytes = Math.round(Number(m[1]) * unit);
  if (!Number.isSafeInteger(bytes)) throw new UnitError(SIZE_EXPECTED, value);
  return bytes;
}

/** Formats bytes with the largest binary unit that keeps at least one whole unit ("1.5GiB"). */
export function formatSize(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  const text = i === 0 ? String(v) : v.toFixed(2).replace(/\.?0+$/, '');
  return `${text}${units[i]}`;
}

const DURATION_UNITS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

const DURATION_EXPECTED = 'a duration such as 90s, 10m, 1h30m or a number of seconds';

/**
 * The longest duration anything takes: 100 years. Longer ones (or "1e400", Infinity) made dates past
 * JavaScript's range (an Invalid Date, a RangeError far from the option that caused it) or an infinite
 * timer; every option, flag and field has its own, smaller limit where one matters.
 */
const MAX_DURATION_MS = 36_500 * 86_400_000;

/** Parses a duration ("90s", "1h30m", "250ms", or a number of seconds) to milliseconds. */
export function parseDuration(value: unknown): number {
  const ms = durationMs(value);
  if (ms > MAX_DURATION_MS) throw new UnitError(`${DURATION_EXPECTED}, at most 36500d`, value);
  return ms;
}

function durationMs(value: unknown): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value >= 0) return Math.round(value * 1000);
    throw new UnitError(DURATION_EXPECTED, value);
  }
  if (typeof value !== 'string' || value.trim() === '') throw new UnitError(DURATION_EXPECTED, value);
  const s = value.trim();
  if (/^\d+(\.\d+)?$/.test(s)) return Math.round(Number(s) * 1000);
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;
  let total = 0;
  let pos = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(s)) !== null) {
    total += Number(m[1]) * DURATION_UNITS[m[2]!]!;
    pos = re.lastIndex;
  }
  if (pos !== s.length) throw new UnitError(DURATION_EXPECTED, value);
  return Math.round(total);
}

/** Formats milliseconds compactly ("1h2m", "45s", "250ms"). */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  let s = Math.round(ms / 1000);
  const parts: string[] = [];
  for (const [unit, size] of [
    ['d', 86400],
    ['h', 3600],
    ['m', 60],
  ] as const) {
    if (s >= size) {
      parts.push(`${Math.floor(s / size)}${unit}`);
      s %= size;
    }
  }
  if (s > 0 || parts.length === 0) parts.push(`${s}s`);
  return parts.slice(0, 2).join('');
}

const VCPU_EXPECTED = 'a positive number of CPUs such as 1, 0.5 or 16';

/** Parses a CPU count; fractions are allowed down to a thousandth of a CPU. */
export function parseVcpus(value: unknown): number {
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isFinite(n) || n <= 0 || n > 100_000)
    throw new UnitError(VCPU_EXPECTED, value);
  return Math.round(n * 1000) / 1000;
}

/** Parses an RFC 3339 timestamp (or a Date) to a Date. */
export function parseTime(value: unknown): Date {
  if (value instanceof Date && !Number.isNaN(value.getTime())) return value;
  if (
    typeof value === 'string' &&
    /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(value)
  ) {
    const d = new Date(value);
    if (!Number.isNaN(d.getTime())) return d;
  }
  throw new UnitError('an RFC 3339 time such as 2026-01-01T00:00:00Z', value);
}
