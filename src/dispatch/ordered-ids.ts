// Ids in the order they were first added (one removed and added again goes last), and any subset of them
// in that order. The dispatcher walks its instances (observe), its nodes (orphans) and groups its
// containers by instance in this order; this is the one owner of it.

export class OrderedIds {
  private readonly rank = new Map<string, number>();
  private next = 0;

  /** Adds `id` last, unless it is already there (it keeps its place). */
  add(id: string): void {
    if (!this.rank.has(id)) this.rank.set(id, this.next++);
  }

  delete(id: string): void {
    this.rank.delete(id);
  }

  has(id: string): boolean {
    return this.rank.has(id);
  }

  /** The ids of `ids` that are there, in order. */
  inOrder(ids: Iterable<string>): string[] {
    const rank = this.rank;
    return [...ids].filter((id) => rank.has(id)).sort((a, b) => rank.get(a)! - rank.get(b)!);
  }
}
