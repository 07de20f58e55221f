// Per-user limits (issue 10): how many containers each owner has placed (running, or assigned and
// starting, or placed in this pass), against max_running_per_user. Fair sharing (ordering.ts) reads the
// same counts to give turns.

export class Owners {
  readonly placed = new Map<string, number>();

  /** max_running_per_user, or null: no per-user limit (then `full` is always null). */
  constructor(readonly max: number | null) {}

  /** Counts `n` more containers placed for `owner`. */
  add(owner: string, n = 1): void {
    this.placed.set(owner, (this.placed.get(owner) ?? 0) + n);
  }

  remove(owner: string): void {
    this.placed.set(owner, (this.placed.get(owner) ?? 1) - 1);
  }

  /** Null when the owner may place one more container, else the reason it may not. */
  full(owner: string): string | null {
    if (this.max === null) return null;
    const n = this.placed.get(owner) ?? 0;
    if (n < this.max) return null;
    const who = owner === '' ? 'its owner' : `owner ${owner}`;
    return `${who} has ${n} containers placed; max_running_per_user=${this.max}`;
  }
}
