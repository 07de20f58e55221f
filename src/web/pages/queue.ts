// Waiting work: the containers being placed, then the queue in the scheduler's order, a page at a time,
// each with why it waits (the scheduler's status text), the instance type it waits for, and its age.
import { SCHEDULER_OPTIONS } from '../../config/scheduler.js';
import { buildShape, compareTypes, type ShapeConfig } from '../../dispatch/scheduler/fitting.js';
import type { SnapshotContainer } from '../../dispatch/scheduler/types.js';
import type { InstanceType } from '../../model/types.js';
import { decodeQueueCursor, type DispatcherView, type WaitingContainer } from '../../store/dashboard.js';
import { bytes, duration, html, query, type Html } from '../html.js';
import { ownerOf, ViewError, type View, type ViewContext } from '../view.js';

export const QUEUE_PAGE = 50;

/** A live dispatcher's instance types (cheapest first) and the scheduler keys that pick a container's type. */
interface Offer {
  types: InstanceType[];
  config: ShapeConfig;
}

/** What each live dispatcher offers, as it published it (keys a dispatcher older than them leaves out: their defaults). */
function offered(ds: DispatcherView[]): Offer[] {
  const defaults = SCHEDULER_OPTIONS.defaults();
  return ds.flatMap((d) => {
    if (d.view === null || d.view.instance_types.length === 0) return [];
    const l = d.view.limits;
    const types = d.view.instance_types.map((t) => ({ ...t, providerType: t.name })).sort(compareTypes);
    const config: ShapeConfig = {
      ramOverhead: l.ram_overhead ?? defaults.ramOverhead,
      maxPriceFactor: l.max_price_factor ?? defaults.maxPriceFactor,
      maxSpendPerHour: l.max_spend_per_hour,
      onDemandAfterInterruptions:
        l.on_demand_after_interruptions === undefined
          ? defaults.onDemandAfterInterruptions
          : l.on_demand_after_interruptions,
      shareRule: l.share_rule ?? defaults.shareRule,
    };
    return [{ types, config }];
  });
}

/**
 * The type the scheduler would create for the container (DESIGN §6.2 rule 2): the cheapest any live
 * dispatcher would create under its own configuration, or why none can.
 */
function waitsFor(c: WaitingContainer, offers: Offer[]): Html {
  if (offers.length === 0) return html`<span class="dim">–</span>`;
  const snap: SnapshotContainer = {
    id: c.id,
    state: c.state,
    priority: c.priority,
    queuedAt: new Date(c.queued_at),
    vcpus: c.vcpus,
    ram: c.ram,
    scratch: c.scratch,
    gpus: c.gpus,
    preemptible: c.preemptible,
    instanceTypes: c.instance_types,
    instance: c.instance_id,
    lockCount: 0,
    owner: c.owner,
    spotInterruptions: c.spot_interruptions,
  };
  // Rule 2's type: the cheapest that fits (the share rule and price factor need the live instances).
  let best: InstanceType | null = null;
  for (const o of offers) {
    const shape = buildShape(snap, o.types, o.config);
    const t = shape.unsatisfiable === null ? shape.fitting[0] : undefined;
    if (t !== undefined && (best === null || compareTypes(t, best) < 0)) best = t;
  }
  return best !== null ? html`${best.name}` : html`<span class="bad">none fits</span>`;
}

function rows(items: WaitingContainer[], v: ViewContext, o: Offer[], admin: boolean): Html {
  return html`${items.map(
    (c) =>
      html`<tr id="${c.id}">
        <td>
          <a href="/dashboard/requests/${c.request_id}#${c.id}">${c.name || c.request_id}</a>
          <div class="dim mono">${c.id}</div>
        </td>
        ${admin ? html`<td>${c.owner}</td>` : ''}
        <td class="num">${c.priority}</td>
        <td class="num">
          ${c.vcpus} CPU ·
          ${bytes(c.ram)}${c.gpus > 0 ? ` · ${c.gpus} GPU` : ''}${c.preemptible ? html` <span class="badge">spot ok</span>` : ''}
        </td>
        <td>${waitsFor(c, o)}</td>
        <td class="num">${duration(v.now.getTime() - new Date(c.queued_at).getTime())}</td>
        <td class="reason">
          ${c.run_after && new Date(c.run_after) > v.now ? html`<span class="badge">after ${new Date(c.run_after).toISOString().slice(0, 16).replace('T', ' ')}</span> ` : ''}${c.scheduling_status ?? html`<span class="dim">not looked at yet</span>`}
        </td>
      </tr>`,
  )}`;
}

function table(body: Html, admin: boolean): Html {
  return html`<table class="data queue">
    <thead>
      <tr>
        <th>Request / container</th>
        ${admin ? html`<th>Owner</th>` : ''}
        <th class="num">Priority</th>
        <th class="num">Asks for</th>
        <th>Waits for</th>
        <th class="num">Age</th>
        <th>Why it waits</th>
      </tr>
    </thead>
    <tbody>
      ${body}
    </tbody>
  </table>`;
}

export const queue: View = {
  nav: 'queue',
  title: () => 'Waiting work',
  async body(v: ViewContext) {
    const owner = ownerOf(v.principal);
    const admin = owner === null;
    const cursor = v.query.after ? decodeQueueCursor(v.query.after) : null;
    if (v.query.after && !cursor)
      throw new ViewError(
        400,
        'Bad page',
        'after: expected the cursor of a queue page (follow the Next link)',
      );
    const [page, placing, ds] = await Promise.all([
      v.store.dashboard.queued(owner, cursor, QUEUE_PAGE),
      cursor ? Promise.resolve([]) : v.store.dashboard.placing(owner, 100),
      v.store.dashboard.dispatchers(v.now),
    ]);
    const o = offered(ds);
    return html`<h1>Waiting work${admin ? '' : html` <span class="dim">· yours</span>`}</h1>
      ${
        placing.length > 0
          ? html`<section class="card">
              <h2>Being placed <span class="count">${placing.length}</span></h2>
              <p class="hint">
                Locked by a dispatcher: an instance is booting for them, or about to start them.
              </p>
              ${table(rows(placing, v, o, admin), admin)}
            </section>`
          : ''
      }
      <section class="card">
        <h2>Queued <span class="count">${page.total}</span></h2>
        ${
          page.items.length === 0
            ? html`<p class="empty">${cursor ? 'No more queued containers.' : 'Nothing is queued.'}</p>`
            : html`<p class="hint">
                  In the order the scheduler considers them: priority, then time in the queue.
                </p>
                ${table(rows(page.items, v, o, admin), admin)}`
        }
        <nav class="pager">
          ${cursor ? html`<a href="/dashboard/queue">« First page</a>` : ''}${
            page.next
              ? html`<a href="/dashboard/queue${query({ after: page.next })}" rel="next"
                  >Next ${QUEUE_PAGE} »</a
                >`
              : ''
          }
        </nav>
      </section>`;
  },
};
