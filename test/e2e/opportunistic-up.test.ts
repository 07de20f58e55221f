// Issue 16's done-when, end to end on local instances: real PostgreSQL, `berth server`, `berth dispatch`
// on the local driver (as root on cgroup v1 each instance is a slice sized to its type), its agents and
// the process runtime. A guaranteed container holds 10% of its memory request; the SCHEDULER (not the
// test) places an opportunistic one into the room it measurably does not use (the catalog leaves no free
// room for it on that instance); the guaranteed one then grows to ~100% of its request and burns its vcpus.
// It finishes with exit 0, no OOM kill and no throttling of its instance below its request; the borrower
// is frozen, reclaimed (its checkpoint kept: a `migrate` event), retried from its checkpoint, and its
// request ends with exactly one Complete container.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { cgroupsUnusable } from '../../src/agent/runtimes/cgroup.js';
import { slicePaths } from '../../src/cloud/local/machine.js';
import { testDb, type TestDb } from '../helpers/db.js';
import {
  assertBuilt,
  berthDaemon,
  killProcessesMentioning,
  startServer,
  testHome,
  until,
} from '../helpers/cli.js';
import { itIf } from '../helpers/needs.js';
import { destroyLocalInstances, localInstances } from '../helpers/up.js';

const MiB = 1024 * 1024;
/** The one instance type: 1 vcpu, 1 GiB. */
const TYPE = { name: 'lend', vcpus: 1, ram: '1GiB', price: 0.05 };
/** The guaranteed container's request: 768 MiB and 0.75 vcpus leave 256 MiB and 0.25 vcpus free. */
const G = { ram: 768 * MiB, vcpus: 0.75 };
/** The borrower's: more than that free room on both counts, so it only fits into lent room. */
const B = { ram: 384 * MiB, vcpus: 0.5 };

const cgroupsMissing = (await cgroupsUnusable()) ?? (process.getuid?.() === 0 ? null : 'not root');
const homes: string[] = [];
const daemons: ReturnType<typeof berthDaemon>[] = [];
let db: TestDb;
let dispatchHome = '';

beforeAll(async () => {
  assertBuilt();
  db = await testDb();
});

afterAll(async () => {
  for (const d of daemons.reverse()) await d.stop('SIGINT');
  // The dispatcher leaves its instances running (as a cloud's VMs outlive it): destroy what is left.
  const left = dispatchHome ? await destroyLocalInstances(dispatchHome) : [];
  for (const h of homes) {
    killProcessesMentioning(h);
    rmSync(h, { recursive: true, force: true });
  }
  expect(left, 'cgroups left behind').toEqual([]);
});

/**
 * The guaranteed container: holds 10% of its request (touched) until the file `grow` appears in its
 * working directory (the test writes it once the borrower runs), then grows in 4 MiB steps 100 ms apart
 * (~40 MiB/s: the 192 MiB of pressure_headroom the test sets, counted over the whole slice, are ~4 s of
 * growth for the watcher to free memory in, under load) to its request less 80 MiB (node's own ~45 MiB: ~95% in all), then burns CPU for 4 s, and says
 * when its grown phase began and ended (epoch ms) and the CPU seconds it used meanwhile.
 */
const guaranteed = `const fs = require('fs');
  const held = []; let n = 0; const step = 4 * 1048576;
  const hold = (bytes) => { while (n < bytes) { held.push(Buffer.alloc(step, 1)); n += step; } };
  hold(${Math.round(G.ram / 10)});
  console.log('holding ' + n);
  const waited = Date.now();
  const wait = () => {
    if (fs.existsSync('grow')) return grow();
    if (Date.now() - waited > 150000) { console.log('never told to grow'); process.exit(3); }
    setTimeout(wait, 100);
  };
  const grow = () => {
    if (n < ${G.ram - 80 * MiB}) { hold(n + step); return setTimeout(grow, 100); }
    const t0 = Date.now(); const c0 = process.cpuUsage();
    console.log('grown ' + n + ' at ' + t0);
    let x = 0; while (Date.now() - t0 < 4000) x++;
    const c = process.cpuUsage(c0); const t1 = Date.now();
    console.log('done at ' + t1 + ' cpu ' + ((c.user + c.system) / 1e6).toFixed(3) + ' held ' + held.length);
  };
  wait();`;

