// Errors the store raises; the API maps each to one HTTP status and the one error shape.

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
  constructor(
    id: string,
    readonly state: string,
  ) {
    super(`container ${id} has already finished (${state})`);
  }
}

/** The caller is known but not allowed to do this. → 403 */
export class ForbiddenError extends Error {
  readonly code = 'forbidden';
}

/** No valid credential. → 401 */
export class UnauthorizedError extends Error {
  readonly code = 'unauthorized';
}
