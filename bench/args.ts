// One parser for every bench's options (node:util parseArgs): each option is declared once, with what it
// takes, its default and its help; a wrong or unknown option is refused naming it and what was expected;
// `--help` prints the usage. bench/main.ts prints a UsageError (with the usage) and exits 2, or 0 for --help.
import { parseArgs } from 'node:util';
import { parseDuration } from '../src/model/units.js';

/** A refused command line, or the usage asked for with --help (exit code 0). */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

type Raw = string | boolean | string[] | undefined;

/** One option: how parseArgs reads it, how it shows in the usage, and its value from what was given. */
export interface Opt<T> {
  type: 'string' | 'boolean';
  multiple?: true;
  /** What the flag takes in the usage ("N", "" for a switch). */
  meta: string;
  /** What it is, with its default. */
  usage: string;
  value(raw: Raw, flag: string): T;
}

const refuse = (flag: string, expected: string, got: Raw) =>
  new UsageError(`${flag}: expected ${expected}, got ${JSON.stringify(got)}`);

/** A whole number ≥ min. */
function whole(raw: string, flag: string, min: number): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isInteger(n) || n < min)
    throw refuse(flag, `a whole number ≥ ${min}`, raw);
  return n;
}

export const opt = {
  /** A switch: true when given. */
  flag: (help: string): Opt<boolean> => ({
    type: 'boolean',
    meta: '',
    usage: help,
    value: (r) => r === true,
  }),
  /** A whole number ≥ min (default 1); `dflt` undefined: none when absent. */
  int: <D extends number | undefined>(dflt: D, help: string, min = 1): Opt<number | D> => ({
    type: 'string',
    meta: 'N',
    usage: `${help}${dflt === undefined ? '' : ` (default ${dflt})`}`,
    value: (r, f) => (r === undefined ? dflt : whole(r as string, f, min)),
  }),
  /** One duration ("50ms", "10m"), as milliseconds. */
  duration: (dflt: string, help: string): Opt<number> => ({
    type: 'string',
    meta: 'D',
    usage: `${help} (default ${dflt})`,
    value(r, f) {
      const x = (r as string | undefined) ?? dflt;
      try {
        return parseDuration(x);
      } catch {
        throw refuse(f, 'a duration such as 90s or 10m', x);
      }
    },
  }),
  /** Durations ("50ms", "1s", …), comma-separated, as milliseconds. */
  durations: (dflt: string, help: string): Opt<number[]> => ({
    type: 'string',
    meta: 'D,…',
    usage: `${help} (default ${dflt})`,
    value: (r, f) =>
      ((r as string | undefined) ?? dflt).split(',').map((x) => {
        try {
          return parseDuration(x);
        } catch {
          throw refuse(f, 'durations such as 50ms,1s', x);
        }
      }),
  }),
  /** A number > 0 (`above`), or ≥ 0. */
  number: (dflt: number, help: string, above = true): Opt<number> => ({
    type: 'string',
    meta: 'X',
    usage: `${help} (default ${dflt})`,
    value(r, f) {
      if (r === undefined) return dflt;
      const n = Number(r);
      if ((r as string).trim() === '' || !Number.isFinite(n) || (above ? n <= 0 : n < 0))
        throw refuse(f, above ? 'a number > 0' : 'a number ≥ 0', r);
      return n;
    },
  }),
  /** Whole numbers ≥ min, comma-separated. */
  ints: (dflt: string, help: string, min = 1): Opt<number[]> => ({
    type: 'string',
    meta: 'N,…',
    usage: `${help} (default ${dflt})`,
    value(r, f) {
      try {
        return ((r as string | undefined) ?? dflt).split(',').map((x) => whole(x, f, min));
      } catch {
        throw refuse(f, `whole numbers ≥ ${min}, comma-separated`, r);
      }
    },
  }),
  /** Any text; undefined when absent and no default. */
  text: <D extends string | undefined>(dflt: D, help: string): Opt<string | D> => ({
    type: 'string',
    meta: 'S',
    usage: `${help}${dflt === undefined ? '' : ` (default ${dflt})`}`,
    value: (r) => (r === undefined ? dflt : (r as string)),
  }),
  /** One of `choices`. */
  oneOf: <C extends string>(choices: readonly C[], dflt: C, help: string): Opt<C> => ({
    type: 'string',
    meta: choices.join('|'),
    usage: `${help} (default ${dflt})`,
    value(r, f) {
      if (r === undefined) return dflt;
      if (!(choices as readonly string[]).includes(r as string))
        throw refuse(f, `one of ${choices.join(', ')}`, r);
      return r as C;
    },
  }),
  /** Some of `choices`, comma-separated. */
  someOf: <C extends string>(choices: readonly C[], dflt: readonly C[], help: string): Opt<C[]> => ({
    type: 'string',
    meta: `${choices.join(',')}`,
    usage: `${help} (default ${dflt.join(',')})`,
    value(r, f) {
      if (r === undefined) return [...dflt];
      return (r as string).split(',').map((x) => {
        if (!(choices as readonly string[]).includes(x))
          throw refuse(f, `a list of ${choices.join(', ')}`, x);
        return x as C;
      });
    },
  }),
  /** Text that may be given several times, in order. */
  repeated: (help: string): Opt<string[]> => ({
    type: 'string',
    multiple: true,
    meta: 'S',
    usage: `${help} (may be repeated)`,
    value: (r) => (r as string[] | undefined) ?? [],
  }),
};

export type Values<S extends Record<string, Opt<unknown>>> = {
  [K in keyof S]: S[K] extends Opt<infer T> ? T : never;
};

/** The usage of a bench: its name and each option's line. */
export function usage(bench: string, spec: Record<string, Opt<unknown>>): string {
  const rows: [string, string][] = [
    ...Object.entries(spec).map(([k, o]): [string, string] => [
      `--${k}${o.meta ? ` ${o.meta}` : ''}`,
      o.usage,
    ]),
    ['--help', 'this text'],
  ];
  const width = Math.max(...rows.map(([f]) => f.length));
  const lines = rows.map(([f, u]) => `  ${f.padEnd(width)}  ${u}`);
  return [`usage: npm run bench -- ${bench} [options]`, ...lines].join('\n');
}

/** The bench's options from its command line; throws a UsageError naming what is wrong (or for --help). */
export function benchArgs<S extends Record<string, Opt<unknown>>>(
  bench: string,
  argv: string[],
  spec: S,
): Values<S> {
  const options = Object.fromEntries(
    Object.entries(spec).map(([k, o]) => [k, { type: o.type, ...(o.multiple ? { multiple: true } : {}) }]),
  );
  let values: Record<string, Raw>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { ...options, help: { type: 'boolean' } },
      strict: true,
    }));
  } catch (err) {
    // parseArgs names the option ("Unknown option '--x'", "Option '--runs <value>' argument missing").
    throw new UsageError(`${(err as Error).message.split('. ')[0]}\n${usage(bench, spec)}`);
  }
  if (values.help === true) throw new UsageError(usage(bench, spec), 0);
  return Object.fromEntries(
    Object.entries(spec).map(([k, o]) => [k, o.value(values[k], `--${k}`)]),
  ) as Values<S>;
}
