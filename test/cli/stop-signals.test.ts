// How berth up / server / dispatch take SIGINT and SIGTERM (src/cli/stop-signals.ts), on fake timers and a
// signal source of the test's own: the first begins the stop; a repeat within a second is the same request;
// a later one, or the deadline, forces the stop and exits, even when killing takes too long.
import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { REPEAT_WINDOW_MS, STOP_DEADLINE_MS, watchStopSignals } from '../../src/cli/stop-signals.js';
import { Shutdown } from '../../src/server/shutdown.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

function setup(force: () => Promise<unknown> | void = () => {}) {
  const signals = new EventEmitter();
  const output = new EventEmitter();
  const said: string[] = [];
  const exits: number[] = [];
  const shutdown = new Shutdown();
  const forced = vi.fn(force);
  const stop = watchStopSignals({
    say: (l) => said.push(l),
    shutdown,
    force: forced,
    signals,
    outputs: [output],
    now: () => Date.now(), // moved by the fake timers
    exit: (code) => void exits.push(code),
  });
  return { signals, output, said, exits, shutdown, forced, stop };
}

/** A signal, then the same one again once the repeat window has passed (a second Ctrl-C). */
async function twice(t: ReturnType<typeof setup>, sig: NodeJS.Signals) {
  t.signals.emit(sig, sig);
  await vi.advanceTimersByTimeAsync(REPEAT_WINDOW_MS);
  t.signals.emit(sig, sig);
}

describe('stop signals', () => {
  it('the first Ctrl-C begins the stop; a repeat within the window is the same one; a later one forces', async () => {
    const t = setup();
    let requested: string | null = null;
    void t.stop.requested.then((s) => (requested = s));
    t.signals.emit('SIGINT', 'SIGINT');
    await vi.advanceTimersByTimeAsync(0);
    expect(requested).toBe('SIGINT');
    expect(t.shutdown.begun).toBe(true);
    await vi.advanceTimersByTimeAsync(REPEAT_WINDOW_MS - 1);
    t.signals.emit('SIGINT', 'SIGINT'); // forwarded by a wrapper, or sent to the pid and the group
    await vi.advanceTimersByTimeAsync(0);
    expect(t.forced).not.toHaveBeenCalled();
    expect(t.said).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(t.said).toEqual(['still stopping; Ctrl-C again stops at once']);
    t.signals.emit('SIGINT', 'SIGINT'); // the user's second Ctrl-C
    await vi.advanceTimersByTimeAsync(0);
    expect(t.forced).toHaveBeenCalledTimes(1);
    expect(t.exits).toEqual([130]);
    expect(t.said.at(-1)).toBe('SIGINT again: stopping at once');
    t.stop.dispose();
  });

  it('a second SIGTERM forces with 143; a graceful stop past the deadline is forced with 1', async () => {
    const a = setup();
    await twice(a, 'SIGTERM');
    await vi.advanceTimersByTimeAsync(0);
    expect(a.exits).toEqual([143]);
    expect(a.said).toContain('still stopping; SIGTERM again stops at once');
    a.stop.dispose();

    const b = setup();
    b.signals.emit('SIGINT', 'SIGINT');
    await vi.advanceTimersByTimeAsync(STOP_DEADLINE_MS - 1);
    expect(b.exits).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(b.forced).toHaveBeenCalledTimes(1);
    expect(b.exits).toEqual([1]);
    expect(b.said.at(-1)).toBe(`still stopping after ${STOP_DEADLINE_MS / 1000}s: stopping at once`);
    b.stop.dispose();
  });

  it('a forced stop that hangs still exits, after 10 s; a failing one exits at once', async () => {
    const hangs = setup(() => new Promise(() => {}));
    await twice(hangs, 'SIGINT');
    await vi.advanceTimersByTimeAsync(9_999);
    expect(hangs.exits).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(hangs.exits).toEqual([130]);
    hangs.stop.dispose();

    const fails = setup(() => Promise.reject(new Error('no such instance')));
    await twice(fails, 'SIGINT');
    await vi.advanceTimersByTimeAsync(0);
    expect(fails.exits).toEqual([130]);
    expect(fails.said).toContain('forced stop: no such instance');
    fails.stop.dispose();
  });

  it('a closed output (EPIPE) begins a graceful stop once; more EPIPEs, even past the window, never force it', async () => {
    const t = setup();
    let requested: string | null = null;
    void t.stop.requested.then((s) => (requested = s));
    const epipe = Object.assign(new Error('write EPIPE'), { code: 'EPIPE' });
    t.output.emit('error', epipe);
    await vi.advanceTimersByTimeAsync(0);
    expect(requested).toBe('SIGTERM');
    expect(t.shutdown.begun).toBe(true);
    await vi.advanceTimersByTimeAsync(2 * REPEAT_WINDOW_MS);
    t.output.emit('error', epipe); // the stop's own lines meet the closed pipe too
    await vi.advanceTimersByTimeAsync(0);
    expect(t.forced).not.toHaveBeenCalled();
    expect(t.exits).toEqual([]);
    // Any other write error is not the reader going away: it is not taken for a stop request.
    expect(() => t.output.emit('error', Object.assign(new Error('EIO'), { code: 'EIO' }))).toThrow('EIO');
    t.stop.dispose();
    expect(t.output.listenerCount('error')).toBe(0);
  });

  it('after dispose nothing more happens: no hint, no deadline, signals not taken', async () => {
    const t = setup();
    t.signals.emit('SIGINT', 'SIGINT');
    t.stop.dispose();
    expect(t.signals.listenerCount('SIGINT') + t.signals.listenerCount('SIGTERM')).toBe(0);
    await vi.advanceTimersByTimeAsync(2 * STOP_DEADLINE_MS);
    expect(t.said).toEqual([]);
    expect(t.exits).toEqual([]);
    expect(t.forced).not.toHaveBeenCalled();
  });
});
