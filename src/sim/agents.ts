// Simulated agents (DESIGN §5 on a virtual clock): when the sim cloud starts an instance's agent, the
// agent registers its node with the bootstrap secret from the boot data, starts the containers assigned
// to it after a small delay, and completes each after its workload duration with the workload's exit
// code. A crashed agent or a terminated machine just stops: it stops pinging and its containers never
// report, so the dispatcher has to notice through node_lost_after, as with real agents.
// Nothing here uses a real timer: every delay is an event on the VirtualClock.
import { bootDataFor, parseBootData, type BootData } from '../cloud/boot-data.js';
import type { SimCloud } from '../cloud/sim/sim-cloud.js';
import type { EventHandle, EventScheduler } from './clock.js';
import type { SimContainer, SimQueue } from './queue.js';

/** Boot data for a simulated instance: the one shape (src/cloud/boot-data.ts), with no API to call. */
export const simBootData = bootDataFor('sim:');

function decodeBootData(s: string): BootData | null {
  try {
    return parseBootData(s);
  } catch {
    return null;
  }
}

export interface SimAgentOptions {
  clock: EventScheduler;
  queue: SimQueue;
  cloud: SimCloud;
  /** Time from an assignment reaching the agent to the container running (image pull, runtime start). */
  startDelayMs: number;
  /** How often a live agent pings (the queue derives lastPingAt from it). */
  pingIntervalMs: number;
  /** The agent registered: its instance is ready. */
  onRegistered?(instanceId: string, nodeId: string): void;
  /** A running container's usage sample first counts (the scheduler's opportunistic_min_observation). */
  sampleAfterMs?: number;
  /** A guaranteed container grew to its whole request (src/sim/opportunistic.ts), among `running`. */
  onGrow?(instanceId: string, nodeId: string, running: SimContainer[]): void;
  /** The agent stopped for good (crash, machine gone, node failed); `running` were running on it. */
  onStopped?(instanceId: string, running: SimContainer[]): void;
  /** The agent has nothing left to run or start (after registering, an exit, a cancel). */
  onIdle?(instanceId: string): void;
}

interface Agent {
  instanceId: string;
  nodeId: string;
  alive: boolean;
  /** Pending start or exit event per container id. */
  timers: Map<string, EventHandle>;
  running: Map<string, SimContainer>;
  /** Since when the agent has had nothing to run or start; null while it has work. */
  idleSince: number | null;
}

/** All simulated agents of one run. The harness forwards the queue's assigned/ended/nodeFailed here. */
export class SimAgents {
  private readonly byInstance = new Map<string, Agent>();
  private readonly byNode = new Map<string, Agent>();
  /** Registrations refused (a bad boot data or secret): should stay 0. */
  refused = 0;

  constructor(private readonly o: SimAgentOptions) {
    o.cloud.onEvent((e) => {
      if (e.type === 'agent-started') this.boot(e.id, e.bootData);
      else if (e.type === 'agent-crashed') this.stop(e.id);
      else if (e.type === 'terminated') {
        this.stop(e.id);
        this.forget(e.id);
      }
    });
  }

  /** The queue placed `c` on node `nodeId`: start it after the start delay. */
  assigned(nodeId: string, c: SimContainer): void {
    const a = this.byNode.get(nodeId);
    if (a === undefined || !a.alive || a.timers.has(c.id)) return;
    a.idleSince = null;
    const gen = c.generation;
    const handle = this.o.clock.schedule(this.o.clock.nowMs() + this.o.startDelayMs, () => {
      a.timers.delete(c.id);
      if (!a.alive || !this.o.queue.nodeAccepts(nodeId)) return this.maybeIdle(a);
      try {
        this.o.queue.start(c.id, nodeId, gen);
      } catch {
        // Unlocked, cancelled or moved meanwhile: a stale order, as a real agent would be told.
        return this.maybeIdle(a);
      }
      a.running.set(c.id, c);
      const spec = c.request.spec;
      this.usageEvents(a, c, gen);
      a.timers.set(
        c.id,
        this.o.clock.schedule(this.o.clock.nowMs() + this.o.queue.runMs(c), () => {
          a.timers.delete(c.id);
          a.running.delete(c.id);
          if (!a.alive) return;
          this.maybeIdle(a);
          try {
            this.o.queue.complete(c.id, nodeId, gen, spec.exitCode);
          } catch {
            return;
          }
        }),
      );
    });
    a.timers.set(c.id, handle);
  }

