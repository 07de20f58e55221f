// Labels on requests (`berth submit --label team=x`, API field `labels`): free key=value pairs that cost is
// summed by (docs/COST.md), and that become the tags of an instance created for containers agreeing on
// them, for the cloud's own cost allocation. Keys and values are limited to what every cloud's tags accept.
import type { FieldProblem } from './request.js';

/** A letter, then letters, digits and `_ . : / = + @ -`; at most 63 characters (GCE's label limit). */
export const LABEL_KEY = /^[A-Za-z][A-Za-z0-9_.:/=+@-]{0,62}$/;
/** Letters, digits, spaces and `_ . : / = + @ -` (EC2's tag characters); at most 128 characters. */
export const LABEL_VALUE = /^[A-Za-z0-9 _.:/=+@-]{0,128}$/;
/** Most labels on one request (an instance also carries Berth's own tags; EC2 allows 50 in all). */
export const MAX_LABELS = 20;
/** Key prefixes a label may not use: Berth's own instance tags, and the cloud's reserved ones. */
export const RESERVED_LABEL_PREFIXES = ['berth-', 'aws:'] as const;

export type Labels = Record<string, string>;

const KEY_PROBLEM = 'expected a key of a letter, then letters, digits and _.:/=+@- (at most 63 characters)';
const VALUE_PROBLEM = 'expected a value of letters, digits, spaces and _.:/=+@- (at most 128 characters)';

/** Checks a request's labels; returns them (sorted by key) and the problems found, fields named. */
export function checkLabels(value: unknown, field: string): { labels: Labels; problems: FieldProblem[] } {
  const problems: FieldProblem[] = [];
  const labels: Labels = {};
  if (value === undefined || value === null) return { labels, problems };
  if (typeof value !== 'object' || Array.isArray(value)) {
    problems.push({
      field,
      problem: 'expected an object of key: "value" strings, e.g. {"team": "genomics"}',
    });
    return { labels, problems };
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_LABELS)
    problems.push({ field, problem: `expected at most ${MAX_LABELS} labels, got ${entries.length}` });
  for (const [k, v] of entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const reserved = RESERVED_LABEL_PREFIXES.find((p) => k.toLowerCase().startsWith(p));
    if (!LABEL_KEY.test(k)) problems.push({ field: `${field}.${k.slice(0, 80)}`, problem: KEY_PROBLEM });
    else if (reserved)
      problems.push({ field: `${field}.${k}`, problem: `the prefix "${reserved}" is reserved` });
    else if (typeof v !== 'string' || !LABEL_VALUE.test(v))
      problems.push({ field: `${field}.${k}`, problem: VALUE_PROBLEM });
    else labels[k] = v;
  }
  return { labels, problems };
}

/** Parses one `--label KEY=VALUE` flag; throws with what was expected. */
export function parseLabelFlag(s: string): [string, string] {
  const eq = s.indexOf('=');
  if (eq <= 0) throw new Error(`--label: expected KEY=VALUE, e.g. team=genomics, got ${JSON.stringify(s)}`);
  return [s.slice(0, eq), s.slice(eq + 1)];
}

/** The labels every one of `sets` carries with the same value (none when `sets` is empty). */
export function agreedLabels(sets: Labels[]): Labels {
  if (sets.length === 0) return {};
  const [first, ...rest] = sets;
  const agreed: Labels = {};
  for (const [k, v] of Object.entries(first!)) if (rest.every((s) => s[k] === v)) agreed[k] = v;
  return agreed;
}
