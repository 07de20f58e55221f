// Every configuration option, declared once: its type, default, environment variable and help. The
// config file, the environment and flags are merged in that order (later wins) and validated here;
// docs/CONFIG.md is generated from this table (`npm run docs:config`).
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseDuration, parseSize, UnitError } from '../model/units.js';

type Kind = 'string' | 'integer' | 'number' | 'boolean' | 'duration' | 'size' | 'url';

export interface OptionSpec {
  key: string;
  kind: Kind;
  env?: string;
  default: unknown;
  help: string;
  /** Which processes read it (for the docs). */
  used: string;
  min?: number;
}

export const OPTIONS = [
  {
    key: 'home',
    kind: 'string',
    env: 'BERTH_HOME',
    default: '~/.berth',
    help: 'Directory for Berth state: embedded PostgreSQL data, tokens, local instances.',
    used: 'all',
  },
  {
    key: 'database_url',
    kind: 'url',
    env: 'BERTH_DATABASE_URL',
    default: null,
    help: 'PostgreSQL URL (≥ 14). Unset: Berth runs its own embedded PostgreSQL under `home`.',
    used: 'server, dispatch, up',
  },
  {
    key: 'listen',
    kind: 'string',
    env: 'BERTH_LISTEN',
    default: '127.0.0.1:8470',
    help: 'Address the API server listens on (HOST:PORT; port 0 picks a free one).',
    used: 'server, up',
  },
  {
    key: 'api_url',
    kind: 'url',
    env: 'BERTH_API_URL',
    default: null,
    help: 'API URL for the CLI and agents. Unset: the URL the local server wrote to `home`.',
    used: 'CLI, agent',
  },
  {
    key: 'token',
    kind: 'string',
    env: 'BERTH_TOKEN',
    default: null,
    help: 'Bearer token for the CLI. Unset: the admin token the local server saved in `home`.',
    used: 'CLI',
  },
  {
    key: 'log_level',
    kind: 'string',
    env: 'BERTH_LOG_LEVEL',
    default: 'warn',
    help: 'Server log level: fatal, error, warn, info, debug, trace, silent.',
    used: 'server, dispatch, up',
  },
  {
    key: 'max_dispatch_attempts',
    kind: 'integer',
    env: 'BERTH_MAX_DISPATCH_ATTEMPTS',
    default: 10,
    min: 1,
    help: 'A container locked and unlocked more than this many times is cancelled (perm).',
    used: 'server, dispatch',
  },
  {
    key: 'body_limit',
    kind: 'size',
    env: 'BERTH_BODY_LIMIT',
    default: '1MiB',
    help: 'Largest API request body (batch submissions and log appends allow 16 times this).',
    used: 'server',
  },
] as const satisfies readonly OptionSpec[];

export type OptionKey = (typeof OPTIONS)[number]['key'];

export interface Config {
  home: string;
  database_url: string | null;
  listen: string;
  api_url: string | null;
  token: string | null;
  log_level: string;
  max_dispatch_attempts: number;
  body_limit: number;
}

/** A configuration error naming the option and where its value came from. */
export class ConfigError extends Error {}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function coerce(spec: OptionSpec, raw: unknown, source: string): unknown {
  const fail = (expected: string) => {
    throw new ConfigError(`${spec.key} (from ${source}): expected ${expected}, got ${JSON.stringify(raw)}`);
  };
  if (raw === null) return null;
  switch (spec.kind) {
    case 'string':
      if (typeof raw !== 'string' || raw === '') fail('a non-empty string');
      return raw;
    case 'url':
      if (typeof raw !== 'string' || !/^[a-z][a-z0-9+.-]*:\/\/\S+$/i.test(raw))
        fail('a URL such as http://127.0.0.1:8470');
      return raw;
    case 'integer': {
      const n = typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : raw;
      if (typeof n !== 'number' || !Number.isInteger(n) || n < (spec.min ?? -Infinity))
        fail(`a whole number${spec.min !== undefined ? ` ≥ ${spec.min}` : ''}`);
      return n;
    }
    case 'number': {
      const n = typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : raw;
      if (typeof n !== 'number' || !Number.isFinite(n)) fail('a number');
      return n;
    }
    case 'boolean':
      if (raw === true || raw === 'true' || raw === '1') return true;
      if (raw === false || raw === 'false' || raw === '0') return false;
      return fail('true or false');
    case 'duration':
    case 'size':
      try {
        return spec.kind === 'duration' ? parseDuration(raw) : parseSize(raw);
      } catch (err) {
        return fail(err instanceof UnitError ? err.expected : String(err));
      }
  }
}

function expandHome(p: string): string {
  return resolve(p.startsWith('~/') || p === '~' ? join(homedir(), p.slice(2)) : p);
}

/**
 * Loads the configuration: defaults, then BERTH_HOME/config.json (or BERTH_CONFIG), then the environment,
 * then `flags` (already-parsed CLI flags by option key). Unknown keys in the file are errors.
 */
export function loadConfig(
  flags: Partial<Record<OptionKey, unknown>> = {},
  env: NodeJS.ProcessEnv = process.env,
): Config {
  const out: Record<string, unknown> = {};
  for (const spec of OPTIONS as readonly OptionSpec[]) {
    out[spec.key] =
      spec.kind === 'size' || spec.kind === 'duration' ? coerce(spec, spec.default, 'default') : spec.default;
  }
  const homeRaw = flags.home ?? env.BERTH_HOME ?? '~/.berth';
  const home = expandHome(String(homeRaw));
  const file = env.BERTH_CONFIG ?? join(home, 'config.json');
  if (existsSync(file)) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(file, 'utf8'));
    } catch (err) {
      throw new ConfigError(`${file}: not valid JSON (${(err as Error).message})`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new ConfigError(`${file}: expected a JSON object of options`);
    for (const [k, v] of Object.entries(parsed)) {
      const spec = OPTIONS.find((o) => o.key === k);
      if (!spec)
        throw new ConfigError(
          `${file}: unknown option "${k}" (known: ${OPTIONS.map((o) => o.key).join(', ')})`,
        );
      out[k] = coerce(spec, v, file);
    }
  }
  for (const spec of OPTIONS) {
    const v = 'env' in spec ? env[spec.env] : undefined;
    if (v !== undefined && v !== '') out[spec.key] = coerce(spec, v, `$${spec.env}`);
  }
  for (const [k, v] of Object.entries(flags)) {
    if (v === undefined) continue;
    const spec = OPTIONS.find((o) => o.key === k);
    if (!spec) throw new ConfigError(`unknown option ${k}`);
    out[k] = coerce(spec, v, `--${k.replace(/_/g, '-')}`);
  }
  out.home = home;
  if (!LOG_LEVELS.includes(out.log_level as string))
    throw new ConfigError(
      `log_level: expected one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(out.log_level)}`,
    );
  if (!/^[^:\s]+:\d{1,5}$/.test(out.listen as string))
    throw new ConfigError(
      `listen: expected HOST:PORT such as 127.0.0.1:8470, got ${JSON.stringify(out.listen)}`,
    );
  return out as unknown as Config;
}

/** The options table as Markdown (docs/CONFIG.md is generated from it). */
export function optionsMarkdown(): string {
  const rows = OPTIONS.map(
    (o) =>
      `| \`${o.key}\` | ${'env' in o ? `\`${o.env}\`` : ''} | ${o.kind} | ${o.default === null ? '—' : `\`${String(o.default)}\``} | ${o.used} | ${o.help} |`,
  );
  return [
    '| option | environment | type | default | used by | meaning |',
    '|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}
