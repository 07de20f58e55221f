// The frame every dashboard page shares: head, navigation, who is signed in, the live region and scripts.
import type { Principal } from '../store/tokens.js';
import { html, type Html } from './html.js';

/** Static files are cached by the browser; their URLs change with the version. */
export const ASSET_VERSION = '1';

export interface Frame {
  title: string;
  /** The navigation entry to mark as current. */
  nav: NavKey | null;
  principal: Principal | null;
  csrf: string | null;
  /** The SSE URL that refreshes #live (null: a static page). */
  live: string | null;
  /** Extra scripts/styles (the charting library on pages with charts). */
  charts?: boolean;
  /** The URL of a log to follow into #log (the request page). */
  log?: string | null;
}

export type NavKey = 'overview' | 'queue' | 'instances' | 'requests' | 'cost';

const NAV: [NavKey, string, string, boolean][] = [
  ['overview', 'Overview', '/dashboard', false],
  ['queue', 'Waiting', '/dashboard/queue', false],
  ['instances', 'Instances', '/dashboard/instances', true],
  ['requests', 'Requests', '/dashboard/requests', false],
  ['cost', 'Cost', '/dashboard/cost', false],
];

const asset = (name: string) => `/dashboard/static/${name}?v=${ASSET_VERSION}`;

export function page(f: Frame, body: Html): Html {
  const admin = f.principal?.scope === 'admin';
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${f.title} · Berth</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${asset('dashboard.css')}">
${f.charts ? html`<link rel="stylesheet" href="${asset('uplot.css')}" />` : ''}
${f.csrf ? html`<meta name="csrf" content="${f.csrf}" />` : ''}
</head>
<body${f.live ? html` data-live="${f.live}"` : ''}${f.log ? html` data-log="${f.log}"` : ''}>
<header class="top">
  <a class="brand" href="/dashboard">⚓ Berth</a>
  ${
    f.principal
      ? html`<nav>
            ${NAV.filter(([, , , adminOnly]) => admin || !adminOnly).map(
              ([key, label, href]) =>
                html`<a href="${href}" ${key === f.nav ? html` aria-current="page"` : ''}>${label}</a>`,
            )}
          </nav>
          <span class="who"
            ><span class="live-dot" title="live updates"></span>${f.principal.owner}
            <span class="scope">${f.principal.scope}</span>
            <form method="post" action="/dashboard/signout">
              <input type="hidden" name="_csrf" value="${f.csrf ?? ''}" /><button class="link">
                Sign out
              </button>
            </form></span
          >`
      : ''
  }
</header>
<main id="live">${body}</main>
${f.charts ? html`<script src="${asset('uplot.js')}" defer></script>` : ''}
<script src="${asset('dashboard.js')}" defer></script>
</body>
</html>`;
}

/** A page that only says something went wrong (not found, not allowed, bad input). */
export function messagePage(f: Omit<Frame, 'live'>, heading: string, message: string): Html {
  return page(
    { ...f, title: heading, live: null },
    html`<section class="message">
      <h1>${heading}</h1>
      <p>${message}</p>
      <p><a href="/dashboard">Back to the overview</a></p>
    </section>`,
  );
}
