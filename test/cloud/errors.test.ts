import { describe, expect, it } from 'vitest';
import {
  CapacityError,
  CloudApiError,
  CloudError,
  errorKind,
  NotFoundError,
  QuotaError,
  RateLimitError,
} from '../../src/cloud/errors.js';

describe('cloud errors carry retry facts as data', () => {
  it.each([
    [new QuotaError('32 instances', { instances: 32 }), 'quota', true],
    [new CapacityError('quota-group', 'gpu'), 'capacity', true],
    [new RateLimitError(new Date(0)), 'rate-limit', true],
    [new NotFoundError('i-1'), 'not-found', false],
    [new CloudApiError('500'), 'api', true],
    [new CloudApiError('bad request', false), 'api', false],
  ])('%s', (err, kind, retryable) => {
    expect(err).toBeInstanceOf(CloudError);
    expect(err).toBeInstanceOf(Error);
    expect(err.kind).toBe(kind);
    expect(err.retryable).toBe(retryable);
    expect(errorKind(err)).toBe(kind);
  });

  it('messages say what happened; unknown throwables are "unexpected"', () => {
    expect(new CapacityError('type', 'general-2').message).toBe('insufficient capacity (type general-2)');
    expect(new CapacityError('all', null).message).toBe('insufficient capacity (all)');
    expect(new RateLimitError(new Date('2026-01-01T00:00:30Z'), 'local', 'slow down').message).toBe(
      'slow down; retry after 2026-01-01T00:00:30.000Z',
    );
    expect(new QuotaError('at most 2 instances').name).toBe('QuotaError');
    expect(errorKind(new Error('x'))).toBe('unexpected');
    expect(errorKind('string')).toBe('unexpected');
  });
});
