// report.html: one self-contained page (inline CSS and SVG, no scripts, no CDN) that reads offline.
import { formatDuration } from '../../model/units.js';
import type { Report } from './build.js';

const W = 640;
const H = 200;
const PAD = { left: 48, right: 12, top: 12, bottom: 28 };

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A number with at most `digits` decimals and no trailing zeros (stable across runs). */
function num(x: number | null, digits = 2): string {
  if (x === null) return '–';
  const text = x.toFixed(digits);
  return text.includes('.') ? text.replace(/\.?0+$/, '') : text;
}

function secs(x: number | null): string {
  return x === null ? '–' : formatDuration(x * 1000);
}

/** "Nice" axis maximum: 1, 2 or 5 times a power of ten, at least `max`. */
function niceMax(max: number): number {
  if (max <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

/** A step chart of per-bucket values over the run's period. */
function stepChart(title: string, values: number[], bucketSeconds: number): string {
  const top = niceMax(Math.max(0, ...values));
  const iw = W - PAD.left - PAD.right;
  const ih = H - PAD.top - PAD.bottom;
  const x = (i: number) => PAD.left + (i / Math.max(1, values.length)) * iw;
  const y = (v: number) => PAD.top + ih - (v / top) * ih;
  let d = '';
  values.forEach((v, i) => {
    d += `${i === 0 ? 'M' : 'L'}${x(i).toFixed(1)},${y(v).toFixed(1)}H${x(i + 1).toFixed(1)}`;
  });
  const total = bucketSeconds * values.length;
  const ticks = [0, 0.25, 0.5, 0.75, 1]
    .map((f) => {
      const tx = (PAD.left + f * iw).toFixed(1);
      // The end labels align inwards so they are not clipped at the chart's edges.
      const anchor = f === 0 ? 'start' : f === 1 ? 'end' : 'middle';
      return `<text x="${tx}" y="${H - 8}" text-anchor="${anchor}">${f === 0 ? '0' : esc(secs(f * total))}</text>`;
    })
    .join('');
  return `<figure><figcaption>${esc(title)}</figcaption>
<svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(title)}">
<line class="axis" x1="${PAD.left}" y1="${PAD.top + ih}" x2="${W - PAD.right}" y2="${PAD.top + ih}"/>
<line class="axis" x1="${PAD.left}" y1="${PAD.top}" x2="${PAD.left}" y2="${PAD.top + ih}"/>
<text x="${PAD.left - 6}" y="${PAD.top + 4}" text-anchor="end">${top}</text>
<text x="${PAD.left - 6}" y="${PAD.top + ih}" text-anchor="end">0</text>${ticks}
<path class="series" d="${d}"/>
</svg></figure>`;
}

/** A bar chart of the wait-time histogram. */
function barChart(title: string, bars: Array<{ bucket: string; count: number }>): string {
  const top = niceMax(Math.max(0, ...bars.map((b) => b.count)));
  const iw = W - PAD.left - PAD.right;
  const ih = H - PAD.top - PAD.bottom;
  const bw = iw / bars.length;
  const rects = bars
    .map((b, i) => {
      const h = (b.count / top) * ih;
      const bx = PAD.left + i * bw;
      return (
        `<rect x="${(bx + 4).toFixed(1)}" y="${(PAD.top + ih - h).toFixed(1)}" width="${(bw - 8).toFixed(1)}" height="${h.toFixed(1)}"><title>${esc(b.bucket)}: ${b.count}</title></rect>` +
        `<text x="${(bx + bw / 2).toFixed(1)}" y="${H - 8}" text-anchor="middle">${esc(b.bucket)}</text>` +
        `<text x="${(bx + bw / 2).toFixed(1)}" y="${(PAD.top + ih - h - 3).toFixed(1)}" text-anchor="middle">${b.count}</text>`
      );
    })
    .join('\n');
  return `<figure><figcaption>${esc(title)}</figcaption>
<svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(title)}">
<line class="axis" x1="${PAD.left}" y1="${PAD.top + ih}" x2="${W - PAD.right}" y2="${PAD.top + ih}"/>
${rects}
</svg></figure>`;
}

function table(rows: Array<[string, string]>): string {
  return `<table>${rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join('')}</table>`;
}

/** One row per workflow: runs, critical path, makespan and its ratio to the critical path. */
function workflowTable(r: Report): string {
  const w = r.workflows;
  if (w === null) return '';
  const head = ['workflow', 'runs ok', 'tasks', 'critical path', 'makespan p50 / max', 'ratio p50 / max'];
  const rows = Object.entries(w.byWorkflow).map(([name, s]) => [
    name,
    `${s.succeeded} / ${s.runs}`,
    String(s.tasks),
    secs(s.criticalPath),
    `${secs(s.makespan.p50)} / ${secs(s.makespan.max)}`,
    `${num(s.ratio.p50, 3)} / ${num(s.ratio.max, 3)}`,
  ]);
  const tr = (cells: string[], tag: string) =>
    `<tr>${cells.map((c) => `<${tag}>${esc(c)}</${tag}>`).join('')}</tr>`;
  return `<h2>Workflows: makespan against the critical path</h2>
<table>${tr(head, 'th')}${rows.map((x) => tr(x, 'td')).join('')}</table>`;
}

/** Renders a report as a standalone HTML page. */
export function renderReportHtml(r: Report): string {
  const byType = Object.keys(r.instances.hoursByType).map((t): [string, string] => [
    t,
    `${num(r.instances.hoursByType[t]!, 3)} h, ${num(r.cost.byType[t]!, 4)}`,
  ]);
  const summary = table([
    ['policy', r.policy],
    ['seed', String(r.seed)],
    ['period', `${r.period.start} → ${r.period.end} (${secs(r.period.seconds)})`],
    [
      'containers',
      `${r.containers.total} (${r.containers.completed} completed, ${r.containers.neverStarted} never started)`,
    ],
    ['total cost', num(r.cost.total, 4)],
    ['cost lower bound', num(r.cost.lowerBound, 4)],
    ['cost / lower bound', num(r.cost.ratio, 3)],
    ['boot / work / idle cost', [r.cost.boot, r.cost.work, r.cost.idle].map((x) => num(x, 4)).join(' / ')],
    [
      'queue wait p50 / p90 / p99 / max',
      [r.wait.p50, r.wait.p90, r.wait.p99, r.wait.max].map(secs).join(' / '),
    ],
    ['makespan', secs(r.makespan)],
    ['instances created (interrupted)', `${r.instances.created} (${r.instances.interrupted})`],
    ['boot time p50 / max', `${secs(r.instances.bootSeconds.p50)} / ${secs(r.instances.bootSeconds.max)}`],
    ['utilization vcpu / ram', `${num(r.utilization.vcpu, 3)} / ${num(r.utilization.ram, 3)}`],
  ]);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Berth simulation: ${esc(r.policy)} (seed ${r.seed})</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:${W + 40}px;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{padding:2px 10px;border-bottom:1px solid #ddd;text-align:left}
th{font-weight:600}figure{margin:1.5em 0}figcaption{font-weight:600;margin-bottom:4px}
svg text{font-size:11px;fill:#555}.axis{stroke:#999}.series{fill:none;stroke:#1f6feb;stroke-width:1.5}
rect{fill:#1f6feb}
</style></head><body>
<h1>Berth simulation report</h1>
${summary}
${stepChart('Instances over time (maximum per interval)', r.series.instances, r.series.bucketSeconds)}
${stepChart('Queue length over time (maximum per interval)', r.series.queue, r.series.bucketSeconds)}
${barChart('Queue wait distribution (containers)', r.waitHistogram)}
${workflowTable(r)}
<h2>Instance hours and cost by type</h2>
${byType.length > 0 ? table(byType) : '<p>No instances.</p>'}
</body></html>
`;
}
