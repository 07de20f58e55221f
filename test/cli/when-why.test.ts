// Pure parts of the CLI: the times `--run-after` accepts, why a container waits (from its record and its
// request's), and text made safe for a terminal.
import { describe, expect, it } from 'vitest';
import { explain } from '../../src/cli/commands/why.js';
import { UsageError } from '../../src/cli/errors.js';
import { printable } from '../../src/cli/format.js';
import { parseWhen } from '../../src/cli/when.js';
import type { ContainerRecord, RequestRecord } from '../../src/store/records.js';

describe('parseWhen (--run-after)', () => {
  const now = new Date(2030, 5, 15, 12, 0, 0); // 15 June 2030 12:00 local time

  it('reads relative durations, local times, times of day and RFC 3339', () => {
    expect(parseWhen('+20m', now).getTime()).toBe(now.getTime() + 20 * 60_000);
    expect(parseWhen('+2h30m', now).getTime()).toBe(now.getTime() + 150 * 60_000);
    expect(parseWhen('now', now)).toBe(now);
    expect(parseWhen('2030-11-23 08:00', now)).toEqual(new Date(2030, 10, 23, 8, 0));
    expect(parseWhen('2030-11-23T08:00:30', now)).toEqual(new Date(2030, 10, 23, 8, 0, 30));
    expect(parseWhen('2030-11-23', now)).toEqual(new Date(2030, 10, 23));
    expect(parseWhen('13:30', now)).toEqual(new Date(2030, 5, 15, 13, 30));
    expect(parseWhen('08:00', now)).toEqual(new Date(2030, 5, 16, 8, 0)); // passed today: tomorrow
    expect(parseWhen('2030-11-23T08:00:00Z', now).toISOString()).toBe('2030-11-23T08:00:00.000Z');
    expect(parseWhen('2030-11-23T08:00:00+02:00', now).toISOString()).toBe('2030-11-23T06:00:00.000Z');
  });

  it('refuses what it cannot read, naming the flag and what is accepted', () => {
    for (const bad of [
      'tomorrow',
      '+',
      '+5 parsecs',
      '2030-02-30 10:00',
      '2030-13-01',
      '25:00',
      '2030/11/23',
    ]) {
      expect(() => parseWhen(bad, now), bad).toThrow(UsageError);
      expect(() => parseWhen(bad, now), bad).toThrow(/^--run-after: expected \+DURATION/);
    }
  });
});

const T0 = new Date('2030-01-01T00:00:00Z');
const container = (over: Partial<ContainerRecord> = {}): ContainerRecord =>
  ({
    id: 'c-1',
    request_id: 'r-1',
    attempt: 1,
    state: 'Queued',
    priority: 500,
    run_after: null,
    instance_id: null,
    scheduling_status: null,
    ...over,
  }) as ContainerRecord;
const request = (over: Partial<RequestRecord> = {}): RequestRecord =>
  ({ id: 'r-1', run_after: null, ...over }) as RequestRecord;

describe('why: what the data says first, then the dispatcher', () => {
  it('priority 0 is "not scheduled", even with a dispatcher status', () => {
    expect(explain(container({ priority: 0, scheduling_status: 'queue position 1' }), request(), T0)).toBe(
      'Queued: not scheduled: priority is 0 (raise it with `berth priority r-1 N`)',
    );
  });

  it('a run-after in the future is "waits until"; a later retry time is "retry backoff"', () => {
    const at = new Date(T0.getTime() + 3_600_000);
    expect(explain(container({ run_after: at }), request({ run_after: at }), T0)).toBe(
      'Queued: waits until 2030-01-01T01:00:00.000Z (in 1h) (run-after)',
    );
    const backoff = new Date(T0.getTime() + 40_000);
    expect(explain(container({ run_after: backoff, attempt: 2 }), request(), T0)).toBe(
      'Queued: retry backoff until 2030-01-01T00:00:40.000Z (in 40s) (attempt 2, after an infrastructure failure)',
    );
    // passed: the dispatcher's words
    expect(
      explain(
        container({ run_after: T0, scheduling_status: 'waits for a t1 instance; max_instances=1 reached' }),
        request(),
        T0,
      ),
    ).toBe('Queued: waits for a t1 instance; max_instances=1 reached');
  });

  it('placed, running and ended containers say so; with no status yet it asks for a dispatcher', () => {
    expect(explain(container({ state: 'Locked', instance_id: 'i-9' }), request(), T0)).toBe(
      'Locked, placed on instance i-9; its agent is starting it',
    );
    expect(explain(container(), request(), T0)).toMatch(/waiting for the dispatcher \(no status yet/);
    expect(
      explain(
        container({ state: 'Cancelled', failure_class: 'perm', runtime_status: 'gone' }),
        request(),
        T0,
      ),
    ).toBe('Cancelled (perm): gone');
  });
});

describe('printable', () => {
  it('escapes control characters and bidirectional overrides, and leaves other text alone', () => {
    expect(printable('a\u001b[2Jb\u0007\u009b\u007f')).toBe('a\\u001b[2Jb\\u0007\\u009b\\u007f');
    expect(printable('x\ny\tz\r')).toBe('x\\ny\\tz\\r');
    expect(printable('\u202etxt.exe\u2066\u200f')).toBe('\\u202etxt.exe\\u2066\\u200f');
    expect(printable('héllo wörld 日本 𝒳 emoji 🙂')).toBe('héllo wörld 日本 𝒳 emoji 🙂');
  });
});
