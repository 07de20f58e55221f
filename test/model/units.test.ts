import { describe, expect, it } from 'vitest';
import {
  formatDuration,
  formatSize,
  parseDuration,
  parseSize,
  parseVcpus,
  UnitError,
} from '../../src/model/units.js';

describe('sizes', () => {
  it.each([
    ['4GiB', 4 * 1024 ** 3],
    ['512MiB', 512 * 1024 ** 2],
    ['1.5G', 1.5e9],
    ['100', 100],
    [2048, 2048],
    [' 2 kib ', 2048],
  ])('parses %j', (input, bytes) => expect(parseSize(input)).toBe(bytes));
  it.each(['4 gigs', '', '-1', 'GiB', null, -5, Number.NaN, '1e3', {}])(
    'refuses %j with a clear message',
    (input) => {
      expect(() => parseSize(input)).toThrow(UnitError);
      expect(() => parseSize(input)).toThrow(/expected a size such as 4GiB/);
    },
  );
  it('formats', () => {
    expect(formatSize(4 * 1024 ** 3)).toBe('4GiB');
    expect(formatSize(1536 * 1024 ** 2)).toBe('1.5GiB');
    expect(formatSize(12)).toBe('12B');
  });
});

describe('durations', () => {
  it.each([
    ['90s', 90_000],
    ['1h30m', 5_400_000],
    ['250ms', 250],
    [60, 60_000],
    ['10', 10_000],
  ])('parses %j', (input, ms) => expect(parseDuration(input)).toBe(ms));
  it.each(['soon', '10x', '', -1, '1h 30m'])('refuses %j', (input) =>
    expect(() => parseDuration(input)).toThrow(UnitError),
  );
  it('refuses durations past 100 years (dates past JavaScript range, Infinity), naming the limit', () => {
    expect(parseDuration('36500d')).toBe(36_500 * 86_400_000);
    for (const input of ['36501d', '99999999999d', `${'9'.repeat(400)}s`, 1e300])
      expect(() => parseDuration(input)).toThrow(/at most 36500d, got /);
  });
  it('formats', () => {
    expect(formatDuration(5_400_000)).toBe('1h30m');
    expect(formatDuration(999)).toBe('999ms');
  });
});

describe('vcpus', () => {
  it('accepts fractions and refuses nonsense', () => {
    expect(parseVcpus(0.5)).toBe(0.5);
    expect(parseVcpus('2')).toBe(2);
    expect(() => parseVcpus(0)).toThrow(UnitError);
    expect(() => parseVcpus('two')).toThrow(UnitError);
  });
});
