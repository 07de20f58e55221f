// The overview: work by state, instances by type and what they do, spend now and today against the cap,
// the limits and cloud errors in force, and (admins) charts over the last hours.
import { startOfDayUtc } from '../../model/cost.js';
import type { DispatcherView, InstanceCounts, WorkCounts } from '../../store/dashboard.js';
import { duration, html, money, type Html } from '../html.js';
import { ownerOf, type View, type ViewContext } from '../view.js';

function stat(label: string, value: string | number, sub: Html | string = '', cls = ''): Html {
  return html`<div class="stat ${cls}">
    <div class="label">${label}</div>
    <div class="value">${value}</div>
    <div class="sub">${sub}</div>
  </div>`;
}

function workStats(w: WorkCounts): Html {
  return html`${stat('Queued', w.queued, w.placing > 0 ? `${w.placing} being placed` : 'none being placed', w.queued > 0 ? 'warn' : '')}
  ${stat('Running', w.running, 'containers')} ${stat('Finished (24 h)', w.last24h.success, 'succeeded', 'ok')}
  ${stat('Failed (24 h)', w.last24h.failed, `${w.last24h.cancelled} cancelled`, w.last24h.failed > 0 ? 'bad' : '')}`;
}

/** The tightest spend cap of the live dispatchers (null: none). */
function spendCap(ds: DispatcherView[]): number | null {
  const caps = ds
    .map((d) => d.view?.limits.max_spend_per_hour)
    .filter((c): c is number => typeof c === 'number');
  return caps.length === 0 ? null : caps.reduce((n, c) => n + c, 0);
}

function spendStats(
  perHour: number,
  today: number,
  hoursToday: number,
  cap: number | null,
  mine: boolean,
): Html {
  const nowSub =
    cap === null
      ? html`no spend cap`
      : html`<meter min="0" max="${cap}" value="${perHour}" high="${cap * 0.8}"></meter> of ${money(cap)}/h
          cap`;
  const todaySub = mine
    ? 'your share, since 00:00 UTC'
    : cap === null
      ? 'since 00:00 UTC'
      : html`<meter min="0" max="${cap * 24}" value="${today}"></meter> cap allows ${money(cap * hoursToday)}
          so far`;
  return html`${mine ? '' : stat('Spend now', `${money(perHour)}/h`, nowSub)}
  ${stat(mine ? 'Your cost today' : 'Spent today', money(today), todaySub)}`;
}

function instanceTable(rows: InstanceCounts[]): Html {
  if (rows.length === 0) return html`<p class="empty">No instances: they are created when work waits.</p>`;
  const cell = (n: number, cls: string) =>
    n === 0 ? html`<td class="num dim">0</td>` : html`<td class="num ${cls}">${n}</td>`;
  return html`<table class="data">
    <thead>
      <tr>
        <th>Type</th>
        <th class="num">Price/h</th>
        <th class="num">Booting</th>
        <th class="num">Idle</th>
        <th class="num">Busy</th>
        <th class="num">Draining</th>
        <th class="num">Held</th>
        <th class="num">Shutting down</th>
      </tr>
    </thead>
    <tbody>
      ${rows.map(
        (r) =>
          html`<tr>
            <td>${r.type}</td>
            <td class="num">${money(r.price)}</td>
            ${cell(r.booting, 'state-booting')}${cell(r.idle, 'state-idle')}${cell(r.busy, 'state-running')}${cell(r.draining, 'state-drain')}${cell(r.held, 'state-hold')}${cell(r.shutdown, 'state-shutdown')}
          </tr>`,
      )}
    </tbody>
  </table>`;
}

