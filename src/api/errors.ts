// One error shape for the whole HTTP API:
//   {"error": {"code": "...", "message": "...", "details": [{"field": "...", "problem": "..."}]}}
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ValidationError, type FieldProblem } from '../model/request.js';
import { ConflictError, ForbiddenError, NotFoundError, UnauthorizedError } from '../store/errors.js';
import { NO_NUL } from './schemas.js';

export interface ErrorBody {
  error: { code: string; message: string; details: FieldProblem[] };
}

/** The HTTP status of each kind of refusal (src/model/transitions.ts). */
export const REFUSAL_STATUS = {
  not_found: 404,
  forbidden: 403,
  conflict: 409,
  already_finished: 409,
} as const;

/** An error with an HTTP status that handlers throw for the client. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: FieldProblem[] = [],
  ) {
    super(message);
  }
}

export function errorBody(code: string, message: string, details: FieldProblem[] = []): ErrorBody {
  return { error: { code, message, details } };
}

interface AjvError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
  /** With ajv's `verbose` option (set in server.ts): the failing schema's parent and the value. */
  parentSchema?: Record<string, unknown>;
  data?: unknown;
}

/** A value as the client sent it, short enough for a message. */
function shown(v: unknown): string {
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** Words for the type or range a schema expects ("a whole number from 0 to 1000"). */
function expected(schema: Record<string, unknown> | undefined): string {
  if (!schema) return 'a valid value';
  if (typeof schema.description === 'string') return schema.description;
  const variants = (schema.anyOf ?? schema.oneOf) as Record<string, unknown>[] | undefined;
  if (variants?.every((v) => 'const' in v))
    return `one of ${variants.map((v) => String(v.const)).join(', ')}`;
  if (variants) return variants.map(expected).join(', or ');
  const { type, minimum, maximum, exclusiveMinimum } = schema as Record<string, number | string | undefined>;
  if (type === 'integer' || type === 'number') {
    const what = type === 'integer' ? 'a whole number' : 'a number';
    const lo = minimum ?? (exclusiveMinimum !== undefined ? `above ${exclusiveMinimum}` : undefined);
    if (minimum !== undefined && maximum !== undefined) return `${what} from ${minimum} to ${maximum}`;
    if (lo !== undefined) return `${what} ${typeof lo === 'number' ? `of at least ${lo}` : lo}`;
    if (maximum !== undefined) return `${what} of at most ${maximum}`;
    return what;
  }
  if (type === 'string') {
    const max = schema.maxLength as number | undefined;
    const min = schema.minLength as number | undefined;
    return min
      ? `a string of ${min} to ${max ?? 'any number of'} characters`
      : `a string${max ? ` of at most ${max} characters` : ''}`;
  }
  if (type === 'array')
    return `a list${schema.maxItems !== undefined ? ` of at most ${String(schema.maxItems)} items` : ''}`;
  if (type === 'object') return 'an object';
  return typeof type === 'string' ? `a ${type}` : 'a valid value';
}

/** One problem for one ajv error: the field it names, and what was expected instead of what came. */
function problemOf(v: AjvError, context: string): FieldProblem {
  const path = v.instancePath.replace(/^\//, '').replace(/\//g, '.');
  const field = (name: unknown) => (path ? `${path}.${String(name)}` : String(name));
  switch (v.keyword) {
    case 'additionalProperties':
      return v.parentSchema?.patternProperties
        ? {
            field: field(v.params.additionalProperty),
            problem: `expected a key ${expectedKey(v.parentSchema)}`,
          }
        : { field: field(v.params.additionalProperty), problem: 'unknown field' };
    case 'required':
      return { field: field(v.params.missingProperty), problem: 'is required' };
    case 'pattern':
      if (v.params.pattern === NO_NUL)
        return { field: path || context, problem: 'must not contain a NUL character (\\u0000)' };
      return {
        field: path || context,
        problem: `expected ${expected(v.parentSchema)}, got ${shown(v.data)}`,
      };
    default:
      return {
        field: path || context,
        problem: `expected ${expected(v.parentSchema)}, got ${shown(v.data)}`,
      };
  }
}

function expectedKey(parent: Record<string, unknown>): string {
  const keys = Object.keys(parent.patternProperties as object);
  return keys.every((k) => k === NO_NUL) ? 'without NUL characters' : `matching ${keys.join(' or ')}`;
}

/**
 * Fastify's validation errors as field problems: one per field, even where a union (a size given as a
 * number or a string) makes ajv report each branch — the union's own description says it all at once.
 */
function ajvProblems(err: FastifyError): FieldProblem[] {
  // ajv's `verbose` errors carry parentSchema and data, which fastify's type does not list.
  const validation = (err.validation ?? []) as AjvError[];
  const context = err.validationContext ?? 'body';
  const unions = validation
    .filter((v) => v.keyword === 'anyOf' || v.keyword === 'oneOf')
    .map((v) => v.instancePath);
  const inUnion = (v: AjvError) =>
    v.keyword !== 'anyOf' &&
    v.keyword !== 'oneOf' &&
    unions.some((u) => v.instancePath === u || v.instancePath.startsWith(`${u}/`));
  const byField = new Map<string, FieldProblem>();
  for (const v of validation) {
    if (inUnion(v)) continue;
    const p = problemOf(v, context);
    if (!byField.has(p.field)) byField.set(p.field, p);
  }
  return [...byField.values()];
}

/** Maps every error to the one shape; never leaks internals in a 500. */
export function handleError(err: unknown, req: FastifyRequest, reply: FastifyReply): void {
  const send = (status: number, body: ErrorBody) => void reply.status(status).send(body);
  if (err instanceof HttpError) return send(err.status, errorBody(err.code, err.message, err.details));
  if (err instanceof ValidationError) return send(400, errorBody('invalid', err.message, err.details));
  if (err instanceof NotFoundError) return send(404, errorBody('not_found', err.message));
  if (err instanceof ConflictError) return send(409, errorBody(err.code, err.message));
  if (err instanceof ForbiddenError) return send(403, errorBody('forbidden', err.message));
  if (err instanceof UnauthorizedError) return send(401, errorBody('unauthorized', err.message));
  const fe = err as FastifyError;
  if (fe?.validation) {
    const details = ajvProblems(fe);
    return send(
      400,
      errorBody('invalid', details.map((d) => `${d.field}: ${d.problem}`).join('; '), details),
    );
  }
  if (fe?.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
    const code =
      fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY'
        ? 'invalid_json'
        : fe.statusCode === 413
          ? 'too_large'
          : fe.statusCode === 415
            ? 'unsupported_media_type'
            : 'bad_request';
    return send(fe.statusCode, errorBody(code, fe.message, [{ field: 'body', problem: fe.message }]));
  }
  if (isDatabaseUnavailable(err)) {
    req.log.warn({ err }, 'database unavailable');
    return send(503, errorBody('unavailable', 'the database is unavailable; retry shortly'));
  }
  req.log.error({ err }, 'internal error');
  return send(500, errorBody('internal', 'internal error; see the server log'));
}

/** PostgreSQL restarting, shutting down, or unreachable: a 503 the client retries, not a 500. */
const UNAVAILABLE_CODES = new Set([
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
]);

export function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return (
    UNAVAILABLE_CODES.has(e?.code ?? '') ||
    /Connection terminated|connection timeout|Client has encountered a connection error/i.test(
      e?.message ?? '',
    )
  );
}
