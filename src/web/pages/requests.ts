// Requests: a page of them, newest first (a user's own; an admin's everyone's), and one request with its
// attempts (exit codes and reasons, requested against used memory and CPU, cost) and a live log tail.
import { ValidationError } from '../../model/request.js';
import { isId } from '../../model/ids.js';
import type { ContainerCost } from '../../store/cost.js';
import type { ContainerRecord, RequestRecord } from '../../store/records.js';
import { bytes, duration, html, money, query, time, type Html } from '../html.js';
import { ownerOf, ViewError, type View, type ViewContext } from '../view.js';

/** One word for a request, as `berth ps` says it. */
function status(r: RequestRecord): Html {
  const word =
    r.state === 'Final'
      ? r.outcome === 'success'
        ? 'Done'
        : r.outcome === 'cancelled'
          ? 'Cancelled'
          : 'Failed'
      : (r.container_state ?? 'Queued');
  return html`<span class="pill status-${word.toLowerCase()}">${word}</span>`;
}

export const requests: View = {
  nav: 'requests',
  title: () => 'Requests',
  async body(v: ViewContext) {
    const owner = ownerOf(v.principal);
    const state = v.query.state === 'active' ? 'Committed' : v.query.state === 'final' ? 'Final' : undefined;
    let page;
    try {
      page = await v.store.requests.list({
        owner: owner ?? undefined,
        state,
        name: v.query.name,
        cursor: v.query.after,
        limit: 50,
      });
    } catch (err) {
      if (err instanceof ValidationError) throw new ViewError(400, 'Bad page', err.message);
      throw err;
    }
    const tab = (key: string | undefined, label: string) =>
      html`<a
        href="/dashboard/requests${query({ state: key, name: v.query.name })}"
        ${v.query.state === key ? html` aria-current="page"` : ''}
        >${label}</a
      >`;
    return html`<h1>Requests${owner === null ? '' : html` <span class="dim">· yours</span>`}</h1>
      <section class="card">
        <div class="toolbar">
          <nav class="tabs">
            ${tab(undefined, 'All')}${tab('active', 'Active')}${tab('final', 'Finished')}
          </nav>
          <form method="get" action="/dashboard/requests" class="search">
            ${v.query.state ? html`<input type="hidden" name="state" value="${v.query.state}" />` : ''}
            <input
              type="search"
              name="name"
              placeholder="name contains…"
              value="${v.query.name ?? ''}"
              maxlength="256"
            /><button>Find</button>
          </form>
        </div>
        ${
          page.items.length === 0
            ? html`<p class="empty">No requests here.</p>`
            : html`<table class="data">
                <thead>
                  <tr>
                    <th>Request</th>
                    ${owner === null ? html`<th>Owner</th>` : ''}
                    <th>Status</th>
                    <th class="num">Priority</th>
                    <th class="num">Asks for</th>
                    <th>Labels</th>
                    <th class="num">Age</th>
                  </tr>
                </thead>
                <tbody>
                  ${page.items.map(
                    (r) =>
                      html`<tr>
                        <td>
                          <a href="/dashboard/requests/${r.id}">${r.name || r.id}</a>
                          <div class="dim mono">${r.id}</div>
                        </td>
                        ${owner === null ? html`<td>${r.owner}</td>` : ''}
                        <td>${status(r)}</td>
                        <td class="num">${r.priority}</td>
                        <td class="num">${r.vcpus} CPU · ${bytes(r.ram)}</td>
                        <td>
                          ${Object.entries(r.labels ?? {}).map(([k, val]) => html`<span class="badge">${k}=${val}</span> `)}
                        </td>
                        <td class="num">${duration(v.now.getTime() - new Date(r.created_at).getTime())}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
        }
        <nav class="pager">
          ${v.query.after ? html`<a href="/dashboard/requests${query({ state: v.query.state, name: v.query.name })}">« Newest</a>` : ''}${
            page.next_cursor
              ? html`<a
                  rel="next"
                  href="/dashboard/requests${query({ state: v.query.state, name: v.query.name, after: page.next_cursor })}"
                  >Older »</a
                >`
              : ''
          }
        </nav>
      </section>`;
  },
};

/** Requested against used: memory peak of the limit, CPU average of the CPUs asked for. */
function usage(c: ContainerRecord): Html {
  if (!c.usage) return html`<span class="dim">${c.state === 'Running' ? 'reported at the end' : '–'}</span>`;
  const u = c.usage;
  const cpus = u.wall_ms > 0 ? u.cpu_seconds / (u.wall_ms / 1000) : 0;
  return html`<div class="use">
      <meter min="0" max="${c.ram}" value="${u.peak_ram}" high="${c.ram * 0.9}"></meter> ${bytes(u.peak_ram)}
      of ${bytes(c.ram)}
    </div>
    <div class="use">
      <meter min="0" max="${c.vcpus}" value="${Math.min(cpus, c.vcpus)}"></meter> ${cpus.toFixed(2)} of
      ${c.vcpus} CPU
    </div>`;
}

function reason(c: ContainerRecord): Html {
  if (c.state === 'Queued' || c.state === 'Locked')
    return html`<div class="why">
      <b>Waiting:</b> ${c.scheduling_status ?? 'not looked at by a dispatcher yet'}
    </div>`;
  if (c.exit_code !== null)
    return html`exit
      <b>${c.exit_code}</b
      >${c.oom_killed ? html` <span class="bad">OOM-killed</span>` : ''}${c.runtime_status ? html`<div class="dim">${c.runtime_status}</div>` : ''}`;
  if (c.state === 'Cancelled')
    return html`<span class="bad">cancelled (${c.failure_class})</span>
      <div class="dim">${c.runtime_status ?? ''}</div>`;
  return html`${c.runtime_status ?? ''}`;
}

function costCell(k: ContainerCost | undefined): Html {
  if (!k) return html`<span class="dim">–</span>`;
  return html`<b>${money(k.cost)}</b>
    <div
      class="dim"
      title="${Math.round(k.share * 100)}% of a ${k.type} at ${money(k.price)}/h for ${duration(k.run_seconds * 1000)}, plus its share of the instance's boot and idle time"
    >
      ${money(k.direct)} run + ${money(k.overhead)} boot/idle
    </div>`;
}

/** The container whose log the page shows: the current one once it ran, else the last that ran. */
function logContainer(cs: ContainerRecord[], current: string | null): ContainerRecord | null {
  const cur = cs.find((c) => c.id === current);
  if (cur?.started_at) return cur;
  return [...cs].filter((c) => c.started_at).sort((a, b) => b.attempt - a.attempt)[0] ?? cur ?? null;
}

async function load(v: ViewContext) {
  const id = v.params.id ?? '';
  if (!isId('r', id)) throw new ViewError(404, 'Not found', `no request ${id}`);
  // Another user's request looks absent, as in the API: its existence is not theirs to know.
  const req = await v.store.requests.get(id, ownerOf(v.principal)).catch(() => {
    throw new ViewError(404, 'Not found', `request ${id} not found (or not yours)`);
  });
  const [cs, costs] = await Promise.all([
    v.store.containerList.list({ requestId: id, limit: 100 }),
    v.store.costs.ofRequest(id),
  ]);
  return { req, containers: cs.items.reverse(), costs };
}

export const request: View = {
  nav: 'requests',
  title: (v) => `Request ${v.params.id}`,
  async log(v) {
    const { req, containers } = await load(v);
    const c = logContainer(containers, req.container_id);
    return c ? `/dashboard/containers/${c.id}/log` : null;
  },
  async body(v: ViewContext) {
    const { req, containers, costs } = await load(v);
    const costOf = new Map(costs.map((k) => [k.container, k]));
    const total = costs.reduce((n, k) => n + k.cost, 0);
    const logOf = logContainer(containers, req.container_id);
    const labels = Object.entries(req.labels ?? {});
    return html`<h1>${req.name || req.id} ${status(req)}</h1>
      <section class="stats">
        <div class="stat">
          <div class="label">Cost${req.state === 'Final' ? '' : ' so far'}</div>
          <div class="value">${money(total)}</div>
          <div class="sub">all attempts</div>
        </div>
        <div class="stat">
          <div class="label">Attempts</div>
          <div class="value">${containers.length}</div>
          <div class="sub">
            ${req.attempts} of ${req.container_count_max} failures allowed used; ${req.temp_failures}
            infrastructure retries
          </div>
        </div>
        <div class="stat">
          <div class="label">Asks for</div>
          <div class="value">${req.vcpus} CPU</div>
          <div class="sub">
            ${bytes(req.ram)}
            memory${req.scratch ? `, ${bytes(req.scratch)} scratch` : ''}${req.gpus ? `, ${req.gpus} GPU` : ''}
          </div>
        </div>
        <div class="stat">
          <div class="label">Submitted</div>
          <div class="value small">${time(req.created_at, v.now)}</div>
          <div class="sub">by ${req.owner}, priority ${req.priority}</div>
        </div>
      </section>
      <section class="card">
        <dl class="facts">
          <dt>Request</dt>
          <dd class="mono">${req.id}</dd>
          <dt>Command</dt>
          <dd class="mono">${req.command.join(' ')}</dd>
          <dt>Image</dt>
          <dd>${req.image ?? html`<span class="dim">none (a process)</span>`}</dd>
          ${
            labels.length > 0
              ? html`<dt>Labels</dt>
                  <dd>${labels.map(([k, val]) => html`<span class="badge">${k}=${val}</span> `)}</dd>`
              : ''
          }
          ${
            req.state === 'Final'
              ? html`<dt>Outcome</dt>
                  <dd>${req.outcome}: ${req.final_reason ?? ''}</dd>`
              : ''
          }
        </dl>
      </section>
      <section class="card">
        <h2>Attempts</h2>
        <table class="data attempts">
          <thead>
            <tr>
              <th>Container</th>
              <th>State</th>
              <th>Exit / reason</th>
              <th>Instance</th>
              <th>Used of requested</th>
              <th class="num">Ran</th>
              <th class="num">Cost</th>
            </tr>
          </thead>
          <tbody>
            ${containers.map(
              (c) =>
                html`<tr id="${c.id}" ${c.id === logOf?.id ? html` class="current"` : ''}>
                  <td class="mono">
                    ${c.id}
                    <div class="dim">attempt ${c.attempt}</div>
                  </td>
                  <td><span class="pill state-${c.state.toLowerCase()}">${c.state}</span></td>
                  <td class="reason">${reason(c)}</td>
                  <td class="mono">
                    ${c.instance_id ?? html`<span class="dim">–</span>`}${costOf.get(c.id) ? html`<div class="dim">${costOf.get(c.id)!.type}</div>` : ''}
                  </td>
                  <td>${usage(c)}</td>
                  <td class="num">
                    ${c.started_at ? duration((c.finished_at ? new Date(c.finished_at) : v.now).getTime() - new Date(c.started_at).getTime()) : '–'}
                  </td>
                  <td class="num">${costCell(costOf.get(c.id))}</td>
                </tr>`,
            )}
          </tbody>
        </table>
      </section>
      <section class="card log-card">
        <h2>Log ${logOf ? html`<span class="dim mono">${logOf.id}</span>` : ''}</h2>
        <pre id="log" class="log" data-keep>
${logOf ? html`<span class="dim">loading…</span>` : html`<span class="dim">No attempt has started yet.</span>`}</pre>
      </section>`;
  },
};
