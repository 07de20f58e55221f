// The cloud driver contract (DESIGN §7). A driver is a thin adapter to one provider's API; limits,
// retries and metrics live in the scheduler and in decorators (src/cloud/decorators/), never here.
import type { InstanceType } from '../model/types.js';

/** Tags as the cloud stores them: string keys to string values. */
export type Tags = Record<string, string>;

/** An instance's state as the cloud reports it (not Berth's lifecycle state, which adds the agent's view). */
export type CloudInstanceState = 'pending' | 'running' | 'terminated';

/** One instance as the cloud lists it. */
export interface CloudInstance {
  id: string;
  /** The provider's name for the machine shape (InstanceType.providerType). */
  providerType: string;
  tags: Tags;
  state: CloudInstanceState;
  createdAt: Date;
  /** Whether the cloud may reclaim it (spot / preemptible). */
  preemptible: boolean;
  /** When the cloud announced that it will reclaim this instance, if it has; null otherwise. */
  interruptionNotice: Date | null;
}

/**
 * The operations every driver implements. Errors the caller acts on are thrown as the typed errors of
 * ./errors.ts (QuotaError, CapacityError, RateLimitError, NotFoundError, CloudApiError).
 */
export interface Driver {
  /** Creates an instance of `type` carrying `tags`; `bootData` is handed to the machine at boot. */
  create(type: InstanceType, tags: Tags, bootData: string): Promise<CloudInstance>;
  /** Instances whose tags include every key/value of `tagFilter` (an empty filter lists all). */
  list(tagFilter: Tags): Promise<CloudInstance[]>;
  /** Terminates an instance. Destroying an already terminated instance succeeds; an unknown id is NotFoundError. */
  destroy(id: string): Promise<void>;
  /** Adds or overwrites the given tags on an instance (other tags are kept). */
  setTags(id: string, tags: Tags): Promise<void>;
}

/** The operation names, for metrics labels and the sim cloud's call log. */
export type DriverOp = 'create' | 'list' | 'destroy' | 'setTags';

/** Whether `tags` include every key/value pair of `filter`. */
export function matchesTags(tags: Tags, filter: Tags): boolean {
  for (const [k, v] of Object.entries(filter)) if (tags[k] !== v) return false;
  return true;
}
