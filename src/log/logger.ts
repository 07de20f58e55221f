// One structured logger per process (server, dispatcher, agent, `berth up`): pino, JSON lines on stderr,
// or one readable line per entry when stderr is a terminal. Components take child loggers that carry the
// ids that matter as fields (container, instance, instance_type, node, dispatcher). Secrets never reach
// a line: token and secret fields are redacted, and so are passwords inside URLs of a logged config.
import pino from 'pino';

export type Logger = pino.Logger;

/** Where lines go: anything with a write(line) method (stderr by default). */
export interface LogDestination {
  write(line: string): unknown;
}

export interface LoggerOptions {
  /** The process, the prefix of every line: "berth up", "berth dispatch", "berth server", "berth agent". */
  name: string;
  /** fatal, error, warn, info, debug, trace or silent (cfg.log_level). */
  level: string;
  /** Default: stderr. */
  destination?: LogDestination;
  /** One readable line per entry instead of JSON. Default: when stderr is a terminal. */
  pretty?: boolean;
}

/** Field names whose values are secrets, at the top level or one object down. */
const SECRET_KEYS = ['token', 'secret', 'bootstrap_secret', 'password', 'authorization', 'lock_token'];
const REDACT_PATHS = SECRET_KEYS.flatMap((k) => [k, `*.${k}`]);

/** A URL with its password replaced, for logs ("postgres://berth:[redacted]@host/db"). */
export function redactUrl(value: string): string {
  return value.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@\s]*:)[^@/\s]*@/i, '$1[redacted]@');
}

/** Keys of configuration values that are secrets, at any depth (tokens, keys, passwords, credentials). */
const SECRET_CONFIG_KEY = /token|secret|password|credential|authorization|private_key|access_key/i;

/** A configuration as it may be logged: secret values and the passwords inside URLs masked, at any depth. */
export function redactConfig(value: unknown, key = ''): unknown {
  if (SECRET_CONFIG_KEY.test(key) && value !== null && value !== undefined) return '[redacted]';
  if (typeof value === 'string') return redactUrl(value);
  if (Array.isArray(value)) return value.map((v) => redactConfig(v));
  if (typeof value === 'object' && value !== null && !(value instanceof Date))
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactConfig(v, k)]));
  return value;
}

export function createLogger(o: LoggerOptions): Logger {
  const pretty = o.pretty ?? (!o.destination && process.stderr.isTTY === true);
  const sink = o.destination ?? pino.destination({ fd: 2, sync: true });
  const stream = pretty ? { write: (line: string) => sink.write(formatLine(line)) } : sink;
  return pino(
    {
      name: o.name,
      level: o.level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      // `config` and `dispatch` hold a process's configuration (logged at start): secrets at any depth.
      serializers: { err: pino.stdSerializers.err, config: redactConfig, dispatch: redactConfig },
    },
    stream,
  );
}

/**
 * The logger of a process (`berth server`, `dispatch`, `agent`, `up`), which first logs the configuration
 * it runs with (at info, secrets redacted).
 */
export function processLogger(
  name: string,
  level: string,
  configuration: { config: unknown; dispatch?: unknown },
): Logger {
  const logger = createLogger({ name, level });
  logger.info(configuration, 'configuration');
  return logger;
}

/** A logger that writes nothing (tests, library callers that pass none). */
export const silentLogger: Logger = pino({ level: 'silent' });

/** The fields of an error that a log line carries: its class (what the caller acts on) and message. */
export function errorFields(err: unknown): { error_class: string; error: string } {
  if (err instanceof Error) return { error_class: err.constructor.name, error: err.message };
  return { error_class: typeof err, error: String(err) };
}

const LEVEL_LABELS: Record<number, string> = {
  10: 'trace: ',
  20: 'debug: ',
  30: '',
  40: 'warning: ',
  50: 'error: ',
  60: 'fatal: ',
};
const HIDDEN = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg']);

function formatValue(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=,()]+$/.test(v) ? v : JSON.stringify(v);
  if (typeof v === 'object' && v !== null && 'message' in v && 'type' in v)
    return JSON.stringify(`${String(v.type)}: ${String(v.message)}`); // a serialized error, without its stack
  return JSON.stringify(v);
}

/**
 * One pino JSON line as a person reads it, like the progress lines of `berth up`:
 *   berth up: warning: destroy failed (op=destroy instance=i-3 error_class=CloudApiError error="boom")
 */
export function formatLine(json: string): string {
  let e: Record<string, unknown>;
  try {
    e = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json; // not one of ours: pass it through
  }
  const fields = Object.entries(e)
    .filter(([k]) => !HIDDEN.has(k))
    .map(([k, v]) => `${k}=${formatValue(v)}`);
  const prefix = typeof e.name === 'string' ? `${e.name}: ` : '';
  const label = LEVEL_LABELS[e.level as number] ?? '';
  return `${prefix}${label}${String(e.msg ?? '')}${fields.length ? ` (${fields.join(' ')})` : ''}\n`;
}
