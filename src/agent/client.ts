// The agent's HTTP client for the agent-facing API (DESIGN §5): register, long-poll ping, start, logs,
// complete, cancel. Errors are classified once, here: `isTransient` says whether repeating the same call
// later may succeed (network error, timeout, 5xx, 429), so callers retry on facts, not message text.
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { buffer as readBuffer } from 'node:stream/consumers';
import type { Static } from '@sinclair/typebox';
import { sleepUnless } from '../model/clock.js';
import type {
  CompleteBodyT,
  LogChunkBody,
  NodeReportStateSchema,
  PingBodyT,
  RegisterBodyT,
  UsageSample,
} from '../api/schemas.js';
import type { ReportBody } from '../api/schemas.js';
import { CHECKPOINT_TYPE, LOCK_TOKEN_HEADER, WHOLE_STATE_HEADER } from '../model/checkpoint.js';
import { Coalescer } from '../lib/coalescer.js';
import { counting } from '../lib/counting.js';
import type { StartOrder } from '../store/containers.js';

/** An answer from the API with a non-2xx status. */
export class ApiHttpError extends Error {
  override name = 'ApiHttpError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`HTTP ${status} ${code}: ${message}`);
  }
}

/** The API could not be reached or did not answer in time. */
export class ApiUnreachableError extends Error {
  override name = 'ApiUnreachableError';
}

/** Whether repeating the call later may succeed. */
export function isTransient(err: unknown): boolean {
  if (err instanceof ApiUnreachableError) return true;
  if (err instanceof ApiHttpError) return err.status >= 500 || err.status === 429 || err.status === 408;
  return false;
}

/** A container to start, as the ping returns it (the API's type). */
export type { StartOrder };

/** The agent's side of the wire: the same types the API's schemas validate (src/api/schemas.ts). */
export type { LogChunkBody, UsageSample };
export type NodeReportState = Static<typeof NodeReportStateSchema>;

/** A ping as the agent sends it: it always says what it runs and how long it waits. */
export type PingBody = PingBodyT & { running: string[]; wait_ms: number };

export interface PingAnswer {
  node: { id: string; state: string };
  start: StartOrder[];
  kill: string[];
  /** Running containers to freeze and to thaw (berth pause/resume); absent from an older server. */
  pause?: string[];
  resume?: string[];
  drain: boolean;
}

/** An exit report (the per-lock token is added by complete()). */
export type CompleteBody = Omit<CompleteBodyT, 'lock_token'>;

/** Extra time on top of a long poll's wait before the client gives up on the answer. */
const LONG_POLL_SLACK_MS = 15_000;
const DEFAULT_TIMEOUT_MS = 30_000;
/** A checkpoint is up to checkpoint_limit bytes (256MiB by default): more time than a small call. */
const CHECKPOINT_TIMEOUT_MS = 120_000;

/** One report's answer from POST /v1/nodes/:id/reports. */
type ReportResult =
  | { id: string; ok: true }
  | { id: string; ok: false; error: { status: number; code: string; message: string } };

/**
 * How the agent's reports go out together: what its containers report at the same time (starts, log
 * batches, exits) is one call, two calls in flight at most, and a call's body stays well under the
 * API's 16 MiB limit (a log batch is up to 2 MiB: log-shipper.ts).
 */
const REPORT_BATCHING = { maxItems: 1000, maxInFlight: 2, maxWeight: 8 * 1024 * 1024 };

export class AgentClient {
  /** The node token, once registered. */
  token: string | null = null;
  /** Reports of this node's containers, sent together (POST /v1/nodes/:id/reports). */
  private readonly reports: Coalescer<ReportBody, ReportResult> | null;

  /**
   * With `nodeId`, starts, logs, exits and cancels go through the node's batched report endpoint (many
   * containers' reports in one call); without, each through its container's own endpoint.
   */
  constructor(
    readonly baseUrl: string,
    readonly nodeId: string | null = null,
  ) {
    this.reports =
      nodeId === null
        ? null
        : new Coalescer(
            async (reports) =>
              (
                await this.call<{ results: ReportResult[] }>(
                  'POST',
                  `/v1/nodes/${encodeURIComponent(nodeId)}/reports`,
                  { reports },
                )
              ).results,
            REPORT_BATCHING,
            // JSON escapes a character into at most 6 (a control character as \u0001).
            (r) => (r.kind === 'logs' ? r.chunks.reduce((n, c) => n + c.data.length * 6 + 64, 256) : 256),
          );
  }

