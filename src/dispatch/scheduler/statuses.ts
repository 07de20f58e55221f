// The statuses of one pass (DESIGN §6.2 rule 7), grouped by reason. Most waiting containers wait for a
// reason they share with thousands of others ("waits for a t1 instance; max_instances=10 reached; …");
// only their queue position differs. So a pass records, for each waiting container in queue order, the
// index of its reason, and builds no text per container: the full text ("queue position 7; 2
// higher-priority containers ahead; <reason>") is made only when someone reads it (`berth plan`, tests),
// and the dispatcher stores the reason groups and each container's group (SEAMS §3), computing the
// position when `berth why` asks. At a million waiting containers the per-container strings were most of
// a pass and most of its garbage.
import { AheadCounter } from './ordering.js';
import { aheadText } from './status.js';
import type { SnapshotContainer } from './types.js';

/** The containers waiting for one reason, in queue order, as the dispatcher stores them (SEAMS §3). */
export interface WaitingGroup {
  reason: string;
  /** Container ids in queue order. */
  members: string[];
  /** members[i]'s queue position (1 = next). */
  positions: number[];
  /** How many containers of a higher priority wait ahead of members[i]. */
  higherAhead: number[];
}

/**
 * The texts settle gave (settle.ts): its containers and their texts side by side, in input order (null: a
 * container it gives no text, a kill). An incremental planner keeps them across passes and hands the same
 * object to each plan while none of these containers changed (kept-pool.ts): never changed once made.
 */
export interface SettledTexts {
  readonly containers: readonly SnapshotContainer[];
  readonly texts: readonly (string | null)[];
}

const NO_TEXTS: SettledTexts = { containers: [], texts: [] };

/** The statuses a pass gave: texts of containers that do not wait in the queue, and the queue by reason. */
export class Statuses {
  /**
   * Texts of the containers settle gave one (assigned, unlocked, cancelled, not scheduled), maybe kept from
   * the last pass (SettledTexts). A container has a text here or in `own`, never both; ownEntries() reads both.
   */
  settled: SettledTexts = NO_TEXTS;
  /** Texts of containers placed, unlocked or cancelled in this pass, by id (settle's are in `settled`). */
  readonly own = new Map<string, string>();
  /** The distinct reasons waiting containers wait for (the text after the queue position). */
  readonly reasons: string[] = [];
  /**
   * Waiting containers in queue order: position i + 1. Made at the size reserve() says and cut to what
   * was recorded by seal() (growing it by push was most of a pass's work on it at a million containers).
   */
  waiting: SnapshotContainer[] = [];
  /** reasons[reasonOf[i]] is why waiting[i] waits. */
  reasonOf: number[] = [];
  /** How many waiting containers were recorded. */
  private filled = 0;
  private readonly index = new Map<string, number>();

  /** Every container's own text (settle's, then this pass's), with its id. */
  *ownEntries(): IterableIterator<[string, string]> {
    const { containers, texts } = this.settled;
    for (let i = 0; i < texts.length; i++) if (texts[i] !== null) yield [containers[i]!.id, texts[i]!];
    yield* this.own;
  }

  /** How many containers have an own text (ownEntries). */
  ownSize(): number {
    let n = this.own.size;
    for (const t of this.settled.texts) if (t !== null) n++;
    return n;
  }

  /** Room for `n` waiting containers, before the first is recorded. */
  reserve(n: number): void {
    if (this.filled === 0) {
      this.waiting = new Array<SnapshotContainer>(n);
      this.reasonOf = new Array<number>(n);
    }
  }

  /** After the last waiting container is recorded: the lists hold those recorded, no more. */
  seal(): void {
    this.waiting.length = this.filled;
    this.reasonOf.length = this.filled;
  }

  /** The index of a reason text (interned: each distinct text is stored once). */
  reason(text: string): number {
    let i = this.index.get(text);
    if (i === undefined) {
      i = this.reasons.length;
      this.reasons.push(text);
      this.index.set(text, i);
    }
    return i;
  }

  /** Records the next waiting container in queue order. */
  wait(c: SnapshotContainer, reason: number): void {
    this.waiting[this.filled] = c;
    this.reasonOf[this.filled++] = reason;
  }

  /**
   * The waiting containers by reason, in order of first appearance (the texts toMap gives, grouped). The
   * arrays are made at their size (the status writer calls this each write: at 300k waiting, growing them
   * by push took half of it).
   */
  groups(): WaitingGroup[] {
    const sizes = this.reasons.map(() => 0);
    for (const r of this.reasonOf) sizes[r]!++;
    const out: WaitingGroup[] = this.reasons.map((reason, r) => ({
      reason,
      members: new Array<string>(sizes[r]!),
      positions: new Array<number>(sizes[r]!),
      higherAhead: new Array<number>(sizes[r]!),
    }));
    const next = sizes.fill(0);
    const ahead = new AheadCounter();
    for (let i = 0; i < this.waiting.length; i++) {
      const c = this.waiting[i]!;
      const r = this.reasonOf[i]!;
      const g = out[r]!;
      const k = next[r]!++;
      g.members[k] = c.id;
      g.positions[k] = i + 1;
      g.higherAhead[k] = ahead.higherThan(c.priority);
      ahead.add(c.priority);
    }
    return out;
  }

  /** Every container's full text, by id (the §6.4 `status` object). */
  toMap(): Map<string, string> {
    const out = new Map<string, string>(this.ownEntries());
    const ahead = new AheadCounter();
    this.waiting.forEach((c, i) => {
      out.set(c.id, queuedText(i + 1, ahead.higherThan(c.priority), this.reasons[this.reasonOf[i]!]!));
      ahead.add(c.priority);
    });
    return out;
  }
}

/** A waiting container's text: its queue position, how many of higher priority are ahead, and why it waits. */
export function queuedText(position: number, higherAhead: number, reason: string): string {
  return `queue position ${position}${aheadText(higherAhead)}; ${reason}`;
}
