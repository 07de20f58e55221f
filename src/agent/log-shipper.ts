// Ships one container's output to the API as log chunks (DESIGN §5.4).
//
// The runtimes write stdout and stderr to files in the container's work dir; the agent writes its own
// lines for the container ('system': warnings, kill reasons) to a third file. The shipper reads the files
// from the offsets in the journal, so memory stays bounded by one batch whatever the container prints and
// however long the API is away, and a restarted agent resumes where the last one stopped.
//
// Exactly-once by construction: a batch is first *planned* (seq numbers and byte ranges written to the
// journal), then sent; a resend after a failure or a restart reads the same byte ranges and so sends
// byte-identical chunks under the same seqs, which the API ignores when it already has them.
import { appendFile, open, stat } from 'node:fs/promises';
import { ApiHttpError, AbortedError, retrying, type AgentClient, type LogChunkBody } from './client.js';
import { sleepUnless } from '../model/clock.js';
import type { Journal, JournalEntry, LogStreamName, OutputStreamName, PlannedChunk } from './journal.js';
import {
  DEFAULT_LOG_LIMIT,
  HEAD_SLACK,
  logShares,
  punchStep,
  punchHole,
  tailStart,
  type LogShares,
} from './log-limit.js';
import { formatSize } from '../model/units.js';

/** Batching limits. */
export interface ShipperOptions {
  /** Most bytes read into one batch (one POST). */
  maxBatchBytes: number;
  /** Most bytes in one chunk. */
  maxChunkBytes: number;
  /** How long to wait for more output before sending what there is. */
  delayMs: number;
  /** The log limit: bytes of stdout and stderr stored per container (see log-limit.ts); 0 = none. */
  limitBytes: number;
}

export const DEFAULT_SHIPPER_OPTIONS: ShipperOptions = {
  maxBatchBytes: 2 * 1024 * 1024,
  maxChunkBytes: 64 * 1024,
  delayMs: 200,
  limitBytes: DEFAULT_LOG_LIMIT,
};

const STREAMS: LogStreamName[] = ['stdout', 'stderr', 'system'];
const OUTPUT: OutputStreamName[] = ['stdout', 'stderr'];

export class LogShipper {
  private ending = false;
  private wake = new AbortController();
  /** Data of the pending chunks as planned (dropped after the send; re-read from the files after a restart). */
  private readonly cache = new Map<number, string>();
  private running: Promise<void> | null = null;
  /** The limit's note was written in this process (the cursor's flag is journaled with the next plan). */
  private noted = false;
  /** Set when the file system cannot punch holes: output then keeps its disk space until the end. */
  private punchFailed = false;

  constructor(
    private readonly entry: JournalEntry,
    private readonly files: Record<LogStreamName, string>,
    private readonly client: AgentClient,
    private readonly journal: Journal,
    private readonly stop: AbortSignal,
    private readonly warn: (line: string) => void,
    private readonly opts: ShipperOptions = DEFAULT_SHIPPER_OPTIONS,
  ) {}

  /** Appends an agent line to the container's log ('system' stream). */
  async system(line: string): Promise<void> {
    await appendFile(this.files.system, `berth: ${line}\n`, { mode: 0o600 });
    this.wake.abort();
  }

  /** Starts shipping (idempotent). */
  start(): Promise<void> {
    this.running ??= this.loop();
    return this.running;
  }

  /** The container ended: ship everything that is left, then resolve. */
  finish(): Promise<void> {
    this.ending = true;
    this.wake.abort();
    return this.start();
  }

  private async loop(): Promise<void> {
    let failures = 0;
    for (;;) {
      try {
        if (!(await this.step())) return;
        failures = 0;
      } catch (err) {
        // A file that cannot be read (yet, or any more): retry; give up on a finished container after a few.
        failures += 1;
        if (failures === 1 || failures % 60 === 0)
          this.warn(`container ${this.entry.id}: log shipping: ${(err as Error).message}`);
        if (this.ending && failures >= 5) return;
        await sleepUnless(1000, this.stop);
      }
    }
  }

