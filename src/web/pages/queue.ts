// Waiting work: the containers being placed, then the queue in the scheduler's order, a page at a time,
// each with why it waits (the scheduler's status text), the instance type it waits for, and its age.
import { buildShape, compareTypes } from '../../dispatch/scheduler/fitting.js';
import type { SnapshotContainer } from '../../dispatch/scheduler/types.js';
import type { InstanceType } from '../../model/types.js';
import { decodeQueueCursor, type DispatcherView, type WaitingContainer } from '../../store/dashboard.js';
import { bytes, duration, html, query, type Html } from '../html.js';
import { ownerOf, ViewError, type View, type ViewContext } from '../view.js';

export const QUEUE_PAGE = 50;

/** The instance types the live dispatchers offer (cheapest first), with the RAM they reserve. */
function offered(ds: DispatcherView[]): { types: InstanceType[]; ramOverhead: number } {
  const byName = new Map<string, InstanceType>();
  let ramOverhead = 0;
  for (const d of ds) {
    ramOverhead = Math.max(ramOverhead, d.view?.limits.ram_overhead ?? 0);
    for (const t of d.view?.instance_types ?? []) byName.set(t.name, { ...t, providerType: t.name });
  }
  return { types: [...byName.values()].sort(compareTypes), ramOverhead };
}

/** The type the scheduler would create for the container (DESIGN §6.2 rule 2), or why none. */
function waitsFor(c: WaitingContainer, o: { types: InstanceType[]; ramOverhead: number }): Html {
  if (o.types.length === 0) return html`<span class="dim">–</span>`;
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
  };
  const shape = buildShape(snap, o.types, o.ramOverhead, 1);
  return shape.fitting[0] ? html`${shape.fitting[0].name}` : html`<span class="bad">none fits</span>`;
}

function rows(
  items: WaitingContainer[],
  v: ViewContext,
  o: ReturnType<typeof offered>,
  admin: boolean,
): Html {
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