  /**
   * Opportunistic packing (issue 16): the scheduler sees a running container's usage once it has been
   * measured for sampleAfterMs, and a guaranteed one that grows at spec.growAtMs tells the harness. Both
   * are clock events of their own that do nothing once the container is gone or moved.
   */
  private usageEvents(a: Agent, c: SimContainer, gen: number): void {
    const spec = c.request.spec;
    if (spec.use === undefined) return;
    const now = this.o.clock.nowMs();
    const current = () => a.alive && a.running.get(c.id) === c && c.generation === gen;
    const after = this.o.sampleAfterMs ?? 0;
    if (after < spec.durationMs)
      this.o.clock.schedule(now + after, () => {
        if (current()) this.o.queue.sampled(c.id);
      });
    const grow = spec.growAtMs;
    if (grow !== null && grow !== undefined && grow < spec.durationMs)
      this.o.clock.schedule(now + grow, () => {
        if (!current()) return;
        c.grown = true;
        this.o.queue.sampled(c.id);
        this.o.onGrow?.(a.instanceId, a.nodeId, [...a.running.values()]);
      });
  }

  /** A container ended in the queue (cancelled, killed): its agent stops it and forgets its timers. */
  ended(c: SimContainer): void {
    if (c.node === null) return;
    const a = this.byNode.get(c.node);
    if (a === undefined) return;
    a.timers.get(c.id)?.cancel();
    a.timers.delete(c.id);
    a.running.delete(c.id);
    if (a.alive) this.maybeIdle(a);
  }

  /**
   * Since when the instance's agent has had nothing to run (null while it has work, or is not alive):
   * the harness only asks for an idle-timeout pass when an instance really stayed idle.
   */
  idleSince(instanceId: string): number | null {
    const a = this.byInstance.get(instanceId);
    return a === undefined || !a.alive ? null : a.idleSince;
  }

  private maybeIdle(a: Agent): void {
    if (a.timers.size !== 0 || a.running.size !== 0 || a.idleSince !== null) return;
    a.idleSince = this.o.clock.nowMs();
    this.o.onIdle?.(a.instanceId);
  }

  /** The node was declared failed: its agent is told to stop on its next ping. */
  nodeFailed(nodeId: string): void {
    const a = this.byNode.get(nodeId);
    if (a !== undefined) this.stop(a.instanceId);
  }

  /** Forgets an instance whose machine is gone (keeps the maps small on long runs). */
  private forget(instanceId: string): void {
    const a = this.byInstance.get(instanceId);
    if (a === undefined || a.alive) return;
    this.byInstance.delete(instanceId);
    this.byNode.delete(a.nodeId);
  }

  private boot(instanceId: string, bootData: string): void {
    const b = decodeBootData(bootData);
    if (b === null) {
      this.refused++;
      return;
    }
    try {
      // The simulated agent claims lent room back (src/sim/opportunistic.ts, the real pressure watcher's model).
      this.o.queue.registerNode(b.node_id, b.bootstrap_secret, this.o.pingIntervalMs, true);
    } catch {
      this.refused++;
      return;
    }
    const a: Agent = {
      instanceId,
      nodeId: b.node_id,
      alive: true,
      timers: new Map(),
      running: new Map(),
      idleSince: this.o.clock.nowMs(),
    };
    this.byInstance.set(instanceId, a);
    this.byNode.set(b.node_id, a);
    this.o.onRegistered?.(instanceId, b.node_id);
    this.o.onIdle?.(instanceId);
    // Work assigned while the machine booted is picked up by the first ping.
    for (const c of this.o.queue.workFor(b.node_id)) this.assigned(b.node_id, c);
  }

  private stop(instanceId: string): void {
    const a = this.byInstance.get(instanceId);
    if (a === undefined || !a.alive) return;
    a.alive = false;
    for (const t of a.timers.values()) t.cancel();
    a.timers.clear();
    const running = [...a.running.values()];
    a.running.clear();
    this.o.queue.stopPings(a.nodeId);
    this.o.onStopped?.(instanceId, running);
  }
}
