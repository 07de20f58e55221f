// A real API server (buildApi on a real port, with a Notifier) over a test database, and agents against
// it: in-process (fast) or spawned from dist/ (for crash and restart). The "dispatcher" is the store
// itself (lock + assign), because the real one is written elsewhere. Everything started here is stopped,
// killed and removed by `cleanup()`, also when a test fails.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect } from 'vitest';
import { Agent, type AgentOptions } from '../../src/agent/agent.js';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';
import { VmRuntime } from '../../src/agent/runtimes/vm.js';
import { CGROUP_ROOT } from '../../src/agent/runtimes/cgroup.js';
import { buildApi } from '../../src/api/server.js';
import { createLogger, formatLine } from '../../src/log/logger.js';
import type { RequestInput } from '../../src/model/request.js';
import { Notifier } from '../../src/store/notifier.js';
import type { Store } from '../../src/store/store.js';
import type { Principal } from '../../src/store/tokens.js';
import { assertBuilt, BIN, until } from '../helpers/cli.js';
import { submit, testStore } from '../helpers/store.js';

export const DISPATCHER = 'd-test';

/** The user who submits these tests' requests (helpers/store.ts submit), for the calls made as her. */
export const alice: Principal = {
  tokenId: 0,
  scope: 'user',
  owner: 'alice',
  nodeId: null,
  dispatcherId: null,
  maxPriority: null,
};

/** Waits for a condition with a deadline (the shared helper, re-exported for these tests). */
export { until };

export interface SpawnedAgent {
  child: ChildProcess;
  output(): string;
  exited: Promise<number>;
}

export class Harness {
  store!: Store;
  url = '';
  port = 0;
  private app: FastifyInstance | null = null;
  private front: Server | null = null;
  private apiPort = 0;
  private readonly relayed = new Set<Socket>();
  private notifier: Notifier | null = null;
  private dbUrl = '';
  private readonly dirs: string[] = [];
  private readonly agents: Agent[] = [];
  private readonly agentRuns: Promise<unknown>[] = [];
  private readonly children: ChildProcess[] = [];
  /** Work dirs of agents, to find containers left behind. */
  private readonly workDirs: string[] = [];
  private cleaned = false;
  /** The API's checkpoint_limit (default: the declared one). */
  private checkpointLimitBytes: number | undefined;

  static async create(opts: { checkpointLimitBytes?: number } = {}): Promise<Harness> {
    const h = new Harness();
    await h.start(opts);
    return h;
  }

  /**
   * The test file's harness: started before its tests (dist/ built), cleaned up after them, also when they
   * failed, and then no cgroup of the containers in `ids` (the file adds them) may be left.
   */
  static forFile(ids: string[] = [], opts: { checkpointLimitBytes?: number } = {}): Harness {
    const h = new Harness();
    beforeAll(async () => {
      assertBuilt();
      await h.start(opts);
    });
    afterAll(async () => {
      await h.cleanup();
      expect(Harness.leftCgroups(ids)).toEqual([]);
    });
    return h;
  }

  private async start(opts: { checkpointLimitBytes?: number }): Promise<void> {
    this.checkpointLimitBytes = opts.checkpointLimitBytes;
    const { store, db } = await testStore();
    this.store = store;
    this.dbUrl = db.url;
    this.notifier = new Notifier(db.url);
    await this.notifier.start();
    await this.startFront();
    await this.apiUp();
  }

  /**
   * The address agents use: a TCP relay in front of the API, so that the API can go down and come back
   * while the port stays ours (another process could take a freed port in between).
   */
  private async startFront(): Promise<void> {
    this.front = createServer((sock) => {
      if (this.apiPort === 0) return void sock.destroy();
      const up = connect(this.apiPort, '127.0.0.1');
      this.relayed.add(sock).add(up);
      const drop = () => {
        sock.destroy();
        up.destroy();
        this.relayed.delete(sock);
        this.relayed.delete(up);
      };
      sock.on('error', drop).on('close', drop);
      up.on('error', drop).on('close', drop);
      sock.pipe(up).pipe(sock);
    });
    await new Promise<void>((r) => this.front!.listen(0, '127.0.0.1', r));
    this.port = (this.front.address() as AddressInfo).port;
    this.url = `http://127.0.0.1:${this.port}`;
  }

