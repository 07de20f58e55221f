// Typed cloud errors (DESIGN §7). The scheduler and the decorators act on these without matching
// message text: every fact a caller needs to decide whether and when to retry is a field.

/** What kind of failure a cloud error is; also the `kind` label in metrics. */
export type CloudErrorKind = 'quota' | 'capacity' | 'rate-limit' | 'not-found' | 'api';

/** The base of every error a driver throws on purpose. */
export abstract class CloudError extends Error {
  abstract readonly kind: CloudErrorKind;
  /** Whether repeating the same call later may succeed (Temporal's nonRetryable, inverted). */
  abstract readonly retryable: boolean;
}

/**
 * The account's quota is exhausted: no more instances (or vcpus) until some go away.
 * The scheduler treats the current count as the cap (DESIGN §6.2 rule 6).
 */
export class QuotaError extends CloudError {
  readonly kind = 'quota';
  readonly retryable = true;
  constructor(
    message: string,
    /** The limit the cloud reported, when it said (e.g. 32 instances or 512 vcpus). */
    readonly limit: { instances?: number; vcpus?: number } = {},
    /**
     * The quota the limit belongs to, when the cloud has several (EC2: one per instance family group and
     * purchase option, e.g. "on-demand/standard", "spot/g-vt"); null: one account-wide quota.
     */
    readonly group: string | null = null,
  ) {
    super(`quota exceeded${group ? ` (${group})` : ''}: ${message}`);
    this.name = 'QuotaError';
  }
}

/** How far a capacity shortage reaches: one instance type, a group of types, or the whole cloud. */
export type CapacityScope = 'type' | 'quota-group' | 'all';

/** The cloud has no capacity for the request right now (AWS InsufficientInstanceCapacity). */
export class CapacityError extends CloudError {
  readonly kind = 'capacity';
  readonly retryable = true;
  constructor(
    readonly scope: CapacityScope,
    /** The provider type (scope "type") or quota group name (scope "quota-group"); null for "all". */
    readonly subject: string | null,
    message = 'insufficient capacity',
  ) {
    super(`${message} (${scope}${subject === null ? '' : ` ${subject}`})`);
    this.name = 'CapacityError';
  }
}

/** The cloud (or our own limiter) refused the call for now; nothing should be tried before earliestRetry. */
export class RateLimitError extends CloudError {
  readonly kind = 'rate-limit';
  readonly retryable = true;
  constructor(
    readonly earliestRetry: Date,
    /** "cloud" when the provider said so, "local" when a decorator's limit refused before calling. */
    readonly source: 'cloud' | 'local' = 'cloud',
    reason = 'rate limited',
  ) {
    super(`${reason}; retry after ${earliestRetry.toISOString()}`);
    this.name = 'RateLimitError';
  }
}

/** The instance does not exist (never did, or the cloud forgot it after termination). */
export class NotFoundError extends CloudError {
  readonly kind = 'not-found';
  readonly retryable = false;
  constructor(readonly id: string) {
    super(`instance not found: ${id}`);
    this.name = 'NotFoundError';
  }
}

/** Any other failure of the cloud API (5xx, timeout): assumed transient. */
export class CloudApiError extends CloudError {
  readonly kind = 'api';
  constructor(
    message: string,
    readonly retryable = true,
  ) {
    super(message);
    this.name = 'CloudApiError';
  }
}

/** The kind of any thrown value, for metrics labels: a CloudError's kind, else "unexpected". */
export function errorKind(err: unknown): CloudErrorKind | 'unexpected' {
  return err instanceof CloudError ? err.kind : 'unexpected';
}
