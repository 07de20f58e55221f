// Human output: tables, ages, sizes, and user text made safe for a terminal.
import { formatDuration, formatSize } from '../model/units.js';

/** A plain-text table with a header row; columns padded to their widest cell; cells made printable. */
export function table(header: string[], cells: string[][]): string {
  const rows = cells.map((r) => r.map(printable));
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

/** A time to come or past, for a table: "2026-11-23 08:00 UTC (in 2h)" / "(1h ago)". */
export function when(t: Date | string, now = new Date()): string {
  const d = new Date(t);
  const ms = d.getTime() - now.getTime();
  const rel = ms >= 0 ? `in ${formatDuration(ms)}` : `${formatDuration(-ms)} ago`;
  return `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC (${rel})`;
}

export function size(bytes: number | null | undefined): string {
  return bytes === null || bytes === undefined ? '-' : formatSize(bytes);
}

/** Shortens a command line for a table cell. */
export function shortCommand(argv: string[], max = 40): string {
  const s = argv.map((a) => (/[\s"']/.test(a) ? JSON.stringify(a) : a)).join(' ');
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/**
 * Text from users (names, commands, env, reasons) made safe to print on a terminal: control characters
 * (C0, DEL, C1: an ESC can set the title or clear the screen) and bidirectional overrides (which make
 * text read backwards) are shown as escapes ("\u001b") instead of acting. JSON output is never passed
 * through this: it stays exact.
 */
export function printable(text: string): string {
  return text.replace(
    // eslint-disable-next-line no-control-regex
    /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
    (c) =>
      c === '\n'
        ? '\\n'
        : c === '\t'
          ? '\\t'
          : c === '\r'
            ? '\\r'
            : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** printable() for each line of a multi-line text of ours (its own line breaks are kept). */
export function printableLines(text: string): string {
  return text.split('\n').map(printable).join('\n');
}