  /** Starts the API server (again). */
  async apiUp(): Promise<void> {
    const app = await buildApi({
      store: this.store,
      notifier: this.notifier,
      bodyLimit: 16 * 1024 * 1024,
      ...(this.checkpointLimitBytes !== undefined ? { checkpointLimitBytes: this.checkpointLimitBytes } : {}),
    });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    this.app = app;
    this.apiPort = Number(new URL(url).port);
  }

  /** Stops the API server (the database stays): open connections are cut, new ones refused. */
  async apiDown(): Promise<void> {
    const app = this.app;
    this.app = null;
    this.apiPort = 0;
    for (const s of this.relayed) s.destroy();
    this.relayed.clear();
    if (!app) return;
    const closing = app.close();
    // Like a machine going away: open connections (keep-alive, long polls) are cut, not waited for.
    app.server.closeAllConnections();
    await closing;
  }

  async tempDir(prefix = 'berth-agent-e2e-'): Promise<string> {
    const d = await mkdtemp(join(tmpdir(), prefix));
    this.dirs.push(d);
    return d;
  }

  /**
   * A node as the dispatcher records it, with its bootstrap secret in a 0600 file in `dir` (default: a new
   * temp dir; the agent's work dir is `dir/work`, as a local instance's is in BERTH_HOME/instances/<id>/).
   */
  async node(instanceId = `i-${Math.random().toString(36).slice(2, 10)}`, dir?: string) {
    const { node, bootstrapSecret } = await this.store.nodes.create({
      cluster: 'c1',
      dispatcherTag: 't1',
      instanceId,
      instanceType: 'small',
    });
    dir ??= await this.tempDir();
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const secretFile = join(dir, 'bootstrap-secret');
    await writeFile(secretFile, bootstrapSecret, { mode: 0o600 });
    const workDir = join(dir, 'work');
    this.workDirs.push(workDir);
    return { id: node.id, instanceId, secretFile, workDir, secret: bootstrapSecret };
  }

  /** Submits a request and returns its container id. */
  async submit(input: RequestInput): Promise<string> {
    const r = await submit(this.store, 'alice', { ram: '64MiB', ...input });
    return r.container_id!;
  }

  /** The dispatcher's part: lock the container and assign it to the node (wakes the node's long poll). */
  async assign(containerId: string, node: { id: string; instanceId: string }): Promise<void> {
    const locks = await this.store.containers.lock([containerId], DISPATCHER);
    if (locks.length !== 1) throw new Error(`could not lock ${containerId}`);
    await this.store.containers.assign(containerId, DISPATCHER, node.instanceId, node.id);
  }

  /**
   * An opportunistic counter (1..n on stdout, one line every 0.2 s, no retry of its own) assigned to
   * `node`: what a migration must carry on where it stopped, never restart. `more`: the request's other
   * fields (an image: a POSIX sh at /bin/sh in it).
   */
  submitCounter(
    node: { id: string; instanceId: string },
    n: number,
    more: Partial<RequestInput> = {},
  ): Promise<string> {
    return this.submitAndAssign(node, {
      command: ['/bin/sh', '-c', `i=0; while [ $i -lt ${n} ]; do i=$((i+1)); echo $i; sleep 0.2; done`],
      ram: '64MiB',
      max_temp_retries: 0,
      opportunistic: true,
      ...more,
    });
  }

  async submitAndAssign(node: { id: string; instanceId: string }, input: RequestInput): Promise<string> {
    const id = await this.submit(input);
    await this.assign(id, node);
    return id;
  }

  /** The full log of a container, in seq order. */
  async logs(containerId: string) {
    const out: { seq: number; stream: string; data: string }[] = [];
    for (let after = -1; ;) {
      const page = await this.store.logs.read(containerId, after, 5000);
      if (page.length === 0) return out;
      out.push(...page);
      after = page[page.length - 1]!.seq;
    }
  }

  async text(containerId: string, stream: string): Promise<string> {
    return (await this.logs(containerId))
      .filter((c) => c.stream === stream)
      .map((c) => c.data)
      .join('');
  }

  /** The messages of a container's `migrate` events, in order. */
  async migrations(containerId: string): Promise<string[]> {
    const events = await this.store.containerList.events(containerId);
    return events.filter((e) => e.kind === 'migrate').map((e) => e.message);
  }

