// The kinds of value an option can take: how a JSON value (or the text of an environment variable or a
// flag) becomes the value the code uses, and how the docs name it. Durations and sizes accept what people
// write ("90s", "4GiB") and plain numbers (seconds, bytes).
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseDuration, parseSize } from '../model/units.js';

/** Thrown by a kind: `what` says what would have been accepted (the caller adds the path and the value). */
export class Expected extends Error {
  constructor(readonly what: string) {
    super(what);
  }
}

/** What a value is parsed against besides itself. */
export interface ParseContext {
  /** Relative file names in a configuration file are resolved against this directory. */
  baseDir: string;
}

/** One kind of value. */
export interface Kind<T> {
  /** How the docs name it: "duration", "whole number >= 1", "one of a, b". */
  readonly type: string;
  /** The commander placeholder of its flag ("<duration>"). */
  readonly placeholder: string;
  /**
   * Converts a JSON value. Throws Expected (or UnitError) for the value itself; nested kinds throw a
   * ConfigError naming the path below `path`.
   */
  parse(raw: unknown, path: string, ctx: ParseContext): T;
  /** Reads text from an environment variable or a flag into what parse takes (numbers, booleans). */
  fromText?(text: string): unknown;
  /** Absent means undefined: whoever reads the value applies its own default. */
  readonly optional?: boolean;
  /** The kind this one wraps (nullable, optional), for the docs. */
  readonly of?: Kind<unknown>;
  /** A list's item kind, for the docs. */
  readonly items?: Kind<unknown>;
}

/** How a value is shown after "got": short for objects and arrays. */
export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  return JSON.stringify(v);
}

const numberText = (text: string): unknown => (/^\s*-?\d+(\.\d+)?\s*$/.test(text) ? Number(text) : text);

/** A non-empty string, optionally matching `pattern` (described by `what`). */
export function text(what = 'a non-empty string', pattern?: RegExp, placeholder = '<text>'): Kind<string> {
  return {
    type: 'string',
    placeholder,
    parse(v) {
      if (typeof v !== 'string' || v === '' || (pattern && !pattern.test(v))) throw new Expected(what);
      return v;
    },
  };
}

/** A path; "~" is the user's home directory; relative paths are resolved against the working directory. */
export const path: Kind<string> = {
  type: 'path',
  placeholder: '<path>',
  parse(v) {
    if (typeof v !== 'string' || v === '') throw new Expected('a path');
    return resolve(v === '~' || v.startsWith('~/') ? join(homedir(), v.slice(2)) : v);
  },
};

/** A URL with one of `schemes`. */
export function url(schemes: readonly string[], example: string): Kind<string> {
  return {
    type: `${schemes[0]} URL`,
    placeholder: '<url>',
    parse(v) {
      let ok = false;
      if (typeof v === 'string') {
        try {
          ok = schemes.includes(new URL(v).protocol.replace(/:$/, ''));
        } catch {
          ok = false;
        }
      }
      if (!ok) throw new Expected(`a URL such as ${example}`);
      return v as string;
    },
  };
}

/** HOST:PORT (port 0 picks a free one). */
export const hostPort: Kind<string> = {
  type: 'HOST:PORT',
  placeholder: '<host:port>',
  parse(v) {
    const m = typeof v === 'string' ? /^[^:\s]+:(\d{1,5})$/.exec(v) : null;
    if (!m || Number(m[1]) > 65535) throw new Expected('HOST:PORT such as 127.0.0.1:8470');
    return v as string;
  },
};

/** A whole number in [min, max]. */
export function int(min: number, max = Number.MAX_SAFE_INTEGER): Kind<number> {
  const what =
    max === Number.MAX_SAFE_INTEGER ? `a whole number >= ${min}` : `a whole number from ${min} to ${max}`;
  return {
    type: what.replace(/^a /, ''),
    placeholder: '<n>',
    parse(v) {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw new Expected(what);
      return v;
    },
    fromText: numberText,
  };
}

