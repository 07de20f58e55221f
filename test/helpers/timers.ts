// Timers on a manual clock that behave as Node's (a delay past 2^31-1 ms fires after 1 ms), for tests of
// code that waits on injected Timers (the supervisor, the dispatcher's stop).
import { MAX_TIMER_MS, type Timers } from '../../src/model/clock.js';

/** Timers on a manual clock that behave as Node's: a delay past 2^31-1 ms fires after 1 ms. */
export class ManualTimers implements Timers {
  now = 0;
  private next = 1;
  private pending = new Map<number, { at: number; fn: () => void }>();
  /** The longest delay armed so far. */
  longest = 0;
  setTimeout(fn: () => void, ms: number): unknown {
    if (!(ms >= 1 && ms <= MAX_TIMER_MS)) ms = 1;
    this.longest = Math.max(this.longest, ms);
    const id = this.next++;
    this.pending.set(id, { at: this.now + ms, fn });
    return id;
  }
  clearTimeout(h: unknown): void {
    this.pending.delete(h as number);
  }
  get count(): number {
    return this.pending.size;
  }
  /** Moves time forward, firing due timers in order and letting their async work settle. */
  async advance(ms: number): Promise<void> {
    const end = this.now + ms;
    for (;;) {
      const due = [...this.pending.entries()]
        .filter(([, t]) => t.at <= end)
        .sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.pending.delete(due[0]);
      this.now = due[1].at;
      due[1].fn();
      await settle();
    }
    this.now = end;
    await settle();
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
}
