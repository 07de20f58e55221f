// A one-time dashboard sign-in link for the local admin (berth up prints it): the admin token the server
// saved in BERTH_HOME signs in once through the link, within 10 minutes, and never appears itself.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ADMIN_TOKEN_FILE } from '../server/files.js';
import type { Store } from '../store/store.js';

/** The path of a sign-in link as the home's admin, or null when the home has no admin token. */
export async function localSigninLink(store: Store, home: string): Promise<string | null> {
  const file = join(home, ADMIN_TOKEN_FILE);
  if (!existsSync(file)) return null;
  const secret = readFileSync(file, 'utf8').trim();
  if (!secret) return null;
  const { code } = await store.dashboard.createSignin(await store.tokens.authenticate(secret));
  return `/dashboard/signin?code=${code}`;
}