/**
 * The borrower: 300 MiB (touched) and a counter that burns ~0.4 CPU; on SIGUSR1 (a reclaim) it writes its
 * count to $BERTH_CHECKPOINT_DIR and exits. Restored from a checkpoint it counts 30 more and finishes;
 * a fresh start would take 2,000 ticks (over 3 minutes): only a reclaim ends its first attempt in time.
 */
const borrower = `const fs = require('fs'); const f = process.env.BERTH_CHECKPOINT_DIR + '/count';
  let n = fs.existsSync(f) ? Number(fs.readFileSync(f, 'utf8')) : 0; const first = n;
  const held = []; for (let i = 0; i < 75; i++) held.push(Buffer.alloc(4 * 1048576, 1));
  console.log('start ' + n);
  process.on('SIGUSR1', () => { fs.writeFileSync(f, String(n)); console.log('checkpoint ' + n); process.exit(0); });
  setInterval(() => {
    const t = Date.now(); while (Date.now() - t < 40);
    n++;
    if (n >= (first > 0 ? first + 30 : 2000)) { console.log('finished ' + n + ' held ' + held.length); process.exit(0); }
  }, 100);`;

/** cpu.stat of a v1 cgroup (nr_periods, nr_throttled, throttled_time in ns). */
function cpuStat(path: string): Record<string, number> {
  const text = readFileSync(join('/sys/fs/cgroup/cpu', path, 'cpu.stat'), 'utf8');
  return Object.fromEntries(
    text
      .trim()
      .split('\n')
      .map((l) => l.split(' '))
      .map(([k, v]) => [k!, Number(v)]),
  );
}

