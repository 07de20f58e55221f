// Human output: tables, ages, sizes.
import { formatDuration, formatSize } from '../model/units.js';

/** A plain-text table with a header row; columns padded to their widest cell. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

export function age(from: Date | string, now = new Date()): string {
  return formatDuration(Math.max(0, now.getTime() - new Date(from).getTime()));
}

export function size(bytes: number | null | undefined): string {
  return bytes === null || bytes === undefined ? '-' : formatSize(bytes);
}

/** Shortens a command line for a table cell. */
export function shortCommand(argv: string[], max = 40): string {
  const s = argv.map((a) => (/[\s"']/.test(a) ? JSON.stringify(a) : a)).join(' ');
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