  /** One report through the batched endpoint; its refusal thrown as the single endpoint would. */
  private async report(r: ReportBody): Promise<void> {
    const o = await this.reports!.submit(r);
    if (!o.ok) throw new ApiHttpError(o.error.status, o.error.code, o.error.message);
  }

  /**
   * `info`: flat facts about this agent (the schema admits strings, numbers, booleans and lists of them).
   * `once`: a one-shot agent's container; the answer's `start` then holds its order, already started, when
   * it is Locked to this node (an API without this answer: none, and the first ping finds it).
   */
  async register(
    nodeId: string,
    secret: string,
    info: NonNullable<RegisterBodyT['info']>,
    once: string | null = null,
  ): Promise<{ node: { id: string }; token: string; start?: StartOrder[] }> {
    const body = { node_id: nodeId, secret, info, ...(once ? { once } : {}) };
    return this.call('POST', '/v1/nodes/register', body, { auth: false });
  }

  /**
   * A SLURM job's one-shot agent, its container reported: the next container that fits its allocation, already
   * started (none: the job ends). An API without this route answers 404, which means none.
   */
  async next(nodeId: string, signal?: AbortSignal): Promise<StartOrder[]> {
    const r = await this.call<{ start: StartOrder[] }>(
      'POST',
      `/v1/nodes/${encodeURIComponent(nodeId)}/next`,
      {},
      { signal },
    );
    return r.start;
  }

  /** The long poll: resolves when there is work, or after body.wait_ms; `signal` aborts it early. */
  async ping(nodeId: string, body: PingBody, signal?: AbortSignal): Promise<PingAnswer> {
    return this.call('POST', `/v1/nodes/${encodeURIComponent(nodeId)}/ping`, body, {
      timeoutMs: body.wait_ms + LONG_POLL_SLACK_MS,
      signal,
    });
  }

  async start(id: string, lockToken: string): Promise<void> {
    if (this.reports) return this.report({ kind: 'start', id, lock_token: lockToken });
    await this.call('POST', `/v1/containers/${encodeURIComponent(id)}/start`, { lock_token: lockToken });
  }

  async logs(id: string, lockToken: string, chunks: LogChunkBody[]): Promise<void> {
    if (this.reports) return this.report({ kind: 'logs', id, lock_token: lockToken, chunks });
    await this.call('POST', `/v1/containers/${encodeURIComponent(id)}/logs`, {
      lock_token: lockToken,
      chunks,
    });
  }

  async complete(id: string, lockToken: string, body: CompleteBody): Promise<void> {
    if (this.reports) return this.report({ kind: 'exit', id, lock_token: lockToken, ...body });
    await this.call('POST', `/v1/containers/${encodeURIComponent(id)}/complete`, {
      lock_token: lockToken,
      ...body,
    });
  }

  /** `retryable: false` when no retry can succeed (the request then ends at once). */
  async cancel(
    id: string,
    lockToken: string,
    cls: 'temp' | 'perm',
    reason: string,
    opts: { retryable?: boolean; interrupted?: boolean; reclaimed?: boolean } = {},
  ): Promise<void> {
    // One body for both ways (a grouped report or the cancel call): the reason cut to the API's limit, and
    // only the flags that differ from the defaults.
    const body = {
      lock_token: lockToken,
      class: cls,
      reason: reason.slice(0, 4096),
      ...(opts.retryable === false ? { retryable: false } : {}),
      ...(opts.interrupted ? { interrupted: true } : {}),
      ...(opts.reclaimed ? { reclaimed: true } : {}),
    };
    if (this.reports) return this.report({ kind: 'cancel', id, ...body });
    await this.call('POST', `/v1/containers/${encodeURIComponent(id)}/cancel`, body);
  }

