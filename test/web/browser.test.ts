// The dashboard in a real browser (chromium through playwright-core) against a real API server on a real
// database: sign in, a running container's log tail updating, holding an instance with its button (and
// the change arriving without a reload), following a waiting container to its reason, and a user denied
// another user's request. The page's own state (window.marker) shows that updates came without a reload.
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { PgMirror } from '../../src/dispatch/pg-mirror.js';
import type { PoolInstance } from '../../src/dispatch/pool.js';
import { PgQueue } from '../../src/dispatch/pg-queue.js';
import { normalizeRequest } from '../../src/model/request.js';
import { testApi } from '../helpers/api.js';
import { launchBrowser, missingBrowser } from '../helpers/browser.js';
import { itIf } from '../helpers/needs.js';

const it = itIf(missingBrowser);
const WAIT = { timeout: 20_000 };

describe('dashboard in a browser', async () => {
  const t = await testApi();
  const { app, store, tokens, clock, db } = t;
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  let browser: Browser | null = null;
  beforeAll(async () => {
    if (!missingBrowser) browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  async function signedIn(token: string): Promise<Page> {
    const page = await (await browser!.newContext()).newPage();
    await page.goto(`${base}/dashboard`);
    await page.waitForURL(/\/dashboard\/signin\?next=/);
    await page.fill('#token', token);
    await page.click('button.primary');
    await page.waitForURL(`${base}/dashboard`);
    return page;
  }

  /** Waits until the page's log shows `text` (the page's own script appends it). */
  const logShows = (page: Page, text: string) =>
    page.waitForFunction(
      (t) => {
        const doc = (
          globalThis as unknown as { document: { getElementById(id: string): { textContent: string } } }
        ).document;
        return doc.getElementById('log').textContent.includes(t);
      },
      text,
      WAIT,
    );

  async function submit(owner: string, name: string) {
    const [r] = await store.requests.create(owner, [normalizeRequest({ command: ['true'], name })]);
    return r!;
  }

  it('signs in with a token, and refuses a wrong one with a message', async () => {
    const page = await (await browser!.newContext()).newPage();
    await page.goto(`${base}/dashboard/signin`);
    await page.fill('#token', 'bt_wrong');
    await page.click('button.primary');
    await page.waitForSelector('.error', WAIT);
    expect(await page.textContent('.error')).toContain('That token does not work');
    await page.fill('#token', tokens.alice);
    await page.click('button.primary');
    await page.waitForURL(`${base}/dashboard`);
    expect(await page.textContent('.who')).toContain('alice');
    // A user's navigation has no instances page.
    expect(await page.locator('header nav a').allTextContents()).toEqual([
      'Overview',
      'Waiting',
      'Requests',
      'Cost',
    ]);
    await page.context().close();
  });

  it("shows a running container's log tail and appends to it as the agent reports", async () => {
    const node = await t.node();
    const r = await submit('alice', 'tail-me');
    const cid = r.container_id!;
    await store.containers.lock([cid], 'c1/t1');
    await store.containers.assign(cid, 'c1/t1', node.instanceId, node.id);
    const [work] = (await store.containers.workFor(node.id, [])).start;
    await store.containers.start(cid, node.id, work!.lock_token);
    const report = (seq: number, data: string) =>
      fetch(`${base}/v1/containers/${cid}/logs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${node.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ lock_token: work!.lock_token, chunks: [{ seq, stream: 'stdout', data }] }),
      }).then((res) => expect(res.status).toBe(200));
    await report(0, 'first line\n');

    const page = await signedIn(tokens.alice);
    await page.goto(`${base}/dashboard/requests/${r.id}`);
    await logShows(page, 'first line');
    await page.evaluate('window.marker = 42');
    await report(1, 'second line\n');
    await logShows(page, 'second line');
    await store.containers.complete(cid, node.id, work!.lock_token, {
      exitCode: 3,
      oomKilled: false,
      usage: null,
    });
    await logShows(page, 'exit code 3');
    // The attempt's row followed (live region), and nothing was reloaded.
    await page.waitForSelector(`tr[id="${cid}"] .pill.state-complete`, WAIT);
    expect(await page.evaluate('window.marker')).toBe(42);
    expect(await page.textContent('#log')).toBe('first line\nsecond line\n\n— Complete, exit code 3 —\n');
    await page.context().close();
  });

  it('holds an instance with its button; the dispatcher applies it and the page shows it without a reload', async () => {
    const mirror = new PgMirror(db.pool, 'c1', 't1');
    const inst: PoolInstance = {
      id: 'i-browser',
      type: 'small',
      providerType: 'small',
      price: 0.1,
      createdAt: clock.now(),
      state: 'idle',
      stateSince: clock.now(),
      idleBehavior: 'run',
      nodeId: null,
      containers: [],
      destroyAttemptAt: null,
      preemptible: false,
      interruptionNotice: null,
    };
    await mirror.publish([inst], clock.now());
    const page = await signedIn(tokens.admin);
    // The page's live stream opens only after the dispatcher has published the change (the worst case of
    // a slow browser): what changed between the page's render and its stream must still reach the page.
    let openLive!: () => void;
    const liveGate = new Promise<void>((resolve) => (openLive = resolve));
    await page.route(/\/dashboard\/live\?/, async (route) => {
      await liveGate;
      // A stream of a page already left is aborted by the browser: nothing to continue.
      await route.continue().catch(() => {});
    });
    await page.goto(`${base}/dashboard/instances`);
    await page.click('tr[id="i-browser"] button[formaction$="/hold"]');
    await page.waitForSelector('tr[id="i-browser"] .pending', WAIT);
    expect(await page.textContent('tr[id="i-browser"] .pending')).toContain('hold requested');
    // The dispatcher takes the request at its next pass and publishes the instance held.
    expect(await mirror.requests()).toEqual([{ instance: 'i-browser', idleBehavior: 'hold', kill: false }]);
    await page.evaluate('window.marker = 8');
    inst.idleBehavior = 'hold';
    await mirror.publish([inst], clock.now());
    openLive();
    await page.waitForSelector('tr[id="i-browser"] .pill.state-hold', WAIT);
    expect(await page.locator('tr[id="i-browser"] .pending').count()).toBe(0);
    expect(await page.evaluate('window.marker')).toBe(8);
    expect(await page.isDisabled('tr[id="i-browser"] button[formaction$="/hold"]')).toBe(true);
    await page.context().close();
  });

  it('follows a waiting container from the queue to why it waits', async () => {
    const r = await submit('alice', 'waits-a-while');
    const reason =
      'queue position 1; waits for a small instance; max_instances=1 reached; starts when an instance is freed or the limit is raised';
    await new PgQueue(store, db.url).setStatuses(new Map([[r.container_id!, reason]]));
    const page = await signedIn(tokens.alice);
    await page.click('header nav a:text("Waiting")');
    await page.waitForURL(`${base}/dashboard/queue`);
    await page.click(`tr[id="${r.container_id}"] a`);
    await page.waitForURL(new RegExp(`/dashboard/requests/${r.id}`));
    await page.waitForSelector(`tr[id="${r.container_id}"] .why`, WAIT);
    expect(await page.textContent(`tr[id="${r.container_id}"] .why`)).toContain(reason);
    await page.context().close();
  });

  it("denies a user another user's request", async () => {
    const theirs = await submit('bob', 'bobs-private-work');
    const page = await signedIn(tokens.alice);
    const res = await page.goto(`${base}/dashboard/requests/${theirs.id}`);
    expect(res!.status()).toBe(404);
    expect(await page.textContent('h1')).toBe('Not found');
    expect(await page.content()).not.toContain('bobs-private-work');
    const queue = await page.goto(`${base}/dashboard/queue`);
    expect(queue!.status()).toBe(200);
    expect(await page.content()).not.toContain('bobs-private-work');
    expect((await page.goto(`${base}/dashboard/instances`))!.status()).toBe(403);
    await page.context().close();
  });
});
