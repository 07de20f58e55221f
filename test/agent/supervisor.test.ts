// The supervisor's timing policy on injected timers and clock, so every deadline is checked exactly.
// The container is a scripted RunHandle: the policy (when to TERM, when to KILL, which reason) is what
// is under test here; the same supervisor against real processes is in conformance.ts.
import { describe, expect, it } from 'vitest';
import { MAX_TIMER_MS, ManualClock } from '../../src/model/clock.js';
import { ManualTimers } from '../helpers/timers.js';
import { Supervisor } from '../../src/agent/supervisor.js';
import type { ExitInfo, OutputChunk, RunHandle, Usage } from '../../src/agent/runtimes/types.js';

/** A container that obeys signals as scripted: dies on SIGKILL, and on SIGTERM unless it traps it. */
class ScriptedHandle implements RunHandle {
  readonly id = 'c1';
  readonly runtime = 'scripted';
  readonly warning = null;
  signals: string[] = [];
  scratch = 0;
  private finish!: (info: ExitInfo) => void;
  private readonly done = new Promise<ExitInfo>((r) => (this.finish = r));
  constructor(private readonly trapsTerm: boolean) {}
  wait(): Promise<ExitInfo> {
    return this.done;
  }
  async signal(sig: NodeJS.Signals): Promise<void> {
    this.signals.push(sig);
    if (sig === 'SIGKILL' || !this.trapsTerm) this.exit(sig === 'SIGKILL' ? 137 : 143);
  }
  exit(code: number): void {
    this.finish({ exitCode: code, oomKilled: false, peakRamBytes: 0, cpuSeconds: 0, wallMs: 0 });
  }
  async usage(): Promise<Usage> {
    return { cpuSeconds: 0, ramBytes: 0, peakRamBytes: 0, scratchBytes: this.scratch };
  }
  output(): AsyncIterable<OutputChunk> {
    return (async function* () {})();
  }
  async freeze(): Promise<void> {}
  async thaw(): Promise<void> {}
}

const MiB = 1024 * 1024;

describe('Supervisor', () => {
  it('max_run_time counts from the original start of a re-attached container, then TERM, then KILL after the grace', async () => {
    const timers = new ManualTimers();
    const clock = new ManualClock('2026-01-01T00:00:08Z');
    const h = new ScriptedHandle(true);
    const sup = new Supervisor(h, {
      maxRunTimeMs: 10_000,
      startedAt: new Date('2026-01-01T00:00:00Z'),
      killGraceMs: 3000,
      sampleIntervalMs: 60_000,
      clock,
      timers,
    });
    await timers.advance(1999);
    expect(h.signals).toEqual([]);
    await timers.advance(1);
    expect(h.signals).toEqual(['SIGTERM']);
    await timers.advance(2999);
    expect(h.signals).toEqual(['SIGTERM']);
    await timers.advance(1);
    expect(h.signals).toEqual(['SIGTERM', 'SIGKILL']);
    const info = await sup.wait();
    expect(info.reason).toBe('killed: max_run_time 10s exceeded');
    expect(info.exitCode).toBe(137);
    expect(timers.count).toBe(0);
  });

  it("max_run_time and a kill grace past a Node timer's 24.8 days (597 h, 30 d) are waited out, not fired at once", async () => {
    const timers = new ManualTimers();
    const h = new ScriptedHandle(true);
    const hour = 3_600_000;
    const sup = new Supervisor(h, {
      maxRunTimeMs: 597 * hour,
      killGraceMs: 30 * 24 * hour,
      sampleIntervalMs: 1000 * hour,
      timers,
    });
    await timers.advance(1000);
    expect(h.signals).toEqual([]); // before the fix: SIGTERM after 1 ms
    await timers.advance(597 * hour - 1001);
    expect(h.signals).toEqual([]);
    await timers.advance(1);
    expect(h.signals).toEqual(['SIGTERM']);
    await timers.advance(30 * 24 * hour - 1);
    expect(h.signals).toEqual(['SIGTERM']);
    await timers.advance(1);
    expect(h.signals).toEqual(['SIGTERM', 'SIGKILL']);
    expect((await sup.wait()).reason).toBe('killed: max_run_time 24d21h exceeded');
    expect(timers.longest).toBeLessThanOrEqual(MAX_TIMER_MS);
  });

  it('cancel: a container that ends on SIGTERM is never sent SIGKILL and leaves no timer behind', async () => {
    const timers = new ManualTimers();
    const h = new ScriptedHandle(false);
    const sup = new Supervisor(h, { killGraceMs: 30_000, timers });
    await sup.cancel();
    const info = await sup.wait();
    expect(info).toMatchObject({ exitCode: 143, reason: 'cancelled' });
    await timers.advance(60_000);
    expect(h.signals).toEqual(['SIGTERM']);
    expect(timers.count).toBe(0);
  });

  it('kills on scratch overuse with the sizes in the reason, and samples usage until then', async () => {
    const timers = new ManualTimers();
    const h = new ScriptedHandle(false);
    const samples: number[] = [];
    const sup = new Supervisor(h, {
      scratchBytes: 100 * MiB,
      sampleIntervalMs: 1000,
      onSample: (u) => samples.push(u.scratchBytes),
      timers,
    });
    h.scratch = 50 * MiB;
    await timers.advance(1000);
    h.scratch = 100 * MiB; // at the limit is allowed
    await timers.advance(1000);
    expect(h.signals).toEqual([]);
    h.scratch = 120 * MiB;
    await timers.advance(1000);
    expect(h.signals).toEqual(['SIGTERM']);
    const info = await sup.wait();
    expect(info.reason).toBe('killed: scratch 120MiB > limit 100MiB');
    expect(samples).toEqual([50 * MiB, 100 * MiB, 120 * MiB]);
    expect(sup.lastUsage?.scratchBytes).toBe(120 * MiB);
  });

  it('keeps the first reason when a second one comes while the kill is under way', async () => {
    const timers = new ManualTimers();
    const h = new ScriptedHandle(true);
    const events: string[] = [];
    const sup = new Supervisor(h, {
      maxRunTimeMs: 1000,
      killGraceMs: 5000,
      timers,
      onEvent: (e) => events.push(e),
    });
    await timers.advance(1000);
    await sup.cancel('cancelled by user');
    await timers.advance(5000);
    const info = await sup.wait();
    expect(info.reason).toBe('killed: max_run_time 1s exceeded');
    expect(h.signals).toEqual(['SIGTERM', 'SIGKILL']);
    expect(events).toEqual(['killed: max_run_time 1s exceeded: sending SIGTERM, SIGKILL in 5s']);
  });

  it('reports a container that ended on its own without a reason', async () => {
    const timers = new ManualTimers();
    const h = new ScriptedHandle(false);
    const sup = new Supervisor(h, { maxRunTimeMs: 10_000, scratchBytes: MiB, timers });
    h.exit(0);
    const info = await sup.wait();
    expect(info.reason).toBeUndefined();
    expect(info.exitCode).toBe(0);
    expect(timers.count).toBe(0);
  });

  it('detach stops every timer without signalling the container', async () => {
    const timers = new ManualTimers();
    const h = new ScriptedHandle(false);
    const samples: number[] = [];
    const sup = new Supervisor(h, {
      maxRunTimeMs: 1000,
      scratchBytes: 1,
      sampleIntervalMs: 100,
      onSample: (u) => samples.push(u.scratchBytes),
      timers,
    });
    sup.detach();
    h.scratch = 10;
    await timers.advance(10_000);
    expect(h.signals).toEqual([]);
    expect(samples).toEqual([]);
    expect(timers.count).toBe(0);
  });
});