  /**
   * Keeps `tar` as the checkpoint of the container's request (PUT /v1/containers/:id/checkpoint);
   * `reclaimed`: it is being reclaimed, so its retry migrates. The stream is sent as it is read (chunked):
   * its end ends the body, its error cuts the request off (the API then keeps nothing of it), and it is
   * destroyed when the call fails or is refused before reading it all; it cannot be sent twice, so a
   * retry needs a new one. `signal` (the agent stopping) cuts the upload off at once (AbortedError).
   */
  async putCheckpoint(
    id: string,
    lockToken: string,
    tar: Readable,
    reclaimed: boolean,
    signal?: AbortSignal,
    /** The runtime that saved the container whole; absent: the container wrote it (its checkpoint dir). */
    wholeState?: string,
  ): Promise<void> {
    const query = new URLSearchParams({
      ...(reclaimed ? { reclaimed: 'true' } : {}),
      ...(wholeState ? { whole: wholeState } : {}),
    }).toString();
    const path = `/v1/containers/${encodeURIComponent(id)}/checkpoint${query ? `?${query}` : ''}`;
    await this.exchange('PUT', path, tar, {
      headers: { 'content-type': CHECKPOINT_TYPE, [LOCK_TOKEN_HEADER]: lockToken },
      timeoutMs: CHECKPOINT_TIMEOUT_MS,
      signal,
    });
  }

  /**
   * The checkpoint (a tar archive) of the container's request, handed to `unpack` as it arrives (never
   * gathered whole); its size and the runtime that saved it whole (null: the container wrote it), or null
   * when none is kept. A body cut off on the way is unreachable (a
   * transient error: the call may be repeated, and `unpack` with it); `unpack`'s own failure is thrown.
   * `signal` (the agent stopping) cuts the download off at once (AbortedError).
   */
  async getCheckpoint(
    id: string,
    lockToken: string,
    unpack: (body: Readable) => Promise<void>,
    signal?: AbortSignal,
  ): Promise<{ bytes: number; wholeState: string | null } | null> {
    const opts = { headers: { [LOCK_TOKEN_HEADER]: lockToken }, timeoutMs: CHECKPOINT_TIMEOUT_MS, signal };
    const res = await this.open('GET', `/v1/containers/${encodeURIComponent(id)}/checkpoint`, '', opts);
    if (res.status === 204) {
      res.body.resume();
      return null;
    }
    const counted = res.body.pipe(counting());
    res.body.on('error', (err) => counted.destroy(err));
    try {
      await unpack(counted);
    } catch (err) {
      if (signal?.aborted) throw new AbortedError();
      if (res.body.errored || !res.body.complete)
        throw new ApiUnreachableError(
          `reading the checkpoint from ${this.baseUrl}: ${res.body.errored?.message ?? 'cut off'}`,
        );
      throw err;
    }
    if (!res.body.complete)
      throw new ApiUnreachableError(`reading the checkpoint from ${this.baseUrl}: cut off`);
    const whole = res.body.headers[WHOLE_STATE_HEADER];
    return { bytes: counted.bytes, wholeState: typeof whole === 'string' ? whole : null };
  }