/** A finite number >= min (or > min when `above`), up to max. */
export function num(min: number, o: { above?: boolean; max?: number; what?: string } = {}): Kind<number> {
  const max = o.max ?? Infinity;
  const what =
    o.what ??
    (max < Infinity
      ? `a number from ${min} to ${max}`
      : o.above
        ? `a number above ${min}`
        : `a number >= ${min}`);
  return {
    type: what.replace(/^an? /, ''),
    placeholder: '<number>',
    parse(v) {
      if (typeof v !== 'number' || !Number.isFinite(v) || (o.above ? v <= min : v < min) || v > max)
        throw new Expected(what);
      return v;
    },
    fromText: numberText,
  };
}

/** A probability, 0 to 1. */
export const probability = num(0, { max: 1, what: 'a probability from 0 to 1' });

export const bool: Kind<boolean> = {
  type: 'boolean',
  placeholder: '<true|false>',
  parse(v) {
    if (typeof v !== 'boolean') throw new Expected('true or false');
    return v;
  },
  fromText: (t) => (t === 'true' || t === '1' ? true : t === 'false' || t === '0' ? false : t),
};

/** A duration in ms: "90s", "10m", "1h30m", "250ms" or a number of seconds; `above0` refuses 0. */
export function duration(o: { above0?: boolean; min?: string; max?: string } = {}): Kind<number> {
  const minMs = o.min === undefined ? 0 : parseDuration(o.min);
  const maxMs = o.max === undefined ? Infinity : parseDuration(o.max);
  return {
    type: `duration${o.above0 ? ' above 0' : ''}${o.min === undefined ? '' : `, at least ${o.min}`}${o.max === undefined ? '' : `, at most ${o.max}`}`,
    placeholder: '<duration>',
    parse(v) {
      const ms = parseDuration(v);
      if (o.above0 && ms <= 0) throw new Expected('a duration above 0');
      if (ms < minMs) throw new Expected(`a duration of at least ${o.min}`);
      if (ms > maxMs) throw new Expected(`a duration of at most ${o.max}`);
      return ms;
    },
  };
}

/** A size in bytes: "4GiB", "512MiB" or a number of bytes. */
export const size: Kind<number> = { type: 'size', placeholder: '<size>', parse: (v) => parseSize(v) };

/** A size of at least `min` ("64KiB"), or 0, which means what `zero` says ("no limit"). */
export function sizeOrZero(min: string, zero: string): Kind<number> {
  const minBytes = parseSize(min);
  const what = `0 (${zero}) or a size of at least ${min}`;
  return {
    type: `size: ${what}`,
    placeholder: '<size>',
    parse(v) {
      const bytes = parseSize(v);
      if (bytes !== 0 && bytes < minBytes) throw new Expected(what);
      return bytes;
    },
  };
}

/** One of the given strings. */
export function oneOf<const V extends string>(values: readonly V[], placeholder = '<name>'): Kind<V> {
  return {
    type: values.map((v) => `\`${v}\``).join(', '),
    placeholder,
    parse(v) {
      if (typeof v !== 'string' || !(values as readonly string[]).includes(v))
        throw new Expected(`one of ${values.join(', ')}`);
      return v as V;
    },
  };
}

/** The kind, or absent (undefined): the consumer of the value has its own default. */
export function optional<T>(k: Kind<T>): Kind<T | undefined> {
  return {
    type: k.type,
    placeholder: k.placeholder,
    parse: (v, p, ctx) => k.parse(v, p, ctx),
    ...(k.fromText ? { fromText: k.fromText } : {}),
    optional: true,
    of: k,
  };
}

/** The kind, or null. */
export function nullable<T>(k: Kind<T>): Kind<T | null> {
  return {
    type: `${k.type} or null`,
    placeholder: k.placeholder,
    parse: (v, p, ctx) => (v === null ? null : k.parse(v, p, ctx)),
    ...(k.fromText ? { fromText: k.fromText } : {}),
    of: k,
  };
}
