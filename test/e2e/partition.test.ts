// A network partition (DESIGN §3.2, §3.4): the local driver runs each instance's agent in its own network
// namespace behind a veth pair; the test cuts one instance's link while its container runs. The node is
// declared failed after node_lost_after, its container is retried and completes on another instance; when
// the link comes back, the old agent's late reports are refused (its node token was revoked, its per-lock
// token is stale) and it stops. Exactly one container of the request completes.
//
// Real components: the API server and the dispatcher run in this process (with the embedded PostgreSQL),
// each agent is a real `berth agent` process in its own namespace. One thing is staged: the cloud's destroy
// of the partitioned instance fails (retryably) until the link is back, as when the cloud API is slow or
// unreachable. Otherwise the destroy would kill the partitioned agent at once and there would be no stale
// writer left to refuse. The API listens on 0.0.0.0 for this test only, so that agents reach it at their
// veth's host address; all traffic goes to loopback or to the addresses of the namespaces made here.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAlive } from '../../src/agent/runtimes/procfs.js';
import type { CloudInstance, Driver, Tags } from '../../src/cloud/driver.js';
import { CloudApiError } from '../../src/cloud/errors.js';
import { LocalDriver } from '../../src/cloud/local/driver.js';
import type { LocalInstanceRecord } from '../../src/cloud/local/instance-list.js';
import { apiUrlFor, netnsUnusable, removeNetns } from '../../src/cloud/local/netns.js';
import { loadConfig } from '../../src/config/options.js';
import { ConfigError } from '../../src/config/declare.js';
import { parseDispatchConfig } from '../../src/dispatch/config.js';
import type { DispatchEvent } from '../../src/dispatch/dispatcher.js';
import { startDispatcher, type RunningDispatcher } from '../../src/dispatch/run.js';
import type { InstanceType } from '../../src/model/types.js';
import { startServer } from '../../src/server/server.js';
import { assertBuilt, until } from '../helpers/cli.js';
import { itIf } from '../helpers/needs.js';

const missing = await netnsUnusable();
const itNetns = itIf(missing);

/** The cloud as the dispatcher sees it, except that destroying a held instance fails for now. */
class HoldingDriver implements Driver {
  readonly held = new Set<string>();
  refused = 0;
  constructor(readonly inner: LocalDriver) {}
  create(type: InstanceType, tags: Tags, bootData: string): Promise<CloudInstance> {
    return this.inner.create(type, tags, bootData);
  }
  list(tagFilter: Tags): Promise<CloudInstance[]> {
    return this.inner.list(tagFilter);
  }
  setTags(id: string, tags: Tags): Promise<void> {
    return this.inner.setTags(id, tags);
  }
  async destroy(id: string): Promise<void> {
    if (this.held.has(id)) {
      this.refused++;
      throw new CloudApiError('destroy held by the test (the cloud API is unreachable)', true);
    }
    return this.inner.destroy(id);
  }
}

let home: string;
let marks: string;
let server: Awaited<ReturnType<typeof startServer>> | null = null;
let disp: RunningDispatcher | null = null;
let local: LocalDriver;
let driver: HoldingDriver;
const events: DispatchEvent[] = [];

function records(): LocalInstanceRecord[] {
  const text = existsSync(join(home, 'instances.json'))
    ? readFileSync(join(home, 'instances.json'), 'utf8')
    : null;
  return text ? (JSON.parse(text) as { instances: LocalInstanceRecord[] }).instances : [];
}

function namespaces(): string[] {
  return execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0]!)
    .filter(Boolean);
}