  private async call<T>(
    method: string,
    path: string,
    body: unknown,
    opts: { auth?: boolean; timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<T> {
    const r = await this.exchange(method, path, JSON.stringify(body), {
      ...opts,
      headers: { 'content-type': 'application/json' },
    });
    const text = r.body.toString('utf8');
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** One call: the 2xx answer's status and body, or the error thrown (ApiHttpError, unreachable, aborted). */
  private async exchange(
    method: string,
    path: string,
    body: Body,
    opts: CallOptions,
  ): Promise<{ status: number; body: Buffer }> {
    const res = await this.open(method, path, body, opts);
    return { status: res.status, body: await this.read(res.body, opts.signal) };
  }

  /** One call up to its 2xx answer's headers: its status and unread body, or the error thrown (as exchange). */
  private async open(
    method: string,
    path: string,
    body: Body,
    opts: CallOptions,
  ): Promise<{ status: number; body: IncomingMessage }> {
    const timeout = AbortSignal.timeout(opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    const signal = opts.signal ? AbortSignal.any([timeout, opts.signal]) : timeout;
    let res: { status: number; body: IncomingMessage };
    try {
      res = await send(new URL(`${this.baseUrl}${path}`), method, body, signal, {
        ...opts.headers,
        ...(opts.auth !== false && this.token ? { authorization: `Bearer ${this.token}` } : {}),
      });
    } catch (err) {
      if (opts.signal?.aborted) throw new AbortedError();
      throw new ApiUnreachableError(`cannot reach the API at ${this.baseUrl}: ${(err as Error).message}`);
    }
    if (res.status >= 200 && res.status < 300) return res;
    const text = (await this.read(res.body, opts.signal)).toString('utf8');
    let code = 'error';
    let message = text.slice(0, 500);
    try {
      const j = JSON.parse(text) as { error?: { code?: string; message?: string } };
      code = j.error?.code ?? code;
      message = j.error?.message ?? message;
    } catch {
      // not JSON (a proxy's error page): keep the text
    }
    throw new ApiHttpError(res.status, code, message);
  }

  private async read(body: IncomingMessage, signal?: AbortSignal): Promise<Buffer> {
    try {
      return await readBuffer(body);
    } catch (err) {
      if (signal?.aborted) throw new AbortedError();
      throw new ApiUnreachableError(`reading the answer from ${this.baseUrl}: ${(err as Error).message}`);
    }
  }
}

/** How one call is made: with the node token (unless `auth: false`), its deadline, its caller's abort. */
interface CallOptions {
  auth?: boolean;
  timeoutMs?: number;
  signal?: AbortSignal;
  headers: Record<string, string>;
}

/** The caller aborted the call (the agent is stopping, or a long poll was cut short on purpose). */
export class AbortedError extends Error {
  override name = 'AbortedError';
  constructor() {
    super('aborted');
  }
}

/** Backoff for transient errors: doubles from `minMs` to `maxMs`, with jitter. */
export class Backoff {
  private next: number;
  constructor(
    private readonly minMs = 200,
    private readonly maxMs = 10_000,
  ) {
    this.next = minMs;
  }
  /** The delay before the next attempt. */
  delay(): number {
    const d = this.next;
    this.next = Math.min(this.maxMs, this.next * 2);
    return Math.round(d * (0.75 + Math.random() * 0.5));
  }
  reset(): void {
    this.next = this.minMs;
  }
}

/**
 * Calls `fn` until it succeeds or fails with a non-transient error; transient failures are retried with
 * backoff until `signal` aborts (then AbortedError). `onRetry` hears about each transient failure.
 */
export async function retrying<T>(
  fn: () => Promise<T>,
  opts: { signal?: AbortSignal; onRetry?: (err: Error, delayMs: number) => void; maxMs?: number } = {},
): Promise<T> {
  const backoff = new Backoff(200, opts.maxMs ?? 10_000);
  for (;;) {
    if (opts.signal?.aborted) throw new AbortedError();
    try {
      return await fn();
    } catch (err) {
      if (!isTransient(err)) throw err;
      const d = backoff.delay();
      opts.onRetry?.(err as Error, d);
      await sleepUnless(d, opts.signal);
    }
  }
}

// node:http rather than fetch: fetch loads undici, ~12 MB of resident memory in every agent for nothing
// the agent needs (measured: an idle Node process grows from 39 to 51 MB after one fetch, 1 MB with http).
const keepAlive = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

/** A call's body: whole (JSON), or a stream sent as it is read (chunked). */
type Body = string | Readable;

/**
 * One HTTP request; resolves with the status and the (unread) response body once the headers are in. A
 * streamed body is piped into the request: its failure, or the request's, destroys both (the server sees
 * a body cut off); an answer that comes before all of it was sent (a refusal) stops it once the answer is
 * read.
 */
function send(
  url: URL,
  method: string,
  body: Body,
  signal: AbortSignal,
  headers: Record<string, string>,
): Promise<{ status: number; body: IncomingMessage }> {
  const secure = url.protocol === 'https:';
  const streamed = body instanceof Readable;
  return new Promise((resolve, reject) => {
    let sent = false;
    const req = (secure ? https : http).request(
      url,
      {
        method,
        signal,
        agent: secure ? keepAlive.https : keepAlive.http,
        // A streamed body is not sent with `connection: close`: the server would close the connection
        // right after an early refusal, with the body still arriving, and that reset may reach the agent
        // before the answer does (a retry with a new body, again and again). Kept alive, the server reads
        // the rest of the body away (node's http server does) until the agent, the answer read, destroys
        // the connection (below): a refused upload's connection is never reused.
        headers: streamed ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        if (streamed && !sent)
          res.once('end', () => {
            body.destroy();
            req.destroy();
          });
        resolve({ status: res.statusCode ?? 0, body: res });
      },
    );
    req.on('error', reject);
    if (!streamed) return req.end(body);
    pipeline(body, req).then(
      () => (sent = true),
      (err: Error) => reject(err),
    );
  });
}
