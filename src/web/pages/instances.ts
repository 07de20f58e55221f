// Instances (admins): type, spot or not, state, how long idle, containers, price, last ping, and the
// operator's hold / drain / run / kill, applied by the owning dispatcher at its next pass.
import { INSTANCE_STATES, isEndingInstanceState, type IdleBehavior } from '../../model/types.js';
import type { LiveInstance } from '../../store/dashboard.js';
import { duration, html, money, time, type Html } from '../html.js';
import type { View, ViewContext } from '../view.js';

/** The operator's actions, as on the CLI (berth instance hold|drain|run|kill). */
export const INSTANCE_ACTIONS = ['hold', 'drain', 'run', 'kill'] as const;
export type InstanceAction = (typeof INSTANCE_ACTIONS)[number];

const ACTION_HELP: Record<InstanceAction, string> = {
  hold: 'No new work; never shut down',
  drain: 'No new work; shut down when empty',
  run: 'Normal: take work, shut down when idle',
  kill: 'Shut down now (its containers are retried elsewhere)',
};

function stateCell(i: LiveInstance, now: Date): Html {
  const since = duration(now.getTime() - new Date(i.state_since).getTime());
  const behavior: IdleBehavior = i.idle_behavior;
  return html`<span class="pill state-${i.state}">${i.state}</span
    >${behavior !== 'run' ? html` <span class="pill state-${behavior}">${behavior}</span>` : ''}
    <div class="dim">${i.state === 'idle' ? `idle for ${since}` : `for ${since}`}</div>
    ${
      i.requested_idle_behavior || i.kill_requested
        ? html`<div class="pending">${i.kill_requested ? 'kill' : i.requested_idle_behavior} requested…</div>`
        : ''
    }`;
}

function actions(i: LiveInstance, csrf: string): Html {
  const state = INSTANCE_STATES.find((s) => s === i.state);
  const gone = state !== undefined && isEndingInstanceState(state);
  // One form per instance, a button per action (formaction): one CSRF field per row, not four.
  return html`<form class="actions" method="post" action="/dashboard/instances/${i.id}/run">
    <input type="hidden" name="_csrf" value="${csrf}" />
    ${INSTANCE_ACTIONS.map((a) => {
      const current = a !== 'kill' && i.idle_behavior === a;
      return html`<button
        formaction="/dashboard/instances/${i.id}/${a}"
        class="${a === 'kill' ? 'danger' : ''}"
        title="${ACTION_HELP[a]}"
        ${gone || current ? html` disabled` : ''}${a === 'kill' ? html` data-confirm="Shut down ${i.id} now? Its containers are retried elsewhere."` : ''}
      >
        ${a}
      </button>`;
    })}
  </form>`;
}

export const instances: View = {
  nav: 'instances',
  adminOnly: true,
  title: () => 'Instances',
  async body(v: ViewContext) {
    const list = await v.store.dashboard.instances();
    const perHour = list.reduce((n, i) => n + i.price, 0);
    return html`<h1>
        Instances <span class="count">${list.length}</span> <span class="dim">· ${money(perHour)}/h</span>
      </h1>
      <section class="card">
        ${
          list.length === 0
            ? html`<p class="empty">
                No instances. The dispatcher creates them when work waits and shuts them down when idle.
              </p>`
            : html`<table class="data instances">
                <thead>
                  <tr>
                    <th>Instance</th>
                    <th>Type</th>
                    <th>State</th>
                    <th>Containers</th>
                    <th class="num">Price/h</th>
                    <th class="num">Age</th>
                    <th>Last ping</th>
                    <th>Operate</th>
                  </tr>
                </thead>
                <tbody>
                  ${list.map(
                    (i) =>
                      html`<tr id="${i.id}">
                        <td class="mono">
                          ${i.id}
                          <div class="dim">${i.cluster}/${i.dispatcher_tag}</div>
                        </td>
                        <td>${i.type}${i.preemptible ? html` <span class="badge">spot</span>` : ''}</td>
                        <td>${stateCell(i, v.now)}</td>
                        <td>
                          ${i.containers.length === 0 ? html`<span class="dim">none</span>` : i.containers.map((c) => html`<a class="cid state-${c.state.toLowerCase()}" href="/dashboard/containers/${c.id}" title="${c.id}: ${c.state}, ${c.owner}">${c.name || c.id}</a> `)}
                        </td>
                        <td class="num">${money(i.price)}</td>
                        <td class="num">${duration(v.now.getTime() - new Date(i.created_at).getTime())}</td>
                        <td>
                          ${i.last_ping_at ? time(i.last_ping_at, v.now) : html`<span class="dim">${i.state === 'booting' ? 'booting' : 'never'}</span>`}
                        </td>
                        <td>${actions(i, v.csrf)}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
        }
      </section>`;
  },
};
