// What a dashboard page is: a function from who asks (and the query) to the markup of its live region.
// The same function renders the full page and each live update (src/web/live.ts), so the two never differ.
import type { Store } from '../store/store.js';
import type { Principal } from '../store/tokens.js';
import type { Html } from './html.js';
import type { NavKey } from './layout.js';

export interface ViewContext {
  store: Store;
  principal: Principal;
  now: Date;
  query: Record<string, string | undefined>;
  /** Path parameters (the request id of a request page). */
  params: Record<string, string>;
  csrf: string;
}

export interface View {
  nav: NavKey | null;
  title(v: ViewContext): string;
  /** Only admins may see it (others get a 403 page). */
  adminOnly?: boolean;
  /** The page draws charts (loads the charting library). */
  charts?: boolean;
  /** The URL of a log the page follows, if any. */
  log?(v: ViewContext): Promise<string | null>;
  /** The live region's markup. */
  body(v: ViewContext): Promise<Html>;
}

/** A page that cannot be shown as asked: its status, heading and message become an error page. */
export class ViewError extends Error {
  constructor(
    readonly status: number,
    readonly heading: string,
    message: string,
  ) {
    super(message);
  }
}

/** The owner filter of a principal: admins see everything (null), users their own. */
export const ownerOf = (p: Principal): string | null => (p.scope === 'admin' ? null : p.owner);
