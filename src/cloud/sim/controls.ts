// Test controls shared by the sim cloud's operations, after Karpenter's fake cloud provider and Arvados'
// stub driver: every call is recorded, the next error of an operation can be injected, and operations
// can be parked ("held") until a test releases them, to exercise what happens while a call is in flight.
import type { DriverOp } from '../driver.js';

/** One recorded driver call. */
export interface RecordedCall {
  op: DriverOp;
  /** Virtual time the call was made. */
  at: Date;
  args: unknown[];
}

/** Call log, error injection and holds for the four driver operations. */
export class OpControls {
  readonly calls: RecordedCall[] = [];
  private injected = new Map<DriverOp, unknown[]>();
  private holding = new Set<DriverOp>();
  private parkedCalls = new Map<DriverOp, Array<() => void>>();
  private counts: Record<DriverOp, number> = { create: 0, list: 0, destroy: 0, setTags: 0 };

  /** With `keepLog` false only the per-operation counts are kept, not the call log. */
  constructor(private readonly keepLog = true) {}

  record(op: DriverOp, at: Date, args: unknown[]): void {
    this.counts[op]++;
    if (this.keepLog) this.calls.push({ op, at, args });
  }

  /** Number of calls of `op` made so far (all operations when omitted). */
  count(op?: DriverOp): number {
    const c = this.counts;
    return op === undefined ? c.create + c.list + c.destroy + c.setTags : c[op];
  }

  /** Makes the next call of `op` throw `err` (queued: several injections apply to successive calls). */
  failNext(op: DriverOp, err: unknown): void {
    const q = this.injected.get(op) ?? [];
    q.push(err);
    this.injected.set(op, q);
  }

  /** Throws the next injected error for `op`, if any. */
  throwInjected(op: DriverOp): void {
    const q = this.injected.get(op);
    if (q !== undefined && q.length > 0) throw q.shift();
  }

  /** From now on, calls of `op` wait (after being recorded) until released. */
  hold(op: DriverOp): void {
    this.holding.add(op);
  }

  /** Number of calls of `op` waiting for release. */
  parked(op: DriverOp): number {
    return this.parkedCalls.get(op)?.length ?? 0;
  }

  /** Releases every parked call of `op` (oldest first) and stops holding it. */
  release(op: DriverOp): void {
    this.holding.delete(op);
    const q = this.parkedCalls.get(op) ?? [];
    this.parkedCalls.delete(op);
    for (const resume of q) resume();
  }

  /** Releases the oldest parked call of `op`; later calls keep being held. Returns false if none waited. */
  releaseOne(op: DriverOp): boolean {
    const resume = this.parkedCalls.get(op)?.shift();
    if (resume === undefined) return false;
    resume();
    return true;
  }

  /** Resolves at once unless `op` is held, else when the call is released. */
  gate(op: DriverOp): Promise<void> | null {
    if (!this.holding.has(op)) return null;
    return new Promise<void>((resolve) => {
      const q = this.parkedCalls.get(op) ?? [];
      q.push(resolve);
      this.parkedCalls.set(op, q);
    });
  }
}
