// EC2's error codes, classified once (DESIGN §7): what the ec2 driver turns into the typed cloud errors.
// The codes are EC2's documented API error codes; the HTTP status is not used to classify, because EC2
// sends capacity shortages as 5xx and the same status carries retryable and fatal errors.
import { CloudApiError } from '../errors.js';

/** What an EC2 failure means for the caller. */
export type Ec2FailureKind =
  | 'capacity' // no capacity for this type in this zone: try another zone, then another type
  | 'quota' // an account limit: no more instances (of this group) until some go away
  | 'throttle' // API rate limit: retry later
  | 'not-found' // the instance does not exist
  | 'access' // credentials or IAM refuse the action: an operator must act
  | 'invalid' // the request is wrong (AMI, subnet, parameters): an operator must act
  | 'transient'; // 5xx, timeout, connection error: the same call may succeed

export interface Ec2Failure {
  kind: Ec2FailureKind;
  /** EC2's error code, or the SDK's / socket's error name when the request never got an answer. */
  code: string;
  message: string;
  /** For `transient`: whether the request may have reached EC2 (a timeout, a cut connection). */
  outcomeUnknown: boolean;
}

const CAPACITY = new Set([
  'InsufficientInstanceCapacity',
  'InsufficientHostCapacity',
  'InsufficientReservedInstanceCapacity',
  'InsufficientCapacity',
  'Unsupported', // the type is not offered in this zone
  'SpotMaxPriceTooLow',
  'InsufficientFreeAddressesInSubnet',
]);
const QUOTA = new Set([
  'InstanceLimitExceeded',
  'VcpuLimitExceeded',
  'MaxSpotInstanceCountExceeded',
  'SpotInstanceRequestLimitExceeded',
]);
const THROTTLE = new Set([
  'RequestLimitExceeded',
  'Throttling',
  'ThrottlingException',
  'RequestThrottled',
  'TooManyRequestsException',
  'SlowDown',
]);
const NOT_FOUND = new Set(['InvalidInstanceID.NotFound', 'InvalidInstanceID.Malformed']);
const ACCESS = new Set([
  'AuthFailure',
  'UnauthorizedOperation',
  'OptInRequired',
  'Blocked',
  'PendingVerification',
  'InvalidClientTokenId',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'RequestExpired',
  'CredentialsProviderError',
]);
const TRANSIENT_CODES = new Set(['InternalError', 'InternalFailure', 'ServiceUnavailable', 'Unavailable']);
/** Socket and SDK errors after which the request may have reached EC2. */
const OUTCOME_UNKNOWN = new Set(['TimeoutError', 'RequestTimeout', 'ECONNRESET', 'EPIPE', 'socket hang up']);

interface SdkErrorLike {
  name?: string;
  code?: string;
  Code?: string;
  message?: string;
  $fault?: 'client' | 'server';
  $metadata?: { httpStatusCode?: number };
}

/** Classifies anything the SDK threw. */
export function classifyEc2Error(err: unknown): Ec2Failure {
  const e = (err ?? {}) as SdkErrorLike;
  const code = e.Code ?? (e.name && e.name !== 'Error' ? e.name : undefined) ?? e.code ?? 'Error';
  const message = e.message ?? String(err);
  const status = e.$metadata?.httpStatusCode;
  const f = (kind: Ec2FailureKind, outcomeUnknown = false): Ec2Failure => ({
    kind,
    code,
    message,
    outcomeUnknown,
  });
  if (CAPACITY.has(code)) return f('capacity');
  if (QUOTA.has(code)) return f('quota');
  if (THROTTLE.has(code) || status === 429) return f('throttle');
  if (NOT_FOUND.has(code)) return f('not-found');
  if (ACCESS.has(code) || status === 401 || status === 403) return f('access');
  if (TRANSIENT_CODES.has(code)) return f('transient');
  // No HTTP answer at all: the connection failed or timed out.
  if (status === undefined) {
    const unknown =
      OUTCOME_UNKNOWN.has(code) || OUTCOME_UNKNOWN.has(e.code ?? '') || /hang up|reset/i.test(message);
    return f('transient', unknown);
  }
  if (status >= 500) return f('transient', true);
  return f('invalid');
}

/** EC2 or IAM refused an action: Berth cannot go on until an operator fixes credentials or the policy. */
export class Ec2AccessError extends CloudApiError {
  constructor(
    readonly action: string,
    readonly code: string,
    detail: string,
  ) {
    super(
      `EC2 refused ${action} (${code}): ${detail} — check the credentials and that the IAM policy allows ec2:${action} (docs/AWS.md)`,
      false,
    );
    this.name = 'Ec2AccessError';
  }
}

/** The request itself is wrong (unknown AMI or subnet, bad parameters): retrying the same call cannot help. */
export class Ec2RequestError extends CloudApiError {
  constructor(
    readonly action: string,
    readonly code: string,
    detail: string,
  ) {
    super(`EC2 rejected ${action} (${code}): ${detail}`, false);
    this.name = 'Ec2RequestError';
  }
}

/** The vCPU limit EC2 states in a VcpuLimitExceeded message ("… your current vCPU limit of 32 allows …"). */
export function statedVcpuLimit(message: string): number | undefined {
  const m = /vCPU limit of (\d+)/i.exec(message);
  return m ? Number(m[1]) : undefined;
}
