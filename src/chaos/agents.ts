// Simulated agents on the virtual clock, talking to the store as real agents talk to the API: register
// with the boot data's one-time secret, ping, start with the per-lock token, complete. They keep a record
// of what they ran, so the checks can compare it with the database, and of every container that died
// with them (the failures the run injected).
import { parseBootData } from '../cloud/boot-data.js';
import type { EventHandle, VirtualClock } from '../sim/clock.js';
import { ConflictError, ForbiddenError, NotFoundError, UnauthorizedError } from '../store/errors.js';
import type { Store } from '../store/store.js';
import { seededRng } from '../model/clock.js';
import { AGENT_CRASH_RATE, durationMs, PING_INTERVAL_MS, type Job } from './world.js';

/** Errors that are the store's answer (not a lost connection): never retried. */
export function isAnswer(err: unknown): boolean {
  return (
    err instanceof ConflictError ||
    err instanceof ForbiddenError ||
    err instanceof NotFoundError ||
    err instanceof UnauthorizedError
  );
}

interface Running {
  token: string;
  requestId: string;
  exit: EventHandle;
}

interface Agent {
  instance: string;
  nodeId: string;
  state: 'live' | 'crashed' | 'stopped' | 'gone';
  running: Map<string, Running>;
  ping: EventHandle | null;
  /** Drawn at registration (1 in 7): dies part-way through the first container it starts. */
  crashes: boolean;
  crash: EventHandle | null;
}

/** Why a container died under its agent: only 'agent-crash' is injected; anything else is a finding. */
export type KillCause = 'agent-crash' | 'node-failed-under-live-agent' | 'instance-terminated';

export interface AgentRecords {
  registered: number;
  /** Agents drawn to crash (they crash once they run a container). */
  doomed: number;
  crashes: number;
  crashesWithContainers: number;
  /** Containers that died with their agent, by cause, per request. */
  kills: { container: string; requestId: string; cause: KillCause }[];
  /** Exits reported: per request, the exit codes the store accepted. */
  exits: Map<string, number[]>;
  starts: number;
  /** A start while another live agent ran a container of the same request (must stay empty). */
  doubleRuns: string[];
  /** Agent calls refused by the store that a live, healthy agent should not see. */
  refused: string[];
  /** Calls retried after a lost connection. */
  retries: number;
}

/** The agents of one run. Work items come from clock events and are processed in order by `drain`. */
export class Agents {
  private readonly agents = new Map<string, Agent>();
  private readonly work: (() => Promise<void>)[] = [];
  /** Request id → the container its live agent is running (at most one, or it is a double run). */
  private readonly runningByRequest = new Map<string, string>();
  private readonly startsByRequest = new Map<string, number>();
  readonly records: AgentRecords = {
    registered: 0,
    doomed: 0,
    crashes: 0,
    crashesWithContainers: 0,
    kills: [],
    exits: new Map(),
    starts: 0,
    doubleRuns: [],
    refused: [],
    retries: 0,
  };

  constructor(
    private readonly store: Store,
    private readonly clock: VirtualClock,
    private readonly jobs: Map<string, Job>,
    private readonly seed: number,
    private readonly progress: (what: string) => void,
    private readonly finished: (requestId: string, exitCode: number) => void,
  ) {}

  get pending(): number {
    return this.work.length;
  }

  /** Runs queued work items (and those they queue) until none is left. */
  async drain(): Promise<void> {
    for (let w = this.work.shift(); w; w = this.work.shift()) await w();
  }

  /** A call to the store, retried while the database is unreachable (as a real agent retries the API). */
  private async call<T>(fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + 60_000;
    for (let i = 0; ; i++) {
      try {
        return await fn();
      } catch (err) {
        if (isAnswer(err) || Date.now() > deadline) throw err;
        this.records.retries++;
        // Backoff before the next attempt, as the real agent's API client does.
        await new Promise((r) => setTimeout(r, Math.min(500, 20 * 2 ** i)));
      }
    }
  }

  /** The instance booted and its agent started: it registers with the boot data's secret. */
  booted(instance: string, bootData: string): void {
    this.work.push(async () => {
      const { node_id: nodeId, bootstrap_secret: secret } = parseBootData(bootData);
      try {
        await this.call(() => this.store.nodes.register(nodeId, secret, { chaos: true }));
      } catch (err) {
        if (!isAnswer(err)) throw err;
        return; // failed before it came (boot timeout, shut down): the agent exits
      }
      this.records.registered++;
      const crashes = this.draw(instance, 1) < AGENT_CRASH_RATE;
      if (crashes) this.records.doomed++;
      const a: Agent = {
        instance,
        nodeId,
        state: 'live',
        running: new Map(),
        ping: null,
        crashes,
        crash: null,
      };
      this.agents.set(instance, a);
      this.schedulePing(a);
    });
  }

  private schedulePing(a: Agent): void {
    a.ping = this.clock.after(PING_INTERVAL_MS, () => this.work.push(() => this.ping(a)));
  }

