// Server-rendered HTML with plain template literals: every interpolated value is escaped unless it is
// already Html (made by this tag or raw()), so a container name or a log line can never become markup.
import { formatMoney } from '../model/cost.js';
import { formatDuration, formatSize } from '../model/units.js';

/** Markup that is safe to insert as is. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export function escape(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

type Value = Html | string | number | boolean | null | undefined | Value[];

function render(v: Value): string {
  if (v === null || v === undefined || v === false) return '';
  if (v instanceof Html) return v.text;
  if (Array.isArray(v)) return v.map(render).join('');
  return escape(String(v));
}

/**
 * The literal parts of a template without their indentation (a newline and the spaces after it become one
 * newline, which HTML shows as the same single space): pages are a third of the size. Values are kept as is.
 */
const compact = new WeakMap<TemplateStringsArray, string[]>();
function literals(strings: TemplateStringsArray): string[] {
  let parts = compact.get(strings);
  if (!parts) {
    parts = strings.map((s) => s.replace(/\n\s+/g, '\n'));
    compact.set(strings, parts);
  }
  return parts;
}

/** html`<p>${name}</p>`: values escaped, arrays joined, null/undefined/false left out. */
export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  const parts = literals(strings);
  let out = parts[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + parts[i + 1]!;
  return new Html(out);
}

/** Markup from a trusted source (never from data). */
export function raw(s: string): Html {
  return new Html(s);
}

/** An amount of money in the price unit. */
export const money = (x: number | null | undefined): string =>
  x === null || x === undefined ? '–' : formatMoney(x);

/** A duration in ms as people read it ("3m20s"), or – for none. */
export const duration = (ms: number | null | undefined): string =>
  ms === null || ms === undefined ? '–' : formatDuration(Math.max(0, ms));

export const bytes = (n: number | null | undefined): string =>
  n === null || n === undefined ? '–' : formatSize(n);

/** A time element the page's script keeps relative ("2m ago"); readable without the script too. */
export function time(t: Date | string | null | undefined, now: Date): Html {
  if (t === null || t === undefined) return html`–`;
  const d = new Date(t);
  return html`<time datetime="${d.toISOString()}" title="${d.toISOString()}"
    >${duration(now.getTime() - d.getTime())} ago</time
  >`;
}

/** A query string from parameters (undefined ones left out), for links. */
export function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}
