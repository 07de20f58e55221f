// compareReports: two reports side by side as a text table (`berth sim compare A.json B.json`).
import type { Report } from './build.js';

type Row = [label: string, a: number | null, b: number | null, digits: number];

function fmt(x: number | null, digits: number): string {
  return x === null ? '-' : x.toFixed(digits);
}

/** B relative to A: "+12.5%", "-3.0%", "=" when equal, "" when either side is missing or A is 0. */
function change(a: number | null, b: number | null): string {
  if (a === null || b === null) return '';
  if (a === b) return '=';
  if (a === 0) return '';
  const pct = ((b - a) / Math.abs(a)) * 100;
  return `${pct > 0 ? '+' : ''}${pct.toFixed(1)}%`;
}

/** A fixed-width table of the headline figures of `a` and `b`, with B's change relative to A. */
export function compareReports(a: Report, b: Report): string {
  // Reports written before a field existed lack it: shown as "-", never a crash.
  const opt = (x: number | null | undefined): number | null => x ?? null;
  const rows: Row[] = [
    ['containers', a.containers.total, b.containers.total, 0],
    ['completed', a.containers.completed, b.containers.completed, 0],
    ['never started', a.containers.neverStarted, b.containers.neverStarted, 0],
    ['total cost', a.cost.total, b.cost.total, 4],
    ['cost lower bound', a.cost.lowerBound, b.cost.lowerBound, 4],
    ['cost / lower bound', a.cost.ratio, b.cost.ratio, 3],
    ['boot cost', opt(a.cost.boot), opt(b.cost.boot), 4],
    ['work cost', opt(a.cost.work), opt(b.cost.work), 4],
    ['idle cost', a.cost.idle, b.cost.idle, 4],
    ['wait p50 (s)', a.wait.p50, b.wait.p50, 1],
    ['wait p90 (s)', a.wait.p90, b.wait.p90, 1],
    ['wait p99 (s)', a.wait.p99, b.wait.p99, 1],
    ['wait max (s)', a.wait.max, b.wait.max, 1],
    ['makespan (s)', a.makespan, b.makespan, 1],
    ['instances created', a.instances.created, b.instances.created, 0],
    ['instances interrupted', opt(a.instances.interrupted), opt(b.instances.interrupted), 0],
    [
      'workflow makespan / critical path p50',
      a.workflows?.ratio.p50 ?? null,
      b.workflows?.ratio.p50 ?? null,
      3,
    ],
    [
      'workflow makespan / critical path max',
      a.workflows?.ratio.max ?? null,
      b.workflows?.ratio.max ?? null,
      3,
    ],
    ['utilization vcpu', a.utilization.vcpu, b.utilization.vcpu, 3],
    ['utilization ram', a.utilization.ram, b.utilization.ram, 3],
  ];
  const types = [
    ...new Set([...Object.keys(a.instances.hoursByType), ...Object.keys(b.instances.hoursByType)]),
  ].sort();
  for (const t of types)
    rows.push([`hours ${t}`, a.instances.hoursByType[t] ?? 0, b.instances.hoursByType[t] ?? 0, 2]);

  const head = ['', `A: ${a.policy} (seed ${a.seed})`, `B: ${b.policy} (seed ${b.seed})`, 'B vs A'];
  const body = rows.map(([label, x, y, d]) => [label, fmt(x, d), fmt(y, d), change(x, y)]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n') + '\n';
}
