// Group commit: items submitted one by one by concurrent callers go out together, one call for many. A
// call starts at once when fewer than `maxInFlight` are running (after the current turn of the event
// loop, so what arrives in the same turn joins it); what arrives while calls run waits for the next one,
// which then takes everything waiting (up to `maxItems`). Under light load an item waits for nothing;
// under heavy load batches grow by themselves, and the cost per call (a round trip, a commit's flush) is
// shared by all its items. No timer: nothing is held back to wait for company.

/** How many items go in one call, and how many calls may run at once. */
export interface CoalescerOptions {
  maxItems: number;
  maxInFlight: number;
  /**
   * A call's items weigh at most this much together (e.g. bytes of a request body), by `weight`; an item
   * heavier than that goes alone.
   */
  maxWeight?: number;
}

interface Waiting<I, O> {
  item: I;
  resolve: (o: O) => void;
  reject: (err: unknown) => void;
}

export class Coalescer<I, O> {
  private waiting: Waiting<I, O>[] = [];
  private inFlight = 0;
  private scheduled = false;
  /** Calls made and items sent (for tests and the benchmark's report). */
  readonly stats = { calls: 0, items: 0 };

  /** `send` answers for each item, in order; when it throws, every item of the call fails with it. */
  constructor(
    private readonly send: (items: I[]) => Promise<O[]>,
    private readonly opts: CoalescerOptions,
    private readonly weight: (item: I) => number = () => 1,
  ) {
    if (!(opts.maxItems >= 1) || !(opts.maxInFlight >= 1))
      throw new Error('Coalescer: maxItems and maxInFlight must be at least 1');
  }

  /** Items waiting for a call. */
  get pending(): number {
    return this.waiting.length;
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.opts.maxInFlight || this.waiting.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.call();
    });
  }

  /** How many of the waiting items the next call takes: up to maxItems and maxWeight, at least one. */
  private take(): number {
    const max = Math.min(this.opts.maxItems, this.waiting.length);
    if (this.opts.maxWeight === undefined) return max;
    let n = 0;
    let total = 0;
    while (n < max) {
      total += this.weight(this.waiting[n]!.item);
      if (n > 0 && total > this.opts.maxWeight) break;
      n++;
    }
    return n;
  }

  private async call(): Promise<void> {
    if (this.inFlight >= this.opts.maxInFlight || this.waiting.length === 0) return;
    const batch = this.waiting.splice(0, this.take());
    this.inFlight++;
    this.stats.calls++;
    this.stats.items += batch.length;
    this.schedule(); // another call may go out beside this one with what is left
    try {
      const out = await this.send(batch.map((w) => w.item));
      if (out.length !== batch.length)
        throw new Error(`Coalescer: ${out.length} answers for ${batch.length} items`);
      batch.forEach((w, i) => w.resolve(out[i]!));
    } catch (err) {
      for (const w of batch) w.reject(err);
    } finally {
      this.inFlight--;
      this.schedule();
    }
  }
}