describe('opportunistic containers end to end (issue 16 done-when)', () => {
  itIf(cgroupsMissing)(
    'the scheduler lends a guaranteed container’s idle room; it grows back to its request with no OOM and no throttling below it; the borrower is frozen, migrated and finishes once',
    { timeout: 150_000 },
    async () => {
      const s = testHome('berth-opp-server-');
      homes.push(s.home);
      const serverEnv = { ...s.env, BERTH_DATABASE_URL: db.url };
      const { server, url } = await startServer(s.home, serverEnv);
      daemons.push(server);
      const token = readFileSync(join(s.home, 'admin-token'), 'utf8').trim();
      const api = async <T = Record<string, unknown>>(path: string, body?: unknown): Promise<T> => {
        const r = await fetch(`${url}${path}`, {
          method: body ? 'POST' : 'GET',
          headers: {
            authorization: `Bearer ${token}`,
            ...(body ? { 'content-type': 'application/json' } : {}),
          },
          body: body ? JSON.stringify(body) : undefined,
        });
        if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
        return (await r.json()) as T;
      };
      const logText = async (id: string, stream: string) =>
        (await api<{ items: { stream: string; data: string }[] }>(`/v1/containers/${id}/logs`)).items
          .filter((i) => i.stream === stream)
          .map((i) => i.data)
          .join('');
      const stdout = (id: string) => logText(id, 'stdout');
      const container = (id: string) => api(`/v1/containers/${id}`);

      // The dispatcher (and through its environment, its agents: they log at info, into agent.log).
      const d = testHome('berth-opp-dispatch-');
      homes.push(d.home);
      dispatchHome = d.home;
      const config = join(d.home, 'dispatch.json');
      writeFileSync(
        config,
        JSON.stringify({
          cluster: 'opp',
          instance_types: [TYPE],
          scheduler: {
            // A second instance for the reclaimed borrower's retry (it may not borrow again where it was
            // reclaimed, and there is no free room for it there while the guaranteed container runs).
            max_instances: 2,
            // Instance A stays (idle) until the test has read its agent's log and cgroups: an idle instance
            // is kept only while it is paid for anyway or arrivals are expected (shutdown.ts), and no
            // arrival follows here, so without this it went as soon as the guaranteed container ended
            // (lost from two CI runs, where the test is slow enough for A to outlive idle_timeout's reasons).
            min_billing_period: '10m',
            arrival_window: '3s',
            opportunistic_min_observation: '2s',
          },
          boot_delay: '200ms',
          sync_interval: '1s',
          tick_interval: '250ms',
        }),
      );
      const dispatcher = berthDaemon(['dispatch', '--config', config, '--log-level', 'error'], {
        ...d.env,
        BERTH_DATABASE_URL: db.url,
        BERTH_API_URL: url,
        BERTH_LOG_LEVEL: 'info',
        // The instances' agents inherit it: the watcher reclaims with 192 MiB free, not the default 64 MiB,
        // so that under CI's load a growth of ~40 MiB/s has seconds, not a sample or two, to be met. (The
        // watcher counts the whole slice, the agent's ~22 MiB beside the containers included: enclosingLimits
        // in src/agent/pressure.ts.) The rule under test is the same.
        BERTH_PRESSURE_HEADROOM: '192MiB',
      });
      daemons.push(dispatcher);

      // 1. The guaranteed container runs, holding 10% of its request.
      const gReq = await api('/v1/requests', {
        name: 'opp-guaranteed',
        command: ['node', '-e', guaranteed],
        vcpus: G.vcpus,
        ram: `${G.ram / MiB}MiB`,
      });
      const g = gReq.container_id as string;
      await until(
        async () => (await stdout(g)).includes('holding'),
        90_000,
        'the guaranteed container to hold 10%',
      );
      const gc = await container(g);
      // Its usage measured for longer than opportunistic_min_observation: the scheduler may lend its room.
      await until(
        async () => Number(((await container(g)).usage as { wall_ms?: number } | null)?.wall_ms ?? 0) > 3000,
        60_000,
        'the guaranteed container to be observed',
      );

      // 2. The borrower: placed by the scheduler next to it, into what it lends.
      const bReq = await api('/v1/requests', {
        name: 'opp-borrower',
        command: ['node', '-e', borrower],
        vcpus: B.vcpus,
        ram: `${B.ram / MiB}MiB`,
        opportunistic: true,
      });
      const b = bReq.container_id as string;
      await until(async () => (await stdout(b)).includes('start 0'), 90_000, 'the borrower to run');
      const bc = await container(b);
      expect(bc.instance_id, 'the borrower runs on the guaranteed container’s instance').toBe(gc.instance_id);
      const instances = localInstances(d.home);
      expect(instances).toHaveLength(1); // no instance was created for it
      const slice = instances[0]!.cgroup!;
      expect(slice).toBeTruthy();

      // 3. The guaranteed container grows; meanwhile the instance's CPU throttling is sampled.
      const scratch = join(d.home, 'instances', instances[0]!.id, 'work', 'containers', g, 'run', 'scratch');
      const samples: { at: number; slice: Record<string, number>; own: Record<string, number> }[] = [];
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          try {
            samples.push({
              at: Date.now(),
              slice: cpuStat(slice),
              own: cpuStat(`${slicePaths(slice).containers}/${g}`),
            });
          } catch {
            /* the container's group is gone once it ended */
          }
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      writeFileSync(join(scratch, 'grow'), 'now\n', { mode: 0o644 });
      const done = await until(
        async () => {
          const c = await container(g);
          return c.state === 'Complete' || c.state === 'Cancelled' || c.state === 'Failed' ? c : null;
        },
        90_000,
        'the guaranteed container to end',
      );
      sampling = false;
      await sampler;
      // How it ended first: a lost instance (its directory gone) says more here than a missing log file.
      const out = await stdout(g);
      expect(done, `${out}\ninstances: ${JSON.stringify(localInstances(d.home))}`).toMatchObject({
        state: 'Complete',
        exit_code: 0,
        oom_killed: false,
      });
      // The agent's own line: the watcher froze and reclaimed the borrower (instance A is kept, above).
      const agentLog = readFileSync(join(d.home, 'instances', instances[0]!.id, 'agent.log'), 'utf8');
      const freeze = agentLog
        .split('\n')
        .find((l) => l.includes('memory pressure: ') && l.includes(`reclaimed ${b}`));
      expect(freeze, 'the agent logs the reclaim of the borrower').toBeTruthy();
      console.log(`agent: ${freeze}`);
      const mem = (path: string, f: string) => {
        const file = join('/sys/fs/cgroup/memory', path, f);
        return existsSync(file) ? (Number(readFileSync(file, 'utf8')) / MiB).toFixed(0) : '?';
      };
      // The watcher counts the containers' group; the slice's limit holds the agent too.
      console.log(
        `the instance's peak ${mem(slice, 'memory.max_usage_in_bytes')} MiB ` +
          `(limit ${mem(slice, 'memory.limit_in_bytes')}), its agent's peak ` +
          `${mem(slicePaths(slice).agent, 'memory.max_usage_in_bytes')} MiB`,
      );
      const grown = /grown \d+ at (\d+)/.exec(out);
      const finished = /done at (\d+) cpu ([\d.]+) held (\d+)/.exec(out);
      expect(grown && finished, out).toBeTruthy();
      expect(Number(finished![3]) * 4 * MiB).toBeGreaterThan(0.85 * G.ram); // it did grow to ~100%

      // No throttling below its request. Its CPU seconds against request × wall time cannot say that on
      // this shared machine: another tenant's load takes CPU from it without any throttling (a quota-held
      // group got 0.08 CPU beside an unlimited 0.38 at load 15, docs/RUNTIMES.md). The cgroup's counters
      // can: its own group being throttled is its request at work; the instance's slice (1 vcpu) being
      // throttled holds everything in it back, below their requests, and with the borrower gone only the
      // guaranteed container (0.75) and the agent are left in it, so that must not happen in the grown
      // phase. The window is the samples strictly inside it (the program's own clock, same host).
      const [t0, t1] = [Number(grown![1]), Number(finished![1])];
      const inside = samples.filter((x) => x.at >= t0 && x.at <= t1);
      expect(inside.length, 'samples in the grown phase').toBeGreaterThan(10);
      const first = inside[0]!;
      const last = inside[inside.length - 1]!;
      const sliceThrottled = last.slice.nr_throttled! - first.slice.nr_throttled!;
      const ownThrottled = last.own.nr_throttled! - first.own.nr_throttled!;
      const cpu = Number(finished![2]);
      console.log(
        `grown phase ${((t1 - t0) / 1000).toFixed(1)} s: ${cpu} CPU s (request ${G.vcpus}); throttled ` +
          `periods: instance ${sliceThrottled} of ${last.slice.nr_periods! - first.slice.nr_periods!}, ` +
          `its own group ${ownThrottled} of ${last.own.nr_periods! - first.own.nr_periods!}`,
      );
      expect(
        sliceThrottled,
        'periods in which the instance was throttled, holding it below its request',
      ).toBe(0);
      expect(cpu).toBeGreaterThan(0);

      // 4. The borrower was frozen and reclaimed (checkpoint kept: migrated), and finished once.
      const events = await api<{ items: { kind: string; message: string }[] }>(`/v1/containers/${b}/events`);
      const kinds = events.items.map((e) => e.kind);
      const all = JSON.stringify(events.items);
      // Frozen first (its system log), then its checkpoint kept for the retry (migrate), handed back
      // (reclaim) and requeued (retry).
      expect(await logText(b, 'system')).toMatch(/reclaimed: frozen \(memory pressure: /);
      expect(events.items.find((e) => e.kind === 'reclaim')?.message, all).toMatch(
        /^reclaimed: memory pressure: /,
      );
      expect(kinds, all).toContain('migrate');
      expect(kinds.indexOf('retry'), all).toBeGreaterThan(kinds.indexOf('reclaim'));
      expect(await stdout(b)).toMatch(/checkpoint \d+/);
      const final = await until(
        async () => {
          const r = await api(`/v1/requests/${bReq.id as string}`);
          return r.state === 'Final' ? r : null;
        },
        90_000,
        'the borrower’s request to end',
      );
      expect(final).toMatchObject({ outcome: 'success', attempts: 1, temp_failures: 0 });
      const tries = (
        await db.pool.query<{ id: string; state: string; exit_code: number | null }>(
          `SELECT id, state, exit_code FROM containers WHERE request_id = $1 ORDER BY created_at`,
          [bReq.id],
        )
      ).rows;
      expect(tries.map((t) => t.state)).toEqual(['Cancelled', 'Complete']);
      expect(tries[1]!.exit_code).toBe(0);
      const retryOut = await stdout(tries[1]!.id);
      const saved = Number(/checkpoint (\d+)/.exec(await stdout(b))![1]);
      expect(retryOut).toContain(`start ${saved}\n`);
      expect(retryOut).toContain(`finished ${saved + 30} `);
      const retry = await container(tries[1]!.id);
      console.log(
        `borrower: frozen and reclaimed at count ${saved} on ${String(bc.instance_id)}, finished on ${String(retry.instance_id)}`,
      );
    },
  );
});