function linkExists(dev: string): boolean {
  try {
    execFileSync('ip', ['link', 'show', dev], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function leftovers(): number[] {
  try {
    return execFileSync('pgrep', ['-f', home], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number)
      .filter((pid) => pid !== process.pid);
  } catch {
    return [];
  }
}

beforeAll(() => {
  if (missing) return;
  assertBuilt();
  home = mkdtempSync(join(tmpdir(), 'berth-partition-'));
  chmodSync(home, 0o711); // as root, PostgreSQL runs as postgres and must reach home/pgdata
  marks = mkdtempSync(join(tmpdir(), 'berth-partition-marks-'));
});

afterAll(async () => {
  if (missing) return;
  driver?.held.clear();
  await disp?.stop().catch(() => {});
  // Every instance, through the driver: agents and containers killed first, then namespace and veth.
  for (const r of records()) if (r.state === 'running') await local.destroy(r.id).catch(() => {});
  await server?.stop().catch(() => {});
  for (const pid of leftovers()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  // Whatever a failure left: namespaces are deleted only after their processes are killed (removeNetns
  // kills what still runs inside first).
  for (const r of records()) if (r.netns) await removeNetns(r.netns);
  rmSync(home, { recursive: true, force: true });
  rmSync(marks, { recursive: true, force: true });
}, 120_000);

describe('network partition', () => {
  itNetns(
    'a partitioned node is failed and its container completes elsewhere; the old agent is refused and stops',
    { timeout: 240_000 },
    async () => {
      // BERTH_TEST_LOG_LEVEL=error shows the server's log when debugging this test.
      const cfg = loadConfig(
        { home, listen: '0.0.0.0:0', log_level: process.env.BERTH_TEST_LOG_LEVEL ?? 'silent' },
        {},
      );
      server = await startServer(cfg);
      const port = new URL(server.url).port;
      const api = `http://127.0.0.1:${port}`;
      const admin = readFileSync(join(home, 'admin-token'), 'utf8').trim();
      const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
        const r = await fetch(`${api}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${admin}`,
            ...(body ? { 'content-type': 'application/json' } : {}),
          },
          body: body ? JSON.stringify(body) : undefined,
        });
        if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
        return (await r.json()) as T;
      };

      const dcfg = parseDispatchConfig({
        cluster: 'part',
        instance_types: [{ name: 'small', vcpus: 1, ram: '1GiB', price: 0.05 }],
        scheduler: { idle_timeout: '60s', max_instances: 3 },
        node_lost_after: '5s',
        boot_delay: '200ms',
        tick_interval: '300ms',
        sync_interval: '1s',
        shutdown_retry: '1s',
        netns: true,
      });
      expect(dcfg.netns).toBe(true);
      local = new LocalDriver({
        home,
        bootDelayMs: dcfg.bootDelayMs,
        netns: dcfg.netns,
        runtime: 'process',
        // pings well inside node_lost_after: a long poll counts as one ping; info: the log says "registered".
        // The containers coordinate with the test through files in a host directory, which a sandbox would
        // hide from them: this test is about partitions, so its containers run unsandboxed (the operator's
        // explicit opt-out).
        agentArgs: ['--ping-wait', '1s', '--log-level', 'info', '--process-sandbox', 'none'],
        stopGraceMs: 2000,
      });
      driver = new HoldingDriver(local);
      disp = await startDispatcher({
        cfg: dcfg,
        store: server.store,
        dbUrl: server.db.url,
        notifier: server.notifier,
        driver,
        apiUrl: server.url,
        onEvent: (e) => events.push(e),
      });

      // The first attempt takes the `first` mark and waits for `finish-first`; any later attempt finishes.
      const script = [
        `if mkdir ${marks}/first 2>/dev/null; then`,
        `echo first; while [ ! -e ${marks}/finish-first ]; do sleep 0.1; done; echo late; touch ${marks}/first-done;`,
        `else echo second; fi`,
      ].join(' ');
      const req = await call<{ id: string; container_id: string }>('POST', '/v1/requests', {
        name: 'partition',
        command: ['/bin/sh', '-c', script],
        vcpus: 0.5,
        ram: '128MiB',
      });
      const first = req.container_id;
      type Ctr = {
        id: string;
        state: string;
        instance_id: string | null;
        node_id: string | null;
        failure_class: string | null;
      };
      const container = (id: string) => call<Ctr>('GET', `/v1/containers/${id}`);
      const running = await until(
        async () => {
          const c = await container(first);
          return c.state === 'Running' && existsSync(`${marks}/first`) ? c : null;
        },
        60_000,
        'the first attempt to run',
      );
      const rec = records().find((r) => r.id === running.instance_id);
      expect(rec?.netns, 'the instance runs in a network namespace').toBeDefined();
      const link = rec!.netns!;
      expect(namespaces()).toContain(link.name);
      expect(linkExists(link.hostDev)).toBe(true);
      expect(link.hostAddr).toMatch(/^10\.213\.\d+\.\d+$/);
      // The agent's log, held open: the driver removes the instance's directory once the agent is gone.
      const logFd = openSync(join(rec!.dir, 'agent.log'), 'r');
      const agentLog = () => {
        const buf = Buffer.alloc(1 << 20);
        const n = readSync(logFd, buf, 0, buf.length, 0);
        return buf.subarray(0, n).toString('utf8');
      };
      try {
        expect(agentLog()).toMatch(/registered/);

        // Cut the link for longer than node_lost_after.
        driver.held.add(rec!.id);
        execFileSync('ip', ['link', 'set', link.hostDev, 'down']);
        const failed = await until(
          async () => {
            const c = await container(first);
            return c.state === 'Cancelled' ? c : null;
          },
          30_000,
          'the partitioned node to be failed and its container cancelled',
        );
        expect(failed.failure_class).toBe('temp');
        const nodes = await call<{ items: { id: string; state: string }[] }>('GET', '/v1/nodes');
        expect(nodes.items.find((n) => n.id === running.node_id)?.state).toBe('failed');
        expect(events.some((e) => e.kind === 'node-lost' && e.node === running.node_id)).toBe(true);
        // Still alive behind the cut: it cannot know yet.
        expect(await isAlive(rec!.process!)).toBe(true);

        // The first attempt ends while partitioned: its completion cannot be reported.
        writeFileSync(`${marks}/finish-first`, '');
        await until(() => existsSync(`${marks}/first-done`), 30_000, 'the first attempt to end');

        // Retried (temp backoff) and completed on another instance.
        const done = await until(
          async () => {
            const cs = await call<{ items: Ctr[] }>('GET', `/v1/containers?request_id=${req.id}`);
            return cs.items.find((c) => c.id !== first && c.state === 'Complete') ?? null;
          },
          120_000,
          'the retry to complete',
        );
        expect(done.instance_id).not.toBe(rec!.id);
        expect(driver.refused, 'the dispatcher tried to destroy the lost instance').toBeGreaterThan(0);

        // Bring the link back: the old agent's reports are refused and it stops by itself.
        execFileSync('ip', ['link', 'set', link.hostDev, 'up']);
        await until(async () => !(await isAlive(rec!.process!)), 90_000, 'the old agent to stop');
        expect(agentLog()).toMatch(/node token revoked or unknown|was declared failed/);
      } finally {
        closeSync(logFd);
      }

      // Exactly one completion; the stale attempt stays Cancelled and its late output was not taken.
      const after = await container(first);
      expect(after.state).toBe('Cancelled');
      const all = await call<{ items: Ctr[] }>('GET', `/v1/containers?request_id=${req.id}`);
      expect(all.items.filter((c) => c.state === 'Complete').length).toBe(1);
      const request = await call<{ state: string; outcome: string }>('GET', `/v1/requests/${req.id}`);
      expect(request).toMatchObject({ state: 'Final', outcome: 'success' });
      const logs = await call<{ items: { data: string }[] }>('GET', `/v1/containers/${first}/logs`);
      expect(logs.items.map((c) => c.data).join('')).not.toMatch(/late/);
      const events1 = await call<{ items: { message: string }[] }>('GET', `/v1/containers/${first}/events`);
      expect(events1.items.some((e) => e.message.startsWith('Complete'))).toBe(false);

      // Once the cloud lets it, the instance goes, and with it its namespace and veth.
      driver.held.delete(rec!.id);
      await until(
        () =>
          records().find((r) => r.id === rec!.id)?.state === 'terminated' &&
          !namespaces().includes(link.name) &&
          !linkExists(link.hostDev),
        30_000,
        'the old instance, its namespace and its veth to be gone',
      );
    },
  );

  itNetns(
    'every namespace and veth made by the test is gone after destroy',
    { timeout: 60_000 },
    async () => {
      expect(disp, 'the partition test ran').not.toBeNull();
      await disp!.stop();
      disp = null;
      for (const r of records()) if (r.state === 'running') await local.destroy(r.id);
      const made = records().filter((r) => r.netns);
      expect(made.length).toBeGreaterThanOrEqual(2);
      const ns = namespaces();
      for (const r of made) {
        expect(ns).not.toContain(r.netns!.name);
        expect(linkExists(r.netns!.hostDev)).toBe(false);
      }
    },
  );

  it('the netns option: a dispatch config boolean; agents get the API URL at their veth host address', () => {
    expect(parseDispatchConfig({}).netns).toBe(false);
    expect(parseDispatchConfig({ netns: true }).netns).toBe(true);
    expect(() => parseDispatchConfig({ netns: 'yes' })).toThrow(ConfigError);
    expect(() => parseDispatchConfig({ netns: 'yes' })).toThrow(/netns: expected true or false, got "yes"/);
    const link = { name: 'berth-x', hostDev: 'bhx', hostAddr: '10.213.7.9', nsAddr: '10.213.7.10' };
    expect(apiUrlFor(link, 'http://0.0.0.0:8470')).toBe('http://10.213.7.9:8470');
    expect(apiUrlFor(link, 'http://127.0.0.1:41234/')).toBe('http://10.213.7.9:41234');
  });
});
