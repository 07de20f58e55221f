// One error shape for the whole HTTP API:
//   {"error": {"code": "...", "message": "...", "details": [{"field": "...", "problem": "..."}]}}
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ValidationError, type FieldProblem } from '../model/request.js';
import { ConflictError, ForbiddenError, NotFoundError, UnauthorizedError } from '../store/errors.js';

export interface ErrorBody {
  error: { code: string; message: string; details: FieldProblem[] };
}

/** The HTTP status of each kind of refusal (src/model/transitions.ts). */
export const REFUSAL_STATUS = { not_found: 404, forbidden: 403, conflict: 409 } as const;

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

/** "/resources/ram" + "must be ..." → {field: "resources.ram", problem}. */
function ajvProblems(err: FastifyError): FieldProblem[] {
  const validation =
    (err as FastifyError & { validation?: AjvError[]; validationContext?: string }).validation ?? [];
  const context = (err as { validationContext?: string }).validationContext ?? 'body';
  return validation.map((v) => {
    let field = v.instancePath.replace(/^\//, '').replace(/\//g, '.');
    let problem = v.message ?? 'is invalid';
    if (v.keyword === 'additionalProperties') {
      const extra = (v.params as { additionalProperty?: string }).additionalProperty;
      field = field ? `${field}.${extra}` : String(extra);
      problem = 'unknown field';
    } else if (v.keyword === 'required') {
      const missing = (v.params as { missingProperty?: string }).missingProperty;
      field = field ? `${field}.${missing}` : String(missing);
      problem = 'is required';
    } else if (v.keyword === 'anyOf' || v.keyword === 'oneOf') {
      problem = 'has the wrong type or format';
    } else {
      problem = `expected a value that ${problem}`;
    }
    return { field: field || context, problem };
  });
}

interface AjvError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: unknown;
}

/** Maps every error to the one shape; never leaks internals in a 500. */
export function handleError(err: unknown, req: FastifyRequest, reply: FastifyReply): void {
  const send = (status: number, body: ErrorBody) => void reply.status(status).send(body);
  if (err instanceof HttpError) return send(err.status, errorBody(err.code, err.message, err.details));
  if (err instanceof ValidationError) return send(400, errorBody('invalid', err.message, err.details));
  if (err instanceof NotFoundError) return send(404, errorBody('not_found', err.message));
  if (err instanceof ConflictError) return send(409, errorBody('conflict', err.message));
  if (err instanceof ForbiddenError) return send(403, errorBody('forbidden', err.message));
  if (err instanceof UnauthorizedError) return send(401, errorBody('unauthorized', err.message));
  const fe = err as FastifyError;
  if (fe && (fe as { validation?: unknown }).validation) {
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