  async waitState(containerId: string, states: string[], timeoutMs = 30_000) {
    return until(
      async () => {
        const c = await this.store.containers.get(containerId);
        return states.includes(c.state) ? c : null;
      },
      timeoutMs,
      `container ${containerId} to be ${states.join('|')}`,
    );
  }

  /** An agent in this process. */
  startAgent(
    node: { id: string; secretFile: string; workDir: string },
    over: Partial<AgentOptions> = {},
  ): { agent: Agent; run: Promise<unknown>; lines: string[] } {
    // The agent's log as text ("container ID: message" for a container's lines), for tests to wait on.
    const lines: string[] = [];
    const logger = createLogger({
      name: `agent ${node.id}`,
      level: 'debug',
      destination: {
        write: (json: string) => {
          const e = JSON.parse(json) as { msg: string; container?: string };
          lines.push(`${e.container ? `container ${e.container}: ` : ''}${e.msg}`);
          if (process.env.BERTH_TEST_AGENT_LOG === '1') process.stderr.write(formatLine(json));
        },
      },
    });
    const agent = new Agent({
      apiUrl: this.url,
      nodeId: node.id,
      bootstrapSecretFile: node.secretFile,
      workDir: node.workDir,
      runtime: 'process',
      killGraceMs: 1000,
      pingWaitMs: 2000,
      sampleIntervalMs: 200,
      logger,
      ...over,
    });
    const run = agent.run().then(
      () => null,
      (err: Error) => err,
    );
    this.agents.push(agent);
    this.agentRuns.push(run);
    return { agent, run, lines };
  }

  /** `berth agent` as a process (from dist/). */
  spawnAgent(
    node: { id: string; secretFile: string; workDir: string },
    extra: string[] = [],
    apiUrl = this.url,
    env: NodeJS.ProcessEnv = process.env,
  ): SpawnedAgent {
    const child = spawn(
      process.execPath,
      [
        BIN,
        'agent',
        '--api-url',
        apiUrl,
        '--node-id',
        node.id,
        '--bootstrap-secret-file',
        node.secretFile,
        '--work-dir',
        node.workDir,
        '--runtime',
        'process',
        '--kill-grace',
        '1s',
        '--ping-wait',
        '2s',
        '--log-level',
        'info',
        ...extra,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env },
    );
    let output = '';
    child.stdout!.on('data', (d) => (output += d));
    child.stderr!.on('data', (d) => (output += d));
    const exited = new Promise<number>((r) =>
      child.on('exit', (code, sig) => r(code ?? (sig ? 128 + (sig === 'SIGKILL' ? 9 : 15) : -1))),
    );
    this.children.push(child);
    return { child, output: () => output, exited };
  }

  /**
   * Stops every agent, kills every container process their work dirs still know about (and removes their
   * cgroups through the runtime), stops the API and removes the temp dirs.
   */
  async cleanup(): Promise<void> {
    if (this.cleaned) return;
    this.cleaned = true;
    for (const a of this.agents) a.stop();
    await Promise.all(this.agentRuns);
    for (const c of this.children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await Promise.all(
      this.children.map((c) =>
        c.exitCode === null && c.signalCode === null ? new Promise((r) => c.once('exit', r)) : null,
      ),
    );
    const rts = [new ProcessRuntime(), new VmRuntime()];
    for (const w of this.workDirs) {
      const dir = join(w, 'containers');
      for (const id of await readdir(dir).catch(() => [] as string[])) {
        let h = null;
        for (const rt of rts) h ??= await rt.reattach(id, join(dir, id, 'run')).catch(() => null);
        if (!h) continue;
        await h.signal('SIGKILL').catch(() => {});
        await h.wait().catch(() => {});
      }
    }
    await this.apiDown();
    await new Promise((r) => (this.front ? this.front.close(r) : r(null)));
    await this.notifier?.stop();
    for (const d of this.dirs) await rm(d, { recursive: true, force: true });
  }

  /** Container cgroups left under /sys/fs/cgroup/<h>/berth for these ids. */
  static leftCgroups(ids: string[]): string[] {
    const left: string[] = [];
    for (const id of ids)
      for (const h of ['memory', 'cpu', 'cpuacct', 'pids'])
        if (existsSync(join(CGROUP_ROOT, h, 'berth', id))) left.push(`${h}/berth/${id}`);
    return left;
  }

  get databaseUrl(): string {
    return this.dbUrl;
  }
}
