// One process's stop, shared by what it starts (docs/OPERATIONS.md "Stopping"). `berth up` and
// `berth server` run their PostgreSQL in a process group of its own, so that a terminal's Ctrl-C (SIGINT to
// the whole foreground group) or a supervisor's `kill -TERM -- -PGID` reaches Berth alone, which then stops
// everything in order, the database last. Such a group is registered here: a forced stop kills it, so it
// never outlives the process; and once the stop has begun, nothing is started or restarted.

export class Shutdown {
  private began = false;
  private readonly groups = new Set<number>();

  /** True once the process has begun to stop. */
  get begun(): boolean {
    return this.began;
  }

  begin(): void {
    this.began = true;
  }

  /** Registers a process group that must not outlive this process; returns the function that forgets it. */
  own(pgid: number): () => void {
    this.groups.add(pgid);
    return () => this.groups.delete(pgid);
  }

  /** A forced stop: SIGKILL to every registered group, at once (synchronous, no I/O to wait for). */
  killOwned(): void {
    for (const pgid of this.groups) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
    this.groups.clear();
  }
}
