// Whole numbers from the query string: the schema checks their digits, these their range (a pattern
// cannot say "at most 2147483647"), so no number reaches a column that cannot hold it.
import { ValidationError, type FieldProblem } from '../../model/request.js';

/** Reads whole-number query parameters by name and range; throws one ValidationError for every bad one. */
export function intQuery<K extends string>(
  q: Partial<Record<string, string>>,
  ranges: Record<K, [min: number, max: number]>,
): Partial<Record<K, number>> {
  const problems: FieldProblem[] = [];
  const out: Partial<Record<K, number>> = {};
  for (const [name, [min, max]] of Object.entries(ranges) as [K, [number, number]][]) {
    const v = q[name];
    if (v === undefined) continue;
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max)
      problems.push({
        field: name,
        problem: `expected a whole number from ${min} to ${max}, got ${JSON.stringify(v)}`,
      });
    else out[name] = n;
  }
  if (problems.length) throw new ValidationError(problems);
  return out;
}

/** Shared list arguments: page size, cursor and priority range. */
export function pageArgs(q: Partial<Record<string, string>>): {
  limit: number;
  cursor?: string;
  priorityMin?: number;
  priorityMax?: number;
} {
  const n = intQuery(q, { limit: [1, 1000], priority_min: [0, 1000], priority_max: [0, 1000] });
  return {
    limit: n.limit ?? 100,
    cursor: q.cursor,
    priorityMin: n.priority_min,
    priorityMax: n.priority_max,
  };
}
