// The agent's local journal (work-dir/journal.json): what a restarted agent needs to find its containers
// again and to report what it had not reported yet (DESIGN §5.4). Written atomically (temp file, fsync,
// rename), so a crash leaves either the old or the new journal, never half of one. Writes are serialised
// and coalesced: a save() that arrives while one is in flight is folded into the next write.
import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ExitInfo } from './runtimes/types.js';

export type LogStreamName = 'stdout' | 'stderr' | 'system';

/** A log chunk planned (and written to the journal) before it is sent: a resend is byte-identical. */
export interface PlannedChunk {
  seq: number;
  stream: LogStreamName;
  /** Byte range [from, to) of the stream's file. */
  from: number;
  to: number;
}

/** Where a container's log shipping stands. */
export interface LogCursor {
  /** Bytes of each stream's file already planned into chunks. */
  offsets: Record<LogStreamName, number>;
  nextSeq: number;
  /** Chunks planned and not yet acknowledged by the API; resent as they are after a restart. */
  pending: PlannedChunk[];
  /** The API refused the logs for good (token revoked): nothing more is sent. */
  closed: boolean;
  /** Bytes of stdout and stderr planned so far (the log limit's head). Absent in older journals: 0. */
  headBytes?: number;
  /** Bytes of each stream left out between the head and the tail (the log limit). */
  dropped?: Partial<Record<OutputStreamName, number>>;
  /** Bytes from the start of each stream's file whose disk space was given back (hole-punched). */
  punched?: Partial<Record<OutputStreamName, number>>;
  /** The container's log says the limit was reached (written once). */
  truncated?: boolean;
}

/** The container's own streams (what the log limit and the scratch count apply to). */
export type OutputStreamName = Exclude<LogStreamName, 'system'>;

/**
 * Lifecycle of a container on this agent:
 * starting (journaled before the API start and the runtime start) → running → exited (exit known,
 * complete not yet acknowledged) → removed from the journal.
 */
export type EntryPhase = 'starting' | 'running' | 'exited';

/** One container in the journal. */
/**
 * Why a container is handed back instead of ending: `spot`, a cloud's spot interruption notice (the API counts
 * it as an interruption of the request); `job-end`, SLURM ending a one-shot agent's job (scancel, time limit,
 * node shutdown); `reclaim`, the pressure watcher taking back the capacity an opportunistic container
 * borrowed (retried at once, spending no retry).
 */
export type HandBackCause = 'spot' | 'job-end' | 'reclaim';

/** A container handed back (its host goes away, or its borrowed capacity): a temp cancel with this reason. */
export interface HandBack {
  cause: HandBackCause;
  reason: string;
}

export interface JournalEntry {
  id: string;
  lockToken: string;
  phase: EntryPhase;
  /** The runtime chosen for it (re-attach asks this one). */
  runtime: string;
  /** The runtime's work dir for the container. */
  runDir: string;
  /** When the agent started it (ms since the epoch); keeps max_run_time across restarts. */
  startedAt: number;
  maxRunTimeMs: number | null;
  scratch: number;
  /** Set once the API accepted the start. */
  startReported: boolean;
  /** Why Berth is stopping it, once decided (kill list, max_run_time): survives a restart. */
  killReason: string | null;
  /**
   * Set when the container is stopped because its host goes away: the end is reported as a temp cancel with
   * this reason (it is retried elsewhere), not as the container's exit. Survives a restart.
   */
  handBack?: HandBack | null;
  /** Its request (the start order's request_id): where its checkpoint is kept (checkpoint.ts). */
  requestId?: string;
  /** It runs in borrowed capacity (the start order said so): the pressure watcher may reclaim it. */
  opportunistic?: boolean;
  /** Frozen by berth pause: survives a restart, so a new agent reports it paused and thaws it on resume. */
  paused?: boolean;
  exit: ExitInfo | null;
  log: LogCursor;
}

interface JournalFile {
  version: 1;
  containers: Record<string, JournalEntry>;
}

export class Journal {
  private writing: Promise<void> | null = null;
  /** save() calls so far, and how many of them the last finished write covers. */
  private requested = 0;
  private written = 0;
  private seq = 0;

  private constructor(
    readonly path: string,
    readonly containers: Map<string, JournalEntry>,
    private readonly fsync: boolean,
  ) {}

  /**
   * Loads the journal at `path` (an empty one when the file does not exist). `fsync: false` for an agent
   * that never restarts (one-shot): writes stay atomic (rename) but do not wait for the disk.
   */
  static async load(path: string, o: { fsync?: boolean } = {}): Promise<Journal> {
    await mkdir(dirname(path), { recursive: true });
    let text: string | null = null;
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    const map = new Map<string, JournalEntry>();
    if (text) {
      let data: JournalFile;
      try {
        data = JSON.parse(text) as JournalFile;
      } catch (err) {
        throw new Error(
          `journal ${path} is not valid JSON (${(err as Error).message}); move it away to start afresh`,
        );
      }
      for (const [id, e] of Object.entries(data.containers ?? {})) map.set(id, upgradeEntry(e));
    }
    return new Journal(path, map, o.fsync ?? true);
  }

  /**
   * Writes the current state; resolves once a write that started after this call (and so includes every
   * change made before it) is on disk. A write in flight when save() is called may predate the change:
   * it does not count, however the waiting callers interleave.
   */
  async save(): Promise<void> {
    const mine = ++this.requested;
    while (this.written < mine) {
      if (this.writing) {
        await this.writing;
        continue;
      }
      const covers = this.requested;
      this.writing = this.write()
        .then(() => {
          this.written = Math.max(this.written, covers);
        })
        .finally(() => (this.writing = null));
      await this.writing;
    }
  }

  private async write(): Promise<void> {
    const data: JournalFile = { version: 1, containers: Object.fromEntries(this.containers) };
    const tmp = join(dirname(this.path), `.journal.${process.pid}.${++this.seq}.tmp`);
    const fh = await open(tmp, 'w', 0o600);
    try {
      await fh.writeFile(JSON.stringify(data));
      if (this.fsync) await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, this.path);
  }
}

/** An entry written by an earlier agent: its spot notice (`interrupted`) is now a hand-back. */
function upgradeEntry(e: JournalEntry & { interrupted?: string | null }): JournalEntry {
  const { interrupted, ...rest } = e;
  return interrupted && !rest.handBack ? { ...rest, handBack: { cause: 'spot', reason: interrupted } } : rest;
}

/** A fresh log cursor. */
export function newLogCursor(): LogCursor {
  return { offsets: { stdout: 0, stderr: 0, system: 0 }, nextSeq: 0, pending: [], closed: false };
}
