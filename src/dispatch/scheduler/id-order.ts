// The snapshot's instances in id order, as the pool view walks them (pool.ts), without sorting the whole
// pool each pass. The dispatcher lists its instances in the order it learnt them (creation order), so from
// one pass to the next the list loses some and gains some at its end: the order of the last call is kept,
// the instances still there keep their places, and only the new ones are sorted and merged in. The result
// is exactly that of a stable sort by id; anything unexpected (a repeated id) takes the plain sort. The
// memory of the last call is a cache only: any list gives the right order, a list unlike the last one just
// costs a full sort.

/** Compares by id (code-unit order), as the pool view always did. */
export function compareIds(a: { id: string }, b: { id: string }): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** How many calls merged and how many sorted everything (tests: the merge is the common case). */
export const sortStats = { merged: 0, full: 0 };

/** The last list seen (its ids in input order) and its order: sorted[k] = input[order[k]]. */
let lastIds: string[] = [];
let lastOrder: Uint32Array = new Uint32Array(0);

/** `items` sorted by id (a new array), as `[...items].sort(compareIds)` would give it. */
export function sortById<T extends { id: string }>(items: readonly T[]): T[] {
  const n = items.length;
  // Where each of the last call's items is now (-1: gone); items are matched in order, and an unmatched
  // one is new. A list whose kept items are not in the last call's relative order simply matches fewer.
  const movedTo = new Int32Array(lastIds.length).fill(-1);
  let i = 0;
  for (let j = 0; j < lastIds.length && i < n; j++) {
    if (items[i]!.id === lastIds[j]) movedTo[j] = i++;
  }
  const fresh: number[] = [];
  for (let k = i; k < n; k++) fresh.push(k);
  if (fresh.length > n / 2) return remember(items, fullSort(items));
  fresh.sort((a, b) => compareIds(items[a]!, items[b]!) || a - b);
  // Merge the kept items (in the last call's sorted order) with the new ones (sorted).
  const order = new Uint32Array(n);
  let o = 0;
  let f = 0;
  for (let k = 0; k < lastOrder.length; k++) {
    const at = movedTo[lastOrder[k]!]!;
    if (at < 0) continue;
    while (f < fresh.length && compareIds(items[fresh[f]!]!, items[at]!) < 0) order[o++] = fresh[f++]!;
    order[o++] = at;
  }
  while (f < fresh.length) order[o++] = fresh[f++]!;
  const out = new Array<T>(n);
  for (let k = 0; k < n; k++) {
    out[k] = items[order[k]!]!;
    // A repeated id: its items' relative order must be the input's (a stable sort); not worth doing here.
    if (k > 0 && out[k - 1]!.id >= out[k]!.id) return remember(items, fullSort(items));
  }
  sortStats.merged++;
  return remember(items, order, out);
}

function fullSort<T extends { id: string }>(items: readonly T[]): Uint32Array {
  sortStats.full++;
  const idx = Array.from(items.keys()).sort((a, b) => compareIds(items[a]!, items[b]!) || a - b);
  return Uint32Array.from(idx);
}

function remember<T extends { id: string }>(items: readonly T[], order: Uint32Array, sorted?: T[]): T[] {
  lastIds = items.map((x) => x.id);
  lastOrder = order;
  return sorted ?? Array.from(order, (k) => items[k]!);
}
