// Shared list arguments: page size, cursor and priority range from the query string, range-checked.
import { ValidationError, type FieldProblem } from '../../model/request.js';

export function pageArgs(q: Record<string, string | undefined>): {
  limit: number;
  cursor?: string;
  priorityMin?: number;
  priorityMax?: number;
} {
  const problems: FieldProblem[] = [];
  const num = (name: string, min: number, max: number): number | undefined => {
    const v = q[name];
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max)
      problems.push({ field: name, problem: `expected a whole number from ${min} to ${max}` });
    return n;
  };
  const limit = num('limit', 1, 1000) ?? 100;
  const priorityMin = num('priority_min', 0, 1000);
  const priorityMax = num('priority_max', 0, 1000);
  if (problems.length) throw new ValidationError(problems);
  return { limit, cursor: q.cursor, priorityMin, priorityMax };
}
