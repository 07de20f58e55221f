// Cost: what work cost over a window, grouped by owner, name series, instance type, request or label, as
// `berth cost` prints it (docs/COST.md). A user sees their own; an admin also what the instances cost.
import { startOfDayUtc } from '../../model/cost.js';
import { LABEL_KEY } from '../../model/labels.js';
import type { CostBy } from '../../store/cost.js';
import { duration, html, money, query, type Html } from '../html.js';
import { ownerOf, ViewError, type View, type ViewContext } from '../view.js';

const WINDOWS: Record<string, [string, (now: Date) => Date | null]> = {
  today: ['Today (UTC)', startOfDayUtc],
  '24h': ['Last 24 h', (now) => new Date(now.getTime() - 86_400_000)],
  '7d': ['Last 7 days', (now) => new Date(now.getTime() - 7 * 86_400_000)],
  all: ['All time', () => null],
};

const GROUPINGS: [string, string][] = [
  ['owner', 'Owner'],
  ['name', 'Name'],
  ['type', 'Instance type'],
  ['request', 'Request'],
];

function by(v: ViewContext): CostBy {
  const b = v.query.label ? `label:${v.query.label}` : (v.query.by ?? 'owner');
  if (GROUPINGS.some(([k]) => k === b)) return b as CostBy;
  if (b.startsWith('label:') && LABEL_KEY.test(b.slice(6))) return b as CostBy;
  throw new ViewError(
    400,
    'Bad grouping',
    `by: expected owner, name, type, request or label:KEY, got ${JSON.stringify(b)}`,
  );
}

export const cost: View = {
  nav: 'cost',
  title: () => 'Cost',
  async body(v: ViewContext) {
    const owner = ownerOf(v.principal);
    const w = v.query.window ?? 'today';
    const win = WINDOWS[w];
    if (!win)
      throw new ViewError(
        400,
        'Bad window',
        `window: expected today, 24h, 7d or all, got ${JSON.stringify(w)}`,
      );
    const group = by(v);
    const s = await v.store.costs.summary({ from: win[1](v.now), to: v.now }, group, owner, 100);
    const link = (params: Record<string, string>, label: string, current: boolean): Html =>
      html`<a
        href="/dashboard/cost${query({ window: w, by: group, ...params })}"
        ${current ? html` aria-current="page"` : ''}
        >${label}</a
      >`;
    const label = group.startsWith('label:') ? group.slice(6) : '';
    return html`<h1>Cost${owner === null ? '' : html` <span class="dim">· yours</span>`}</h1>
      <section class="card">
        <div class="toolbar">
          <nav class="tabs">
            ${Object.entries(WINDOWS).map(([k, [name]]) => link({ window: k }, name, k === w))}
          </nav>
          <nav class="tabs">${GROUPINGS.map(([k, name]) => link({ by: k }, name, k === group))}</nav>
          <form method="get" action="/dashboard/cost" class="search">
            <input type="hidden" name="window" value="${w}" />
            <input
              name="label"
              placeholder="label key, e.g. team"
              value="${label}"
              maxlength="63"
              pattern="[A-Za-z][A-Za-z0-9_.:/=+@-]*"
              data-by-label
            /><button>By label</button>
          </form>
        </div>
        <div class="stats">
          <div class="stat">
            <div class="label">Work</div>
            <div class="value">${money(s.total)}</div>
            <div class="sub">${s.group_count} ${s.group_count === 1 ? 'group' : 'groups'}</div>
          </div>
          ${
            s.instances
              ? html`<div class="stat">
                    <div class="label">Instances</div>
                    <div class="value">${money(s.instances.cost)}</div>
                    <div class="sub">
                      ${s.instances.by_type.map((t) => `${t.type} ${money(t.cost)}`).join(' · ') || 'none'}
                    </div>
                  </div>
                  <div class="stat">
                    <div class="label">Ran nothing</div>
                    <div class="value">${money(s.instances.unattributed)}</div>
                    <div class="sub">instances no container used</div>
                  </div>`
              : ''
          }
        </div>
        ${
          s.groups.length === 0
            ? html`<p class="empty">Nothing ran in this window.</p>`
            : html`<table class="data">
                <thead>
                  <tr>
                    <th>${GROUPINGS.find(([k]) => k === group)?.[1] ?? `Label ${label}`}</th>
                    <th class="num">Cost</th>
                    <th class="num">Running</th>
                    <th class="num">Boot and idle</th>
                    <th class="num">Containers</th>
                    <th class="num">Requests</th>
                    <th class="num">Run time</th>
                  </tr>
                </thead>
                <tbody>
                  ${s.groups.map(
                    (g) =>
                      html`<tr>
                        <td>
                          ${group === 'request' ? html`<a class="mono" href="/dashboard/requests/${g.key}">${g.key}</a>` : g.key}
                        </td>
                        <td class="num"><b>${money(g.cost)}</b></td>
                        <td class="num">${money(g.direct)}</td>
                        <td class="num">${money(g.overhead)}</td>
                        <td class="num">${g.containers}</td>
                        <td class="num">${g.requests}</td>
                        <td class="num">${duration(g.run_seconds * 1000)}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
        }
        <p class="hint">
          A container pays its share of its instance (the largest fraction of the CPUs, memory, scratch or
          GPUs it asked for) for the time it ran, plus the same proportion of its instance's boot and idle
          time, so the work adds up to what the instances cost. See docs/COST.md.
        </p>
      </section>`;
  },
};
