// The chaos run on the emulated EC2 (`npm run chaos -- --driver ec2-emulated`): real time and real
// processes. A `berth server` (its embedded PostgreSQL) and a `berth dispatch` child process using the ec2
// driver against the EC2 emulator (moto behind Berth's fault proxy; the booter starts each instance's
// cloud-init script, so every instance runs a real `berth agent` with the process runtime). A seeded fault
// document drives the proxy: capacity errors in one zone and for one type in another, a vCPU quota error,
// throttling (RunInstances, TerminateInstances, DescribeInstances), lost RunInstances and
// TerminateInstances answers (the call took effect); the run adds spot interruptions (the IMDS notice on
// spot instances that run a container) and one SIGKILL of the dispatcher, followed by a new one.
// Checked at the end: nothing lost, nothing run twice (checks.ts, shared with the virtual-time run), every
// node got at most one instance (lost answers retried with the same ClientToken), no instance left running,
// and every kind of fault actually fired.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DescribeInstancesCommand, type Instance } from '@aws-sdk/client-ec2';
import { defaultBerthBin } from '../cloud/local/driver.js';
import { liveInstances } from '../cloud/ec2-emu/util.js';
import { startEmulatedCloud, stopEmulatedCloud, type EmulatedCloud } from '../cli/up-ec2-emulated.js';
import { TAG } from '../dispatch/pool.js';
import { seededRng } from '../model/clock.js';
import { ADMIN_TOKEN_FILE, API_URL_FILE } from '../server/files.js';
import { createPool, withDatabase, type Db } from '../store/db.js';
import { runningEmbeddedUrl } from '../store/embedded.js';
import { list, neverTwiceCheck, outcomeChecks, type Check } from './checks.js';
import type { ChaosResult } from './run.js';

export interface Ec2ChaosOptions {
  containers: number;
  seed: number;
  /** Give up (failed checks) after this much wall time. Default 10 min. */
  wallLimitMs?: number;
  /** Stops the run early (failed checks); every process and file is still cleaned up. */
  signal?: AbortSignal;
  log?: (line: string) => void;
}

/** Spot interruptions the run delivers, at these shares of requests finished. */
const INTERRUPT_AT = [0.05, 0.35];
/** The dispatcher is killed (SIGKILL) once this share of requests has finished. */
const KILL_AT = 0.25;
/** How long after its notice an interrupted instance is terminated (AWS: two minutes). */
const NOTICE_MS = 3_000;
const POLL_MS = 250;

/** The fault document (faults.ts) for the proxy: `subnets` are the dispatcher's, in its order. */
export function faultPlan(seed: number, subnets: string[]): unknown {
  return {
    seed,
    latency: '20ms',
    rules: [
      // The first on-demand create's answer is lost: its retry (same ClientToken) is answered with the
      // instance it made, and nothing but a lost answer could befall that retry (no spot-only rule applies).
      { action: 'RunInstances', error: 'lost-response', market: 'on-demand', times: 1 },
      { action: 'RunInstances', error: 'lost-response', market: 'spot', times: 1, probability: 0.5 },
      { action: 'RunInstances', error: 'InsufficientInstanceCapacity', subnet: subnets[0], times: 4 },
      {
        action: 'RunInstances',
        error: 'InsufficientInstanceCapacity',
        instance_type: 't3.small',
        market: 'on-demand',
        subnet: subnets[1],
        times: 1,
      },
      { action: 'RunInstances', error: 'VcpuLimitExceeded', market: 'on-demand', times: 1 },
      { action: 'RunInstances', error: 'RequestLimitExceeded', market: 'spot', times: 2, probability: 0.3 },
      { action: 'TerminateInstances', error: 'RequestLimitExceeded', times: 1 },
      { action: 'TerminateInstances', error: 'lost-response', times: 1 },
      { action: 'DescribeInstances', error: 'RequestLimitExceeded', times: 2, probability: 0.2 },
    ],
  };
}

/** A child `berth` process and everything it printed. */
interface Child {
  proc: ChildProcess;
  out: string[];
  exited: Promise<number | string>;
}

