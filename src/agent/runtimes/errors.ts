// Errors a runtime raises when it cannot start a container. The agent maps them to a Cancelled
// container by `failureClass` (DESIGN §3.2) and `retryable`, never by matching message text.

/** What the agent reads of a start error: its class, and `retryable: false` when no retry can succeed. */
export interface StartFailure {
  failureClass?: 'temp' | 'perm';
  retryable?: boolean;
}

/**
 * The image does not exist or cannot be used (no such name, unreadable tarball): cancel `perm`, not
 * retryable (another attempt would find the same image missing: the request ends at once).
 */
export class ImageNotFoundError extends Error {
  readonly failureClass = 'perm' as const;
  readonly retryable = false;
  override name = 'ImageNotFoundError';
  constructor(
    readonly image: string,
    detail: string,
  ) {
    super(`image ${JSON.stringify(image)}: ${detail}`);
  }
}

/** The runtime failed for a reason that may pass (daemon unreachable, runc failed to start): cancel `temp`. */
export class RuntimeTransientError extends Error {
  readonly failureClass = 'temp' as const;
  override name = 'RuntimeTransientError';
  constructor(
    readonly runtime: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`${runtime}: ${detail}`, options);
  }
}

/**
 * The node cannot run images at all (no docker, podman or runc usable): cancel `perm`, not retryable
 * (every node of a cluster runs the same agent setup, so another attempt would meet the same node).
 */
export class NoImageRuntimeError extends Error {
  readonly failureClass = 'perm' as const;
  readonly retryable = false;
  override name = 'NoImageRuntimeError';
}

/**
 * The registry could not be reached (or failed) while pulling an image: worth another try. A pull that
 * keeps failing this way ends as ImagePullError (pull.ts).
 */
export class RegistryUnavailableError extends Error {
  readonly failureClass = 'temp' as const;
  override name = 'RegistryUnavailableError';
  constructor(
    readonly image: string,
    detail: string,
  ) {
    super(`image ${JSON.stringify(image)}: ${detail}`);
  }
}

/** A pull failed every bounded attempt (registry unreachable): cancel `perm`, not retried for minutes. */
export class ImagePullError extends Error {
  readonly failureClass = 'perm' as const;
  override name = 'ImagePullError';
}