  /** The dispatcher placed work on this instance: the agent's long poll returns at once. */
  wake(instance: string): void {
    const a = this.agents.get(instance);
    if (a) this.work.push(() => this.fetchWork(a));
  }

  private async ping(a: Agent): Promise<void> {
    if (a.state !== 'live') return;
    try {
      await this.call(() => this.store.nodes.ping(a.nodeId, a.running.size > 0 ? 'busy' : 'idle'));
    } catch (err) {
      if (!isAnswer(err)) throw err;
      this.stop(a, 'stopped', 'node-failed-under-live-agent'); // declared failed: the agent must stop
      return;
    }
    await this.fetchWork(a);
    this.schedulePing(a);
  }

  private async fetchWork(a: Agent): Promise<void> {
    if (a.state !== 'live') return;
    const work = await this.call(() => this.store.containers.workFor(a.nodeId, [...a.running.keys()]));
    for (const id of work.kill) {
      const r = a.running.get(id);
      if (!r) continue;
      r.exit.cancel();
      a.running.delete(id);
      this.runningByRequest.delete(r.requestId);
      this.records.refused.push(`${id}: killed by the store while its agent was healthy`);
    }
    for (const s of work.start) {
      if (a.state !== 'live') return;
      const requestId = (await this.call(() => this.store.containers.get(s.id))).request_id;
      try {
        await this.call(() => this.store.containers.start(s.id, a.nodeId, s.lock_token));
      } catch (err) {
        if (!isAnswer(err)) throw err;
        continue; // unlocked or cancelled between the poll and the start: nothing to run
      }
      const other = this.runningByRequest.get(requestId);
      if (other !== undefined)
        this.records.doubleRuns.push(`${requestId}: ${s.id} started while ${other} runs`);
      this.runningByRequest.set(requestId, s.id);
      this.records.starts++;
      this.progress('container started');
      const job = this.jobs.get(requestId)!;
      const n = (this.startsByRequest.get(requestId) ?? 0) + 1;
      this.startsByRequest.set(requestId, n);
      const exit = this.clock.after(durationMs(job, n, this.seed), () =>
        this.work.push(() => this.exit(a, s.id)),
      );
      a.running.set(s.id, { token: s.lock_token, requestId, exit });
      if (a.crashes && a.crash === null) {
        const at = (0.1 + 0.8 * this.draw(a.instance, 2)) * (exit.at - this.clock.nowMs());
        a.crash = this.clock.after(Math.round(at), () => this.crashed(a.instance));
      }
    }
  }

  private async exit(a: Agent, id: string): Promise<void> {
    const r = a.running.get(id);
    if (a.state !== 'live' || !r) return;
    const job = this.jobs.get(r.requestId)!;
    const before = this.records.exits.get(r.requestId) ?? [];
    const exitCode = job.failFirst && before.length === 0 ? 1 : 0;
    a.running.delete(id);
    this.runningByRequest.delete(r.requestId);
    try {
      await this.call(() =>
        this.store.containers.complete(id, a.nodeId, r.token, { exitCode, oomKilled: false, usage: null }),
      );
    } catch (err) {
      if (!isAnswer(err)) throw err;
      this.records.refused.push(`${id}: exit report refused: ${(err as Error).message}`);
      return;
    }
    this.records.exits.set(r.requestId, [...before, exitCode]);
    this.progress('container finished');
    this.finished(r.requestId, exitCode);
  }

  /** The agent process dies mid-container (the machine keeps running, silent). */
  crashed(instance: string): void {
    const a = this.agents.get(instance);
    if (!a || a.state !== 'live') return;
    this.records.crashes++;
    if (a.running.size > 0) this.records.crashesWithContainers++;
    this.stop(a, 'crashed', 'agent-crash');
  }

  /** The instance is gone (destroyed or killed): its agent with it. */
  terminated(instance: string): void {
    const a = this.agents.get(instance);
    if (a && a.state === 'live') this.stop(a, 'gone', 'instance-terminated');
    this.agents.delete(instance);
  }

  /** A seeded draw per instance and purpose, independent of the order things happen in. */
  private draw(instance: string, purpose: number): number {
    let h = (this.seed ^ 0x811c9dc5) >>> 0;
    for (const ch of `${instance}/${purpose}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
    return seededRng(h)();
  }

  private stop(a: Agent, state: Agent['state'], cause: KillCause): void {
    a.state = state;
    a.ping?.cancel();
    a.crash?.cancel();
    for (const [id, r] of a.running) {
      r.exit.cancel();
      this.runningByRequest.delete(r.requestId);
      this.records.kills.push({ container: id, requestId: r.requestId, cause });
    }
    a.running.clear();
  }

  /** Live agents running nothing: room for work. */
  idle(): number {
    let n = 0;
    for (const a of this.agents.values()) if (a.state === 'live' && a.running.size === 0) n++;
    return n;
  }

  /** Live agents right now (for the outage: they keep pinging while the database is down). */
  live(): string[] {
    return [...this.agents.values()].filter((a) => a.state === 'live').map((a) => a.nodeId);
  }
}
