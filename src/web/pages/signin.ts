// Signing in: paste an API token (user or admin). The token is exchanged for a session cookie at once and
// never put in a page (src/web/session.ts).
import { html, type Html } from '../html.js';
import { page } from '../layout.js';

export function signinPage(o: { next: string; error?: string }): Html {
  return page(
    { title: 'Sign in', nav: null, principal: null, csrf: null, live: null },
    html`<section class="signin card">
      <h1>Sign in to Berth</h1>
      <p>
        Paste an API token. A user token shows your own work; an admin token everything, and lets you operate
        instances.
      </p>
      ${o.error ? html`<p class="error" role="alert">${o.error}</p>` : ''}
      <form method="post" action="/dashboard/signin">
        <input type="hidden" name="next" value="${o.next}" />
        <label for="token">API token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="off"
          spellcheck="false"
          placeholder="bt_…"
          required
          autofocus
        />
        <button class="primary">Sign in</button>
      </form>
      <p class="hint">
        On the server's machine, <code>npx berth dashboard</code> prints a link that signs you in once. Tokens
        are made with <code>berth token create</code>; the first admin token is in
        <code>$BERTH_HOME/admin-token</code>.
      </p>
    </section>`,
  );
}
