// The dashboard in-process (fastify inject, real PostgreSQL): signing in and sessions, who sees what,
// escaping, CSRF on the instance buttons, queue pages at the scheduler's order, sign-in links, the log
// stream, and the security headers. The browser tests (test/web/browser.test.ts) drive the same pages.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { SCHEDULER_OPTIONS } from '../../src/config/scheduler.js';
import { PgMirror } from '../../src/dispatch/pg-mirror.js';
import { normalizeRequest } from '../../src/model/request.js';
import { testApi } from '../helpers/api.js';

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const GiB = 1024 ** 3;

describe('dashboard', async () => {
  const t = await testApi();
  const { app, store, tokens, clock } = t;

  async function signin(token: string, extra: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    return app.inject({
      method: 'POST',
      url: '/dashboard/signin',
      payload: new URLSearchParams({ token, ...extra }).toString(),
      headers: FORM,
    });
  }
  async function session(token: string): Promise<string> {
    const r = await signin(token);
    expect(r.statusCode, r.body).toBe(303);
    return String(r.headers['set-cookie']).split(';')[0]!;
  }
  const get = (cookie: string | null, url: string) =>
    app.inject({ method: 'GET', url, headers: cookie ? { cookie } : {} });
  const csrfOf = (body: string) => /<meta name="csrf" content="([^"]+)"/.exec(body)?.[1] ?? '';

  async function submit(owner: string, input: Record<string, unknown>) {
    const [r] = await store.requests.create(owner, [normalizeRequest({ command: ['true'], ...input })]);
    return r!;
  }

  it('signs in with a user or admin token only, into an HttpOnly, SameSite=Strict session cookie', async () => {
    const ok = await signin(tokens.admin, { next: '/dashboard/queue' });
    expect(ok.statusCode).toBe(303);
    expect(ok.headers.location).toBe('/dashboard/queue');
    const cookie = String(ok.headers['set-cookie']);
    expect(cookie).toMatch(
      /^berth_session=v1\.\d+\.\d+\.[\w-]{43}; Path=\/dashboard; HttpOnly; SameSite=Strict; Max-Age=43200$/,
    );
    expect(cookie).not.toContain(tokens.admin);

    const bad = await signin('bt_nope');
    expect(bad.statusCode).toBe(401);
    expect(bad.headers['set-cookie']).toBeUndefined();
    expect(bad.body).toContain('That token does not work');
    const dispatcher = await signin(tokens.dispatcher);
    expect(dispatcher.statusCode).toBe(403);
    expect(dispatcher.body).toContain('A dispatcher token cannot sign in');
    // No open redirect: only dashboard pages of this server.
    for (const next of ['https://evil.example/', '//evil.example/dashboard', '/v1/requests', '/dashboardx'])
      expect((await signin(tokens.admin, { next })).headers.location, next).toBe('/dashboard');
    // A form posted from another site is refused.
    const cross = await app.inject({
      method: 'POST',
      url: '/dashboard/signin',
      payload: `token=${tokens.admin}`,
      headers: { ...FORM, origin: 'https://evil.example' },
    });
    expect(cross.statusCode).toBe(403);
    expect(cross.headers['set-cookie']).toBeUndefined();
  });

  it('sends every page without a valid session to the sign-in page', async () => {
    const r = await get(null, '/dashboard/queue?after=x');
    expect(r.statusCode).toBe(303);
    expect(r.headers.location).toBe('/dashboard/signin?next=%2Fdashboard%2Fqueue%3Fafter%3Dx');
    const cookie = await session(tokens.alice);
    const value = cookie.split('=')[1]!;
    const [v, id, exp, mac] = value.split('.');
    // A forged token id, a stretched expiry, garbage: all refused.
    for (const forged of [`${v}.1.${exp}.${mac}`, `${v}.${id}.${Number(exp) + 1}.${mac}`, 'v1.x', ''])
      expect((await get(`berth_session=${forged}`, '/dashboard')).statusCode, forged).toBe(303);
    expect((await get(cookie, '/dashboard')).statusCode).toBe(200);
    // Expired after 12 hours.
    clock.advance(12 * 3600_000 + 1);
    expect((await get(cookie, '/dashboard')).statusCode).toBe(303);
    clock.advance(-(12 * 3600_000 + 1));
    // A revoked token ends its sessions.
    const { secret, info } = await store.tokens.create({ scope: 'user', owner: 'carol' });
    const carol = await session(secret);
    expect((await get(carol, '/dashboard')).statusCode).toBe(200);
    await store.tokens.revoke(info.id);
    expect((await get(carol, '/dashboard')).statusCode).toBe(303);
  });

  it('shows a user their own work only; instances and charts are for admins', async () => {
    const mine = await submit('alice', { name: 'alice-job' });
    const theirs = await submit('bob', { name: 'bob-secret-job' });
    const alice = await session(tokens.alice);
    for (const url of ['/dashboard', '/dashboard/queue', '/dashboard/requests', '/dashboard/cost']) {
      const r = await get(alice, url);
      expect(r.statusCode, url).toBe(200);
      expect(r.body, url).not.toContain('bob-secret-job');
    }
    expect((await get(alice, '/dashboard/queue')).body).toContain('alice-job');
    expect((await get(alice, `/dashboard/requests/${mine.id}`)).statusCode).toBe(200);
    const denied = await get(alice, `/dashboard/requests/${theirs.id}`);
    expect(denied.statusCode).toBe(404);
    expect(denied.body).toContain('not found (or not yours)');
    expect(denied.body).not.toContain('bob-secret-job');
    expect((await get(alice, `/dashboard/containers/${theirs.container_id}`)).statusCode).toBe(404);
    expect((await get(alice, `/dashboard/containers/${theirs.container_id}/log`)).statusCode).toBe(404);
    expect((await get(alice, '/dashboard/instances')).statusCode).toBe(403);
    expect((await get(alice, '/dashboard/charts.json')).statusCode).toBe(403);
    expect((await get(alice, '/dashboard/live?view=instances')).statusCode).toBe(403);
    expect((await get(alice, '/dashboard/live?view=constructor')).statusCode).toBe(400);
    // An admin sees everyone's.
    const admin = await session(tokens.admin);
    expect((await get(admin, '/dashboard/queue')).body).toContain('bob-secret-job');
    expect((await get(admin, `/dashboard/requests/${theirs.id}`)).statusCode).toBe(200);
    const redirect = await get(admin, `/dashboard/containers/${theirs.container_id}`);
    expect(redirect.headers.location).toBe(`/dashboard/requests/${theirs.id}#${theirs.container_id}`);
  });

  it('escapes everything a user wrote, and puts no secret in a page', async () => {
    const evil = '<script>alert(1)</script>';
    const r = await submit('alice', {
      name: evil,
      labels: { team: 'x' },
      env: { PASSWORD: 'hunter2-secret' },
      secret_env: { API_KEY: 'sekrit-value-42' },
    });
    const admin = await session(tokens.admin);
    for (const url of ['/dashboard/requests', `/dashboard/requests/${r.id}`, '/dashboard/queue']) {
      const page = await get(admin, url);
      expect(page.body, url).not.toContain(evil);
      expect(page.body, url).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
      expect(page.body, url).not.toContain('hunter2-secret');
      expect(page.body, url).not.toContain('sekrit-value-42');
      expect(page.body, url).not.toContain(tokens.admin);
      expect(page.headers['content-security-policy']).toMatch(/script-src 'self'/);
      expect(page.headers['x-frame-options']).toBe('DENY');
      expect(page.headers['cache-control']).toBe('no-store');
    }
  });

  it('operates instances only for an admin with the page’s CSRF token, through the operator request', async () => {
    await store.ctx.pool.query(
      `INSERT INTO instances (id, cluster, dispatcher_tag, type, provider_type, price, state, idle_behavior, created_at, state_since, updated_at)
       VALUES ('i-op', 'c1', 't1', 'small', 'small', 0.1, 'idle', 'run', $1, $1, $1)`,
      [clock.now()],
    );
    const admin = await session(tokens.admin);
    const csrf = csrfOf((await get(admin, '/dashboard/instances')).body);
    expect(csrf).toMatch(/^[\w-]{43}$/);
    const post = (cookie: string, action: string, body: string, headers: Record<string, string> = {}) =>
      app.inject({
        method: 'POST',
        url: `/dashboard/instances/i-op/${action}`,
        payload: body,
        headers: { ...FORM, cookie, ...headers },
      });
    const requested = async () =>
      (
        await store.ctx.pool.query(
          `SELECT requested_idle_behavior, kill_requested FROM instances WHERE id = 'i-op'`,
        )
      ).rows[0];
    expect((await post(admin, 'hold', '')).statusCode).toBe(403);
    expect((await post(admin, 'hold', '_csrf=wrong')).statusCode).toBe(403);
    expect((await post(admin, 'hold', `_csrf=${csrf}`, { origin: 'https://evil.example' })).statusCode).toBe(
      403,
    );
    const alice = await session(tokens.alice);
    const aliceCsrf = csrfOf((await get(alice, '/dashboard')).body);
    expect((await post(alice, 'hold', `_csrf=${aliceCsrf}`)).statusCode).toBe(403);
    // Another session's token is not this one's.
    expect((await post(admin, 'hold', `_csrf=${aliceCsrf}`)).statusCode).toBe(403);
    expect(await requested()).toEqual({ requested_idle_behavior: null, kill_requested: false });

    const ok = await post(admin, 'hold', `_csrf=${csrf}`);
    expect(ok.statusCode).toBe(303);
    expect(ok.headers.location).toBe('/dashboard/instances#i-op');
    expect(await requested()).toEqual({ requested_idle_behavior: 'hold', kill_requested: false });
    expect((await post(admin, 'kill', '', { 'x-csrf-token': csrf })).json()).toEqual({ ok: true });
    expect(await requested()).toEqual({ requested_idle_behavior: 'hold', kill_requested: true });
    expect((await post(admin, 'explode', `_csrf=${csrf}`)).statusCode).toBe(400);
    await store.ctx.pool.query(`UPDATE instances SET gone_at = $1 WHERE id = 'i-op'`, [clock.now()]);
    expect((await post(admin, 'run', `_csrf=${csrf}`)).statusCode).toBe(404);
  });

  it('pages the queue in the scheduler’s order with the type each container waits for', async () => {
    await store.ctx.pool.query(`UPDATE containers SET state = 'Cancelled' WHERE state = 'Queued'`);
    const specs = Array.from({ length: 120 }, (_, i) =>
      normalizeRequest({
        command: ['true'],
        name: `q-${i}`,
        priority: 100 + (i % 3),
        vcpus: 1,
        ram: i === 7 ? '6GiB' : '1GiB',
      }),
    );
    const created: { name: string; p: number; batch: number; id: string }[] = [];
    for (let i = 0; i < specs.length; i += 40) {
      for (const r of await store.requests.create('alice', specs.slice(i, i + 40)))
        created.push({ name: r.name, p: r.priority, batch: i, id: r.container_id! });
      clock.advance(1000);
    }
    await store.ctx.pool.query(
      `INSERT INTO dispatchers (id, cluster, tag, started_at, heartbeat_at, view) VALUES ('c1/t1', 'c1', 't1', $1, $1, $2)`,
      [
        clock.now(),
        {
          at: clock.now().toISOString(),
          instance_types: [
            { name: 'small', vcpus: 1, ram: 2 * GiB, scratch: 0, gpus: 0, price: 0.1, preemptible: false },
            { name: 'big', vcpus: 4, ram: 16 * GiB, scratch: 0, gpus: 0, price: 0.4, preemptible: false },
          ],
          limits: {
            max_instances: 10,
            max_spend_per_hour: null,
            max_instances_per_type: {},
            min_instances: 0,
          },
          cloud: { quota_max_instances: null, unavailable_types: ['big'], rate_limited_until: null },
        },
      ],
    );
    const admin = await session(tokens.admin);
    const seen: string[] = [];
    const waitsFor = new Map<string, string>();
    let url: string | null = '/dashboard/queue';
    let pages = 0;
    while (url) {
      const r = await get(admin, url);
      expect(r.statusCode, r.body).toBe(200);
      pages++;
      if (pages === 1) expect(r.body).toContain('<span class="count">120</span>');
      // One table row per container: its name, its owner, and (fifth cell) the type it waits for.
      for (const row of r.body.split('<tr id="').slice(1)) {
        const name = />(q-\d+)<\/a>/.exec(row)![1]!;
        seen.push(name);
        waitsFor.set(name, [...row.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)][4]![1]!.trim());
      }
      url =
        /href="(\/dashboard\/queue\?after=[^"]+)" rel="next"/.exec(r.body)?.[1]?.replace(/&amp;/g, '&') ??
        null;
    }
    expect(pages).toBe(3);
    // Every container once: priority first, then queue time, then id.
    const expected = created
      .sort((a, b) => b.p - a.p || a.batch - b.batch || (a.id < b.id ? -1 : 1))
      .map((x) => x.name);
    expect(seen).toEqual(expected);
    // The cheapest type that fits: small, but big for the one asking for 6 GiB.
    expect(waitsFor.get('q-7')).toBe('big');
    expect([...waitsFor].filter(([, t]) => t !== 'small').map(([n]) => n)).toEqual(['q-7']);
    expect((await get(admin, '/dashboard/queue?after=garbage')).statusCode).toBe(400);
    // The overview shows the cloud error in force.
    expect((await get(admin, '/dashboard')).body).toContain('No capacity for: big');
  });

  it('the queue names the type under the live dispatcher’s own scheduler configuration', async () => {
    await store.ctx.pool.query(`UPDATE containers SET state = 'Cancelled' WHERE state = 'Queued'`);
    await store.ctx.pool.query(`DELETE FROM dispatchers`);
    const again = await submit('alice', { name: 'again', preemptible: true });
    const once = await submit('alice', { name: 'once', preemptible: true });
    await submit('alice', { name: 'big', vcpus: 4 });
    await store.ctx.pool.query(`UPDATE containers SET spot_interruptions = 2 WHERE id = $1`, [
      again.container_id,
    ]);
    await store.ctx.pool.query(`UPDATE containers SET spot_interruptions = 1 WHERE id = $1`, [
      once.container_id,
    ]);
    await store.ctx.pool.query(
      `INSERT INTO dispatchers (id, cluster, tag, started_at, heartbeat_at) VALUES ('c1/t2', 'c1', 't2', $1, $1)`,
      [clock.now()],
    );
    // Published the way a running dispatcher publishes it, with settings that differ from the defaults:
    // after 2 interruptions on demand; no more than 0.5/h (the 4-vcpu type costs 0.8/h: never created).
    const type = (name: string, vcpus: number, price: number, preemptible: boolean) => ({
      name,
      providerType: name,
      vcpus,
      ram: 8 * GiB,
      scratch: 0,
      gpus: 0,
      price,
      preemptible,
    });
    const config = {
      ...SCHEDULER_OPTIONS.defaults(),
      onDemandAfterInterruptions: 2,
      maxSpendPerHour: 0.5,
    };
    await new PgMirror(store.ctx.pool, 'c1', 't2').publish([], clock.now(), {
      instanceTypes: [type('od', 2, 0.2, false), type('spot', 2, 0.07, true), type('od4', 4, 0.8, false)],
      config,
      cloud: { quotaMaxInstances: null, unavailableTypes: [], rateLimitedUntil: null },
    });
    const body = (await get(await session(tokens.admin), '/dashboard/queue')).body;
    const waitsFor = new Map(
      body
        .split('<tr id="')
        .slice(1)
        .map((row) => [
          />([a-z]+)<\/a>/.exec(row)![1]!,
          [...row.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)][4]![1]!.trim(),
        ]),
    );
    expect(Object.fromEntries(waitsFor)).toEqual({
      again: 'od',
      once: 'spot',
      big: '<span class="bad">none fits</span>',
    });
  });

  it('a sign-in link works once, within 10 minutes, as the token that asked for it', async () => {
    const link = async () => {
      const r = await t.call(tokens.alice, {
        method: 'POST',
        url: '/v1/dashboard/signin-links',
        payload: {},
      });
      expect(r.statusCode).toBe(201);
      return r.json().path as string;
    };
    const path = await link();
    expect(path).toMatch(/^\/dashboard\/signin\?code=[\w-]{32}$/);
    const first = await get(null, path);
    expect(first.statusCode).toBe(303);
    const cookie = String(first.headers['set-cookie']).split(';')[0]!;
    expect((await get(cookie, '/dashboard')).body).toContain('alice');
    expect((await get(null, path)).statusCode).toBe(401);
    const late = await link();
    clock.advance(10 * 60_000 + 1);
    expect((await get(null, late)).statusCode).toBe(401);
    expect(
      (await t.call(tokens.dispatcher, { method: 'POST', url: '/v1/dashboard/signin-links', payload: {} }))
        .statusCode,
    ).toBe(403);
  });

  it('streams a container’s log tail and ends with its exit', async () => {
    const node = await t.node();
    const r = await submit('alice', { name: 'logger' });
    const cid = r.container_id!;
    await store.containers.lock([cid], 'c1/t1');
    await store.containers.assign(cid, 'c1/t1', node.instanceId, node.id);
    const [work] = (await store.containers.workFor(node.id, [])).start;
    await store.containers.start(cid, node.id, work!.lock_token);
    const chunks = [
      { seq: 0, stream: 'stdout' as const, data: 'line one\n' },
      { seq: 1, stream: 'stderr' as const, data: 'warning <b>\n' },
    ];
    await store.reports.send([{ kind: 'logs', id: cid, node: node.id, token: work!.lock_token, chunks }]);
    await store.containers.complete(cid, node.id, work!.lock_token, {
      exitCode: 0,
      oomKilled: false,
      usage: null,
    });
    const alice = await session(tokens.alice);
    const log = await get(alice, `/dashboard/containers/${cid}/log`);
    expect(log.headers['content-type']).toBe('text/event-stream');
    expect(log.body).toBe(
      [
        `id: 0\nevent: log\ndata: ${JSON.stringify({ seq: 0, stream: 'stdout', at: clock.now(), data: 'line one\n' })}`,
        `id: 1\nevent: log\ndata: ${JSON.stringify({ seq: 1, stream: 'stderr', at: clock.now(), data: 'warning <b>\n' })}`,
        `event: end\ndata: ${JSON.stringify({ state: 'Complete', exit_code: 0 })}`,
        '',
      ].join('\n\n'),
    );
    const page = await get(alice, `/dashboard/requests/${r.id}`);
    expect(page.body).toContain(`data-log="/dashboard/containers/${cid}/log"`);
  });

  it('answers no URL with a 5xx: hostile text in any path segment or query parameter of a page', async () => {
    const admin = await session(tokens.admin);
    const r = await submit('alice', { name: 'fuzzed' });
    const pages = [
      '/dashboard',
      '/dashboard/queue',
      '/dashboard/instances',
      '/dashboard/requests',
      '/dashboard/cost',
      `/dashboard/requests/${r.id}`,
      `/dashboard/containers/${r.container_id}`,
      '/dashboard/charts.json',
      '/dashboard/signin',
      '/dashboard/static/dashboard.css',
    ];
    const names = ['after', 'state', 'name', 'label', 'window', 'view', 'hours', 'next', 'code', 'by', 'x'];
    const hostile = fc.oneof(
      fc.constantFrom(
        '%00',
        '%ff',
        '%',
        '%c0%af',
        '%ed%a0%80',
        '1e16',
        '-1',
        '99999999999999999999',
        'x'.repeat(300),
      ),
      fc.string({ maxLength: 12 }).map(encodeURIComponent),
    );
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...pages),
        fc.boolean(),
        fc.constantFrom(...names),
        hostile,
        async (page, inPath, name, text) => {
          const url = inPath ? `${page.replace(/\/[^/]*$/, '')}/${text}` : `${page}?${name}=${text}`;
          const res = await get(admin, url);
          expect(res.statusCode, `${url} → ${res.statusCode} ${res.body.slice(0, 200)}`).toBeLessThan(500);
          const cookie = admin + '; x=1';
          // The form as a hostile client may send it: the text percent-encoded or deliberately not.
          const form = `${name}=${text}&_csrf=${text}&token=${text}`;
          // Each run from its own address: a failed sign-in slows its sender down (FailureThrottle).
          const from = `10.${(run >> 16) & 255}.${(run >> 8) & 255}.${run++ & 255}`;
          for (const post of ['/dashboard/signin', `/dashboard/instances/${inPath ? text : 'i-x'}/hold`]) {
            const p = await app.inject({
              method: 'POST',
              url: post,
              payload: form,
              headers: { ...FORM, cookie },
              remoteAddress: from,
            });
            expect(
              p.statusCode,
              `POST ${post} ${form} → ${p.statusCode} ${p.body.slice(0, 200)}`,
            ).toBeLessThan(500);
          }
        },
      ),
      {
        // At most 1,500 (about 20 s under shared load) even when CI asks the API's fuzz for 10,000.
        numRuns: Math.min(1500, Number(process.env.BERTH_FUZZ_RUNS ?? 300)),
        seed: Number(process.env.BERTH_FUZZ_SEED ?? 17),
      },
    );
  }, 180_000);

  it('serves its own files and the charting library, nothing else', async () => {
    expect((await get(null, '/dashboard/static/uplot.js')).body.length).toBeGreaterThan(10_000);
    expect((await get(null, '/dashboard/static/dashboard.js')).headers['content-type']).toMatch(/javascript/);
    expect((await get(null, '/dashboard/static/..%2Fpackage.json')).statusCode).toBe(404);
    expect((await get(null, '/dashboard/static/constructor')).statusCode).toBe(404);
  });
});
