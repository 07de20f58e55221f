// A minimal Docker Engine API client over the daemon's unix socket (node:http, no docker CLI), with
// errors classified for the agent: the daemon not answering is transient, an API error carries its
// HTTP status so callers can tell "no such image" from a daemon fault.
import { request, type IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { RuntimeTransientError } from './errors.js';

/** Default socket and API version (the oldest version Berth needs; newer daemons accept it). */
export const DOCKER_SOCKET = process.env.BERTH_DOCKER_SOCKET ?? '/var/run/docker.sock';
export const DOCKER_API_VERSION = 'v1.41';
/** How long the daemon has to answer a request that is not a long poll (by default). */
export const DOCKER_TIMEOUT_MS = 30_000;

/** An error response from the daemon. */
export class DockerApiError extends Error {
  override name = 'DockerApiError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Request options. */
export interface DockerRequest {
  method?: string;
  path: string;
  query?: Record<string, string | number | boolean>;
  json?: unknown;
  body?: Readable;
  contentType?: string;
  /** No timeout for long polls (wait, logs); otherwise the daemon must answer within this. */
  timeoutMs?: number;
}

/** Talks to one daemon. */
export class DockerApi {
  constructor(
    readonly socketPath = DOCKER_SOCKET,
    readonly runtimeName = 'docker',
    readonly version = DOCKER_API_VERSION,
    /** Requests without a timeoutMs of their own (a slow machine, e.g. an emulated one, needs more). */
    readonly timeoutMs = DOCKER_TIMEOUT_MS,
  ) {}

  /** Sends a request and returns the raw response stream (caller consumes it); throws on status >= 400. */
  async stream(req: DockerRequest): Promise<IncomingMessage> {
    const qs = req.query
      ? '?' +
        new URLSearchParams(
          Object.entries(req.query).map(([k, v]): [string, string] => [k, String(v)]),
        ).toString()
      : '';
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const r = request(
        {
          socketPath: this.socketPath,
          method: req.method ?? 'GET',
          path: `/${this.version}${req.path}${qs}`,
          headers: {
            ...(req.json !== undefined ? { 'content-type': 'application/json' } : {}),
            ...(req.contentType ? { 'content-type': req.contentType } : {}),
          },
          timeout: req.timeoutMs ?? this.timeoutMs,
        },
        resolve,
      );
      r.on('timeout', () =>
        r.destroy(
          new RuntimeTransientError(
            this.runtimeName,
            `daemon did not answer ${req.path} within ${req.timeoutMs ?? this.timeoutMs} ms`,
          ),
        ),
      );
      r.on('error', (err) =>
        reject(
          err instanceof RuntimeTransientError
            ? err
            : new RuntimeTransientError(
                this.runtimeName,
                `daemon unreachable at ${this.socketPath}: ${err.message}`,
                { cause: err },
              ),
        ),
      );
      if (req.body) req.body.pipe(r);
      else r.end(req.json !== undefined ? JSON.stringify(req.json) : undefined);
    });
    if ((res.statusCode ?? 500) >= 400) {
      const text = (await readAll(res)).toString();
      let message = text;
      try {
        message = (JSON.parse(text) as { message?: string }).message ?? text;
      } catch {
        // not JSON: keep the text
      }
      throw new DockerApiError(
        res.statusCode ?? 500,
        `${req.method ?? 'GET'} ${req.path}: ${message.trim()}`,
      );
    }
    // Streaming responses (logs) stay open for as long as the caller reads; only requests time out.
    res.socket?.setTimeout(0);
    return res;
  }

  /** Sends a request and parses a JSON answer (undefined for an empty body). */
  async call<T>(req: DockerRequest): Promise<T> {
    const body = await readAll(await this.stream(req));
    return (body.length ? JSON.parse(body.toString()) : undefined) as T;
  }
}

export async function readAll(res: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of res) parts.push(c as Buffer);
  return Buffer.concat(parts);
}