function limits(ds: DispatcherView[], live: number, perHour: number, now: Date): Html {
  if (ds.length === 0) return html`<p class="empty">No dispatcher is running: nothing will be scheduled.</p>`;
  return html`${ds.map((d) => {
    const v = d.view;
    if (!v) return html`<p><b>${d.id}</b>: no limits published yet.</p>`;
    const items: Html[] = [];
    const l = v.limits;
    items.push(
      html`<li>
        Instances:
        ${live}${l.max_instances === null ? ' (no cap)' : ` of at most ${l.max_instances}`}${l.min_instances > 0 ? `, at least ${l.min_instances} kept warm` : ''}
      </li>`,
    );
    items.push(
      html`<li>
        Spend:
        ${money(perHour)}/h${l.max_spend_per_hour === null ? ' (no cap)' : ` of at most ${money(l.max_spend_per_hour)}/h`}
      </li>`,
    );
    for (const [t, n] of Object.entries(l.max_instances_per_type))
      items.push(html`<li>At most ${n} × ${t}</li>`);
    const c = v.cloud;
    const errors: Html[] = [];
    if (c.quota_max_instances !== null)
      errors.push(html`<li class="bad">Cloud quota: at most ${c.quota_max_instances} instances for now</li>`);
    if (c.unavailable_types.length > 0)
      errors.push(html`<li class="bad">No capacity for: ${c.unavailable_types.join(', ')}</li>`);
    if (c.rate_limited_until && new Date(c.rate_limited_until) > now)
      errors.push(
        html`<li class="bad">
          Rate limited by the cloud for ${duration(new Date(c.rate_limited_until).getTime() - now.getTime())}
        </li>`,
      );
    return html`<div class="limits">
      <h3>${d.id} <span class="dim">(types: ${v.instance_types.map((t) => t.name).join(', ')})</span></h3>
      <ul>
        ${items}
      </ul>
      ${
        errors.length > 0
          ? html`<ul class="errors">
              ${errors}
            </ul>`
          : html`<p class="ok">No cloud errors in force.</p>`
      }
    </div>`;
  })}`;
}

export const overview: View = {
  nav: 'overview',
  charts: true,
  title: () => 'Overview',
  async body(v: ViewContext) {
    const { store, now } = v;
    const owner = ownerOf(v.principal);
    const today = startOfDayUtc(now);
    const [work, counts, perHour, ds] = await Promise.all([
      store.dashboard.work(owner, now),
      store.dashboard.instanceCounts(),
      store.dashboard.spendPerHour(),
      store.dashboard.dispatchers(now),
    ]);
    const spentToday =
      owner === null
        ? await store.dashboard.spendSince(today, now)
        : (await store.costs.summary({ from: today, to: now }, 'owner', owner, 1)).total;
    const live = counts.reduce(
      (n, c) => n + c.booting + c.idle + c.busy + c.draining + c.held + c.shutdown,
      0,
    );
    const hoursToday = (now.getTime() - today.getTime()) / 3_600_000;
    return html`<h1>Overview${owner === null ? '' : html` <span class="dim">· your work</span>`}</h1>
      <section class="stats">
        ${workStats(work)}${spendStats(perHour, spentToday, hoursToday, spendCap(ds), owner !== null)}
      </section>
      <div class="cols">
        <section class="card">
          <h2>Instances</h2>
          ${instanceTable(counts)}
        </section>
        <section class="card">
          <h2>Limits and cloud errors in force</h2>
          ${limits(ds, live, perHour, now)}
        </section>
      </div>
      ${
        owner === null
          ? html`<section class="card charts-card" id="charts-card" data-keep>
              <h2>
                Last hours
                <span class="range" data-range>
                  <button data-hours="1">1 h</button><button data-hours="6" aria-pressed="true">6 h</button
                  ><button data-hours="24">24 h</button></span
                >
              </h2>
              <div class="charts" id="charts" data-src="/dashboard/charts.json">
                <div class="chart" data-chart="queue"><h3>Queue depth</h3></div>
                <div class="chart" data-chart="instances"><h3>Instances by type</h3></div>
                <div class="chart" data-chart="spend"><h3>Spend per hour</h3></div>
              </div>
            </section>`
          : ''
      }`;
  },
};
