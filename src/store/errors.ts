// Errors the store raises; the API maps each to one HTTP status and the one error shape.
import type { Refusal } from '../model/transitions.js';

/** The thing does not exist (or the caller may not know it exists). → 404 */
export class NotFoundError extends Error {
  readonly code = 'not_found';
}

/** The change is not legal in the current state (illegal transition, stale writer). → 409 */
export class ConflictError extends Error {
  readonly code: string = 'conflict';
}

/** A cancel of a container that has already ended: there is nothing left to stop. → 409 already_finished */
export class AlreadyFinishedError extends ConflictError {
  override readonly code = 'already_finished';
}

/** The caller is known but not allowed to do this. → 403 */
export class ForbiddenError extends Error {
  readonly code = 'forbidden';
}

/** No valid credential. → 401 */
export class UnauthorizedError extends Error {
  readonly code = 'unauthorized';
}

/** The error for a refusal's code (src/model/transitions.ts). */
export function refusalError(r: Refusal): Error {
  if (r.code === 'not_found') return new NotFoundError(r.reason);
  if (r.code === 'forbidden') return new ForbiddenError(r.reason);
  if (r.code === 'already_finished') return new AlreadyFinishedError(r.reason);
  return new ConflictError(r.reason);
}