  /** One round: send what is pending, or plan new output, or wait. False when shipping is over. */
  private async step(): Promise<boolean> {
    if (this.stop.aborted || this.entry.log.closed) return false;
    if (this.entry.log.pending.length > 0) return this.send();
    await this.reclaim();
    const final = this.ending;
    const { planned, full } = await this.plan(final);
    if (planned) {
      if (!full && !final) await sleepUnless(this.opts.delayMs, this.stop); // let a little more accumulate
      return true;
    }
    if (final) return false;
    if (this.wake.signal.aborted) this.wake = new AbortController();
    await sleepUnless(this.opts.delayMs, AbortSignal.any([this.stop, this.wake.signal]));
    return true;
  }

  /** Reads new output into planned chunks and journals them (within the log limit: log-limit.ts). */
  private async plan(final: boolean): Promise<{ planned: boolean; full: boolean }> {
    const cur = this.entry.log;
    const shares = logShares(this.opts.limitBytes);
    // Work on copies: the cursor moves only once the plan is complete (a read error loses nothing).
    const offsets = { ...cur.offsets };
    const dropped = { ...cur.dropped };
    let headBytes = cur.headBytes ?? 0;
    let nextSeq = cur.nextSeq;
    let budget = this.opts.maxBatchBytes;
    const chunks: PlannedChunk[] = [];
    const data = new Map<number, string>();
    for (const stream of STREAMS) {
      // (The system stream comes last: its size includes the notes written for the other two.)
      const size = await fileSize(this.files[stream]);
      let allowance = Infinity; // what the head still takes of this stream
      if (shares && stream !== 'system') {
        if (shares.head - headBytes >= HEAD_SLACK) allowance = shares.head - headBytes;
        else {
          if (size > offsets[stream]) await this.noteLimit(shares);
          if (!final) continue; // the rolling tail is shipped when the container ends
          const from = await tailStart(this.files[stream], offsets[stream], size, shares.tail);
          if (from > offsets[stream]) {
            dropped[stream] = (dropped[stream] ?? 0) + from - offsets[stream];
            await this.system(
              `${formatSize(dropped[stream])} of ${stream} left out (log limit ${formatSize(this.opts.limitBytes)}: ` +
                `kept the first ${formatSize(shares.head)} of the output and the last ${formatSize(shares.tail)} of ${stream})`,
            );
            offsets[stream] = from;
          }
        }
      }
      if (size <= offsets[stream] || budget <= 0) continue;
      const fh = await open(this.files[stream], 'r');
      try {
        while (offsets[stream] < size && budget > 0 && allowance >= HEAD_SLACK) {
          const off = offsets[stream];
          const want = Math.min(size - off, this.opts.maxChunkBytes, budget, allowance);
          const buf = Buffer.allocUnsafe(want);
          const { bytesRead } = await fh.read(buf, 0, want, off);
          if (bytesRead === 0) break;
          const atEnd = off + bytesRead >= size;
          const cut = cutPoint(
            buf.subarray(0, bytesRead),
            bytesRead === this.opts.maxChunkBytes,
            final && atEnd,
          );
          if (cut === 0) break; // only an incomplete character so far: wait for the rest
          const seq = nextSeq++;
          chunks.push({ seq, stream, from: off, to: off + cut });
          data.set(seq, decode(buf.subarray(0, cut)));
          offsets[stream] = off + cut;
          budget -= cut;
          if (allowance !== Infinity) {
            allowance -= cut;
            headBytes += cut;
          }
        }
      } finally {
        await fh.close();
      }
    }
    // A note on the limit always plans a chunk of its own (the system stream), so nothing is lost here.
    if (chunks.length === 0) return { planned: false, full: false };
    cur.offsets = offsets;
    cur.nextSeq = nextSeq;
    cur.pending = chunks;
    cur.headBytes = headBytes;
    cur.dropped = dropped;
    if (this.noted) cur.truncated = true;
    for (const [seq, text] of data) this.cache.set(seq, text);
    await this.journal.save();
    return { planned: true, full: budget <= 0 };
  }

  /** Says once, in the container's log, that the limit was reached and what is kept from now on. */
  private async noteLimit(shares: LogShares): Promise<void> {
    if (this.noted || this.entry.log.truncated) return;
    this.noted = true;
    await this.system(
      `output reached the log limit (${formatSize(this.opts.limitBytes)}): the first ${formatSize(shares.head)} ` +
        `are kept; from now on only the last ${formatSize(shares.tail)} of stdout and of stderr, sent when the container ends`,
    );
  }

