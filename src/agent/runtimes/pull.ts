// Pulling an image, bounded (issue 10 item 10). A name that does not resolve or does not exist in its
// registry fails at once (ImageNotFoundError: cancel perm). A registry that cannot be reached is tried a
// few times in place, then the container is cancelled perm (ImagePullError) naming the last error: before,
// each failure was a `temp` cancel that the request retried with backoff for many minutes. A daemon that
// cannot be reached stays `temp` (RuntimeTransientError): that is the machine's trouble, not the image's.
import { ImagePullError, RegistryUnavailableError } from './errors.js';

/**
 * A registry's (or the engine's) "no such image", "not a valid name" or "the name resolves to no registry",
 * as docker, podman and the registries word it: read only where the engine gives no better data (docker's
 * progress stream, podman's CLI; docker's HTTP statuses are used first).
 */
export const REGISTRY_NOT_FOUND =
  /not found|does not exist|manifest unknown|name unknown|denied|unauthorized|did not resolve|no unqualified-search registries|invalid reference|must be lowercase/i;

/** How often and how far apart an unreachable registry is tried. */
export interface PullPolicy {
  /** Waits between attempts (its length + 1 is the number of attempts). */
  delaysMs: number[];
  sleep?: (ms: number) => Promise<void>;
}

export const DEFAULT_PULL_POLICY: PullPolicy = { delaysMs: [1000, 4000] };

/** Runs `pull`, again after each RegistryUnavailableError while the policy allows; other errors pass. */
export async function pullBounded(
  image: string,
  pull: () => Promise<void>,
  policy: PullPolicy = DEFAULT_PULL_POLICY,
): Promise<void> {
  const sleep = policy.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  for (let attempt = 0; ; attempt++) {
    try {
      return await pull();
    } catch (err) {
      if (!(err instanceof RegistryUnavailableError)) throw err;
      const delay = policy.delaysMs[attempt];
      if (delay === undefined)
        throw new ImagePullError(
          `image ${JSON.stringify(image)}: the pull failed ${attempt + 1} times, the registry is unreachable or failing; last: ${err.message}`,
          { cause: err },
        );
      await sleep(delay);
    }
  }
}
