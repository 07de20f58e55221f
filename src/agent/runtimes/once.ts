// Work that must run once per container in this process even when several handles of the container
// exist (an agent that re-attaches while an earlier handle still lives, as in-process tests do): two
// collectors would both clean up and the later one would record the exit without its usage; two log
// copiers would interleave their writes.

/** Runs `fn` for `key` unless a run for `key` is in flight, whose promise is then shared. */
export class OncePerKey<T> {
  private readonly running = new Map<string, Promise<T>>();

  run(key: string, fn: () => Promise<T>): Promise<T> {
    let p = this.running.get(key);
    if (!p) {
      p = fn().finally(() => this.running.delete(key));
      this.running.set(key, p);
    }
    return p;
  }
}
