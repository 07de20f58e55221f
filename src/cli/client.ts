// The CLI's HTTP client: finds the API and token (flags, environment, config file, or the files the
// local server writes to BERTH_HOME) and turns API errors into readable messages.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { configFor } from './flags.js';
import { ADMIN_TOKEN_FILE, API_URL_FILE } from '../server/files.js';
import { UsageError } from './errors.js';

/** The CLI flag for an API field, so errors name what the user typed. */
const FLAG_FOR_FIELD: Record<string, string> = {
  cwd: '--chdir',
  env: '--env',
  secret_env: '--secret-env',
  vcpus: '--cpus',
  ram: '--ram',
  scratch: '--scratch',
  gpus: '--gpus',
  image: '--image',
  priority: '--priority',
  container_count_max: '--max-attempts',
  run_after: '--run-after',
  name: '--name',
  max_run_time: '--max-run-time',
  instance_types: '--instance-type',
  command: 'the command after --',
};

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: { field: string; problem: string }[],
  ) {
    super(message);
  }
}

export class Client {
  constructor(
    readonly baseUrl: string,
    private readonly token: string,
  ) {}

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new UsageError(
        `cannot reach the Berth API at ${this.baseUrl} (${(err as Error & { cause?: Error }).cause?.message ?? (err as Error).message}); is \`berth server\` or \`berth up\` running?`,
        1,
      );
    }
    if (res.status === 204) return undefined as T;
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new UsageError(
        `unexpected answer from ${this.baseUrl}${path} (HTTP ${res.status}): ${text.slice(0, 200)}`,
        1,
      );
    }
    if (!res.ok) {
      const e = (
        json as { error?: { code: string; message: string; details?: { field: string; problem: string }[] } }
      ).error;
      throw new ApiError(
        res.status,
        e?.code ?? 'error',
        e?.message ?? `HTTP ${res.status}`,
        e?.details ?? [],
      );
    }
    return json as T;
  }

  /** A streaming GET (Server-Sent Events); `signal` ends it. */
  async stream(path: string, signal?: AbortSignal): Promise<Response> {
    const res = await fetch(`${this.baseUrl}${path}`, {
      headers: { authorization: `Bearer ${this.token}` },
      signal,
    });
    if (!res.ok) {
      const e = ((await res.json().catch(() => ({}))) as { error?: { code: string; message: string } }).error;
      throw new ApiError(res.status, e?.code ?? 'error', e?.message ?? `HTTP ${res.status}`, []);
    }
    return res;
  }
}

/** The flag for a field ("env.PATH" → "--env PATH", "command.0" → "the command after --"). */
function flagFor(field: string): string {
  const [head, ...rest] = field.split('.');
  const flag = FLAG_FOR_FIELD[head!];
  if (!flag) return field;
  if (rest.length === 0 || head === 'command') return flag;
  return `${flag} ${rest.join('.')}`;
}

/** Describes an API error in the CLI's terms (flags rather than JSON fields), one line per problem. */
export function describeApiError(err: ApiError): string {
  if (err.details.length === 0) return err.message;
  return err.details.map((d) => `${flagFor(d.field)}: ${d.problem}`).join('\n');
}

function readFile(path: string): string | null {
  return existsSync(path) ? readFileSync(path, 'utf8').trim() || null : null;
}

export function clientFor(cmd: Command): Client {
  const cfg = configFor(cmd);
  const url = cfg.api_url ?? readFile(join(cfg.home, API_URL_FILE));
  if (!url)
    throw new UsageError(
      `no API URL: start \`berth up\` or \`berth server\`, or set BERTH_API_URL (or --api-url)`,
    );
  const token = cfg.token ?? readFile(join(cfg.home, ADMIN_TOKEN_FILE));
  if (!token)
    throw new UsageError(
      `no token: set BERTH_TOKEN (or --token), or run on the machine where \`berth server\` saved ${join(cfg.home, ADMIN_TOKEN_FILE)}`,
    );
  return new Client(url.replace(/\/+$/, ''), token);
}