function startBerth(args: string[], env: NodeJS.ProcessEnv): Child {
  const proc = spawn(process.execPath, [defaultBerthBin(), ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: string[] = [];
  proc.stdout!.on('data', (b: Buffer) => out.push(b.toString()));
  proc.stderr!.on('data', (b: Buffer) => out.push(b.toString()));
  const exited = new Promise<number | string>((r) =>
    proc.on('exit', (code, signal) => r(code ?? signal ?? 'unknown')),
  );
  return { proc, out, exited };
}

/** Asks a child to stop (SIGINT), then kills it after `graceMs`. */
async function stopChild(c: Child | null, graceMs = 30_000): Promise<void> {
  if (!c || c.proc.exitCode !== null || c.proc.signalCode !== null) return;
  c.proc.kill('SIGINT');
  const t = setTimeout(() => c.proc.kill('SIGKILL'), graceMs);
  await c.exited;
  clearTimeout(t);
}

/** Waits for `f` to give a truthy value, polling; throws naming `what` at the deadline or on abort. */
async function until<T>(f: () => Promise<T> | T, deadline: number, what: string, signal?: AbortSignal) {
  for (;;) {
    const v = await f();
    if (v) return v;
    if (signal?.aborted) throw new Error(`interrupted while waiting for ${what}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** Every instance moto holds, in any state (terminated ones included). */
async function allInstances(cloud: EmulatedCloud): Promise<Instance[]> {
  const out: Instance[] = [];
  let NextToken: string | undefined;
  do {
    const page = await cloud.emulator.direct.send(new DescribeInstancesCommand({ NextToken }));
    for (const r of page.Reservations ?? []) out.push(...(r.Instances ?? []));
    NextToken = page.NextToken || undefined;
  } while (NextToken);
  return out;
}

export async function runEc2Chaos(o: Ec2ChaosOptions): Promise<ChaosResult> {
  const log = o.log ?? (() => {});
  const wallStart = Date.now();
  const deadline = wallStart + (o.wallLimitMs ?? 10 * 60_000);
  const home = mkdtempSync(join(tmpdir(), 'berth-chaos-ec2-'));
  chmodSync(home, 0o755); // as root, PostgreSQL runs as postgres and must reach it
  const checks: Check[] = [];
  const add = (name: string, ok: boolean, detail: string) => checks.push({ name, ok, detail });
  const faults: string[] = [];
  const figures: Record<string, number | string> = {};
  const injected: Record<string, number> = {};
  let cloud: EmulatedCloud | null = null;
  let server: Child | null = null;
  let dispatcher: Child | null = null;
  const dispatchers: Child[] = [];
  let db: Db | null = null;
  try {
    cloud = await startEmulatedCloud(log, ['--process-sandbox', 'none']);
    const ec2 = cloud.dispatch.ec2 as { subnets: string[] };
    cloud.emulator.setFaults(faultPlan(o.seed, ec2.subnets));
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      BERTH_HOME: home,
      AWS_ACCESS_KEY_ID: cloud.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: cloud.credentials.secretAccessKey,
      BERTH_LOG_LEVEL: 'warn',
    };
    server = startBerth(['server', '--listen', `${cloud.listenHost}:0`], env);
    const apiUrl = (
      await until(
        () =>
          existsSync(join(home, API_URL_FILE)) ? readFileSync(join(home, API_URL_FILE), 'utf8').trim() : '',
        deadline,
        'the API server',
        o.signal,
      )
    ).replace(/\/$/, '');
    const token = readFileSync(join(home, ADMIN_TOKEN_FILE), 'utf8').trim();
    db = createPool(withDatabase(runningEmbeddedUrl(join(home, 'pgdata'))!, 'berth'), 2);
    const config = join(home, 'dispatch.json');
    writeFileSync(
      config,
      JSON.stringify({
        ...cloud.dispatch,
        cluster: 'chaos',
        scheduler: { idle_timeout: '3s', arrival_window: '3s', max_instances: 8 },
        sync_interval: '2s',
        tick_interval: '1s',
        quota_ttl: '10s',
        capacity_ttl: '20s',
      }),
    );
    const dispatch = () => {
      const d = startBerth(['dispatch', '--config', config], env);
      dispatchers.push(d);
      return d;
    };
    dispatcher = dispatch();

    // The workload: every other request preemptible, and 2 s longer (spot instances run work when the
    // interruptions come).
    const rng = seededRng(o.seed);
    const requests = Array.from({ length: o.containers }, (_, i) => ({
      name: `chaos-${i}`,
      command: [
        '/bin/sh',
        '-c',
        `echo start ${i}; sleep ${1 + Math.floor(rng() * 6) / 2 + (i % 2 === 0 ? 2 : 0)}; echo end ${i}`,
      ],
      vcpus: 1,
      ram: '512MiB',
      preemptible: i % 2 === 0,
    }));
    const r = await fetch(`${apiUrl}/v1/requests/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ requests }),
    });
    if (!r.ok) throw new Error(`submitting the workload: ${r.status} ${await r.text()}`);
    const submittedAt = Date.now();
    log(`submitted ${o.containers} requests`);

    const q = async (sql: string, args: unknown[] = []) => (await db!.query(sql, args)).rows;
    const finished = async () =>
      (await q(`SELECT count(*)::int AS n FROM container_requests WHERE state = 'Final'`))[0].n as number;
    const interrupted = new Set<string>();
    let killed = false;
    let drainedAt: number | null = null;
    try {
      await until(
        async () => {
          const done = await finished();
          const share = done / o.containers;
          if (!killed && share >= KILL_AT) {
            killed = true;
            dispatcher!.proc.kill('SIGKILL');
            await dispatcher!.exited;
            faults.push(`dispatcher killed (SIGKILL) with ${done} of ${o.containers} requests finished`);
            dispatcher = dispatch();
          }
          if (interrupted.size < INTERRUPT_AT.length && share >= INTERRUPT_AT[interrupted.size]!) {
            const busy = new Set(
              (await q(`SELECT DISTINCT instance_id FROM containers WHERE state = 'Running'`)).map(
                (c) => c.instance_id as string,
              ),
            );
            const spot = (await liveInstances(cloud!.emulator.direct)).find(
              (i) =>
                i.InstanceLifecycle === 'spot' &&
                busy.has(i.InstanceId!) &&
                !interrupted.has(i.InstanceId!) &&
                cloud!.emulator.booter?.get(i.InstanceId!),
            );
            if (spot) {
              cloud!.emulator.interrupt(spot.InstanceId!, 'terminate', NOTICE_MS);
              interrupted.add(spot.InstanceId!);
              faults.push(`spot interruption of ${spot.InstanceId} with ${done} requests finished`);
            }
          }
          return done === o.containers;
        },
        deadline,
        'every request to finish',
        o.signal,
      );
      drainedAt = Date.now();
      figures['submit → all finished (s)'] = Math.round((drainedAt - submittedAt) / 100) / 10;
      // Idle instances go after idle_timeout; then the booter stops their machines.
      await until(
        async () => (await cloud!.emulator.liveInstances()).length === 0,
        deadline,
        'every instance to be terminated',
        o.signal,
      );
      figures['all finished → no instance left (s)'] = Math.round((Date.now() - drainedAt) / 100) / 10;
      await until(
        () => (cloud!.emulator.booter?.list().length ?? 0) === 0,
        deadline,
        'every booted machine to stop',
        o.signal,
      );
    } catch (err) {
      faults.push(`gave up: ${(err as Error).message}`);
    }
    await stopChild(dispatcher);

    // Nothing lost (every request Final, succeeded, one exit-0 container): shared with the virtual run.
    const { cs, byReq } = await outcomeChecks(
      db,
      o.containers,
      add,
      'every request succeeds (the injected faults only ever end a container as a temp failure)',
    );
    // Nothing run twice: the events (shared), and each successful container's output once.
    checks.push(await neverTwiceCheck(db, byReq, null));
    const logs = await q(
      `SELECT c.id, r.name, string_agg(l.data, '' ORDER BY l.seq) AS out
       FROM containers c JOIN container_requests r ON r.id = c.request_id
       LEFT JOIN log_chunks l ON l.container_id = c.id AND l.stream = 'stdout'
       WHERE c.state = 'Complete' AND c.exit_code = 0 GROUP BY c.id, r.name`,
    );
    const badOutput = logs.filter((l) => {
      const i = (l.name as string).slice('chaos-'.length);
      return l.out !== `start ${i}\nend ${i}\n`;
    });
    add(
      "each successful container's output shows one start and one end",
      logs.length === o.containers && badOutput.length === 0,
      `${logs.length} outputs read${badOutput.length ? `; wrong: ${list(badOutput.map((l) => `${l.name}: ${JSON.stringify(l.out)}`))}` : ''}`,
    );
    const cancelled = cs.filter((c) => c.state === 'Cancelled');
    const notByInterruption = cancelled.filter(
      (c) => c.failure_class !== 'temp' || !interrupted.has(c.instance_id as string),
    );
    add(
      'nothing but the spot interruptions ended a container (each such one a temp failure)',
      notByInterruption.length === 0,
      `${cancelled.length} containers cancelled${notByInterruption.length ? `; not by an interruption: ${list(notByInterruption.map((c) => `${c.id} on ${c.instance_id} ${c.failure_class}: ${c.runtime_status}`))}` : ', all on interrupted instances'}`,
    );

    // Lost answers were retried with the same ClientToken: one instance per node (and per token).
    const all = await allInstances(cloud);
    const perNode = new Map<string, string[]>();
    const perToken = new Map<string, string[]>();
    for (const i of all) {
      const node = i.Tags?.find((t) => t.Key === TAG.node)?.Value ?? '(no node tag)';
      perNode.set(node, [...(perNode.get(node) ?? []), i.InstanceId!]);
      if (i.ClientToken) perToken.set(i.ClientToken, [...(perToken.get(i.ClientToken) ?? []), i.InstanceId!]);
    }
    const twiceMade = [...perNode, ...perToken].filter(([, ids]) => ids.length > 1);
    add(
      'every node (every RunInstances ClientToken) made at most one instance',
      all.length > 0 && twiceMade.length === 0,
      `${all.length} instances for ${perNode.size} nodes (${perToken.size} client tokens listed)${twiceMade.length ? `; more than one: ${list(twiceMade.map(([k, ids]) => `${k}: ${ids.join(', ')}`))}` : ''}`,
    );
    const left = await cloud.emulator.liveInstances();
    add(
      'after the queue drained no emulated instance is left running (and no booted machine)',
      drainedAt !== null && left.length === 0 && (cloud.emulator.booter?.list().length ?? 0) === 0,
      drainedAt === null
        ? 'the queue never drained'
        : `${left.length} pending or running${left.length ? `: ${list(left)}` : ''}; ${cloud.emulator.booter?.list().length ?? 0} machines booted`,
    );

    // Every kind of fault fired (a run that injects nothing would pass every check above).
    const calls = cloud.emulator.proxy.callCounts();
    const n = (action: string, outcome: string) => calls[action]?.[outcome] ?? 0;
    const sum = (outcome: string) => Object.values(calls).reduce((s, m) => s + (m[outcome] ?? 0), 0);
    Object.assign(injected, {
      'RunInstances answers lost': n('RunInstances', 'lost-response'),
      'RunInstances replayed for a repeated ClientToken': n('RunInstances', 'replayed'),
      'TerminateInstances answers lost': n('TerminateInstances', 'lost-response'),
      'capacity errors (InsufficientInstanceCapacity)': n('RunInstances', 'InsufficientInstanceCapacity'),
      'quota errors (VcpuLimitExceeded)': n('RunInstances', 'VcpuLimitExceeded'),
      'throttled calls (RequestLimitExceeded)': sum('RequestLimitExceeded'),
      'spot interruptions': interrupted.size,
      'dispatcher kills': faults.filter((f) => f.startsWith('dispatcher killed')).length,
    });
    const missing = Object.entries(injected).filter(([k, v]) =>
      k === 'dispatcher kills' ? v !== 1 : k === 'spot interruptions' ? v !== INTERRUPT_AT.length : v === 0,
    );
    add(
      'every kind of fault fired (lost answers, capacity, quota, throttling, spot interruptions, one dispatcher kill)',
      missing.length === 0,
      missing.length === 0
        ? 'all of them'
        : `not as planned: ${missing.map(([k, v]) => `${k} ${v}`).join('; ')}`,
    );

    figures['instances created'] = all.length;
    figures['RunInstances calls'] = Object.values(calls.RunInstances ?? {}).reduce((s, v) => s + v, 0);
    figures['containers cancelled'] = cancelled.length;
    figures['containers'] = cs.length;
    figures['dispatcher processes'] = dispatchers.length;
    figures['wall time (s)'] = Math.round((Date.now() - wallStart) / 100) / 10;
    const gaveUp = faults.filter((f) => f.startsWith('gave up'));
    if (gaveUp.length) add('the run finished within its wall limit', false, gaveUp.join('; '));
  } catch (err) {
    add('the run itself', false, (err as Error).stack ?? String(err));
  } finally {
    for (const d of dispatchers) await stopChild(d);
    await db?.end().catch(() => {});
    if (cloud) await stopEmulatedCloud(cloud, log);
    await stopChild(server);
    if (server && checks.some((c) => !c.ok)) log(`berth server said:\n${server.out.join('').slice(-3000)}`);
    for (const d of dispatchers)
      if (checks.some((c) => !c.ok)) log(`berth dispatch said:\n${d.out.join('').slice(-3000)}`);
    rmSync(home, { recursive: true, force: true });
  }
  return {
    options: { containers: o.containers, seed: o.seed },
    checks,
    figures,
    injected,
    faults,
    ok: checks.length > 0 && checks.every((c) => c.ok),
  };
}