  /**
   * Gives back the disk space of output that is no longer needed: shipped and acknowledged (not pending,
   * which a resend reads again), or, past the head, older than the rolling tail (log-limit.ts).
   */
  private async reclaim(): Promise<void> {
    if (this.punchFailed) return;
    const cur = this.entry.log;
    const shares = logShares(this.opts.limitBytes);
    const headUsed = shares !== null && shares.head - (cur.headBytes ?? 0) < HEAD_SLACK;
    for (const stream of OUTPUT) {
      const pending = cur.pending.filter((c) => c.stream === stream).map((c) => c.from);
      let upTo = pending.length ? Math.min(...pending) : cur.offsets[stream];
      if (headUsed && !this.ending && pending.length === 0)
        upTo = Math.max(upTo, (await fileSize(this.files[stream])) - shares.tail);
      const punched = cur.punched?.[stream] ?? 0;
      if (upTo - punched < punchStep(this.entry.scratch)) continue;
      try {
        cur.punched = { ...cur.punched, [stream]: await punchHole(this.files[stream], punched, upTo) };
      } catch (err) {
        this.punchFailed = true;
        this.warn(
          `container ${this.entry.id}: cannot give back the disk space of shipped output (${(err as Error).message}); ` +
            'its output files keep growing until it ends',
        );
        return;
      }
    }
  }

  /** Sends the pending chunks; false when shipping must stop (agent stopping, or the API refused for good). */
  private async send(): Promise<boolean> {
    const cur = this.entry.log;
    const body: LogChunkBody[] = [];
    for (const c of cur.pending) {
      const data = this.cache.get(c.seq) ?? (await this.readRange(c));
      body.push({ seq: c.seq, stream: c.stream, data });
    }
    try {
      await retrying(() => this.client.logs(this.entry.id, this.entry.lockToken, body), {
        signal: this.stop,
        maxMs: 5000,
      });
    } catch (err) {
      if (err instanceof AbortedError) return false;
      if (err instanceof ApiHttpError && err.status === 400) {
        // A bug on one side; dropping this batch beats blocking the rest of the log forever.
        this.warn(`container ${this.entry.id}: log batch refused (${err.message}); dropped`);
      } else {
        // 409 stale token (cancelled or re-locked), 403/404/401: this agent may not write its log any more.
        this.warn(`container ${this.entry.id}: log shipping stopped: ${(err as Error).message}`);
        cur.closed = true;
      }
    }
    for (const c of cur.pending) this.cache.delete(c.seq);
    // Not journaled here: the next plan() writes the journal; a restart before that resends this batch,
    // which the API ignores by seq.
    cur.pending = [];
    return !cur.closed;
  }

  private async readRange(c: PlannedChunk): Promise<string> {
    const buf = Buffer.alloc(c.to - c.from);
    const fh = await open(this.files[c.stream], 'r');
    try {
      await fh.read(buf, 0, buf.length, c.from);
    } finally {
      await fh.close();
    }
    return decode(buf);
  }
}

async function fileSize(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch {
    return 0;
  }
}

/**
 * How many bytes of `buf` to put in a chunk: never inside a UTF-8 character (unless this is the very end
 * of a finished stream), and at the last newline when the chunk is full, so lines stay whole where they can.
 */
export function cutPoint(buf: Buffer, full: boolean, finalEnd: boolean): number {
  let n = buf.length;
  if (finalEnd) return n;
  if (full) {
    const nl = buf.lastIndexOf(0x0a);
    if (nl >= 0) return nl + 1;
  }
  // Step back over continuation bytes to the start of the last character; cut before it if incomplete.
  let i = n - 1;
  while (i >= 0 && n - i <= 4 && (buf[i]! & 0xc0) === 0x80) i--;
  if (i >= 0) {
    const lead = buf[i]!;
    const len = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    if (i + len > n) n = i;
  }
  return n;
}

/** Bytes to a log string: UTF-8, with NUL (which PostgreSQL text cannot hold) replaced by U+FFFD. */
function decode(buf: Buffer): string {
  return buf.toString('utf8').replace(/\0/g, '\ufffd');
}
