// The one mechanism every option of Berth is declared with: process options (flags, environment,
// config.json), the dispatch config file, the scheduler keys (the `config` of a `berth plan` snapshot) and
// the simulator's config file. An option is declared once, with its key, the field the code reads, its
// kind (type and validation), default, help, environment variable and flag; a Section is a set of options
// that parses an object (unknown keys are errors naming their path), fills in the defaults and returns
// the complete, typed object the code uses (Infer). docs/CONFIG.md is generated from the declarations.
import { UnitError } from '../model/units.js';
import { describe, Expected, type Kind, type ParseContext } from './kinds.js';

/** Where a value came from, for error messages. */
export type Source = { file: string } | { env: string } | { flag: string };

/** A value that cannot be used: `path` names the key ("scheduler.idle_timeout"), `problem` what is wrong. */
export class ConfigError extends Error {
  constructor(
    readonly path: string,
    readonly problem: string,
    readonly source: Source | null = null,
  ) {
    super(ConfigError.text(path, problem, source));
  }

  private static text(path: string, problem: string, source: Source | null): string {
    const at = path === '' ? problem : `${path}: ${problem}`;
    if (source === null) return at;
    if ('file' in source) return `${source.file}: ${at}`;
    return `${path} (from ${'env' in source ? `$${source.env}` : source.flag}): ${problem}`;
  }

  /** The same error, said to come from `source` (kept if it already names one). */
  from(source: Source): ConfigError {
    return this.source === null ? new ConfigError(this.path, this.problem, source) : this;
  }
}

/** Joins a path and a key ("" + "a" = "a", "a" + "b" = "a.b"). */
export const at = (path: string, key: string): string => (path === '' ? key : `${path}.${key}`);

/** Parses `raw` with `kind`, turning what the kind refuses into a ConfigError at `path`. */
export function convert<T>(kind: Kind<T>, raw: unknown, path: string, ctx: ParseContext): T {
  try {
    return kind.parse(raw, path, ctx);
  } catch (err) {
    if (err instanceof UnitError) throw new ConfigError(path, err.message);
    if (err instanceof Expected) throw new ConfigError(path, `expected ${err.what}, got ${describe(raw)}`);
    throw err;
  }
}

/** The processes that read options (docs/CONFIG.md's "used by"). */
export type Process = 'server' | 'dispatch' | 'up' | 'agent' | 'cli' | 'plan' | 'sim';

/** One option. */
export interface Option<K extends string = string, F extends string = string, T = unknown> {
  /** Its name in files, snapshots and docs (snake_case). */
  readonly key: K;
  /** The field of the compiled object the code reads. */
  readonly field: F;
  readonly kind: Kind<T>;
  /**
   * The default as a user would write it ("60s"), parsed like any value; a function for a default that
   * depends on the machine; undefined when the option is required.
   */
  readonly default: unknown;
  /** The default as the docs show it, when `default` is a function or reads badly. */
  readonly defaultText?: string;
  readonly help: string;
  /** Environment variable (process options). */
  readonly env?: string;
  /** Flag, such as "--log-level" (process options). */
  readonly flag?: string;
  /** A program-wide flag, accepted by every command. */
  readonly global?: boolean;
  /** Not allowed in a config file (it locates the file). */
  readonly notInFile?: boolean;
  /** The processes that read it (section options inherit their section's). */
  readonly usedBy?: readonly Process[];
}

type OptionInput<K extends string, F extends string, T> = Omit<Option<K, F, T>, 'field' | 'default'> & {
  field?: F;
  default?: unknown;
};

/** Declares an option; `field` defaults to the key. */
export function opt<const K extends string, T>(
  o: OptionInput<K, K, T> & { field?: undefined },
): Option<K, K, T>;
export function opt<const K extends string, T, const F extends string>(
  o: OptionInput<K, F, T> & { field: F },
): Option<K, F, T>;
export function opt(o: OptionInput<string, string, unknown>): Option {
  return { ...o, field: o.field ?? o.key, default: o.default };
}

/**
 * An option declared elsewhere, read in another section: the same kind and help, under `key`/`field`,
 * with another default where this section's context wants one. Its environment variable and flag stay
 * with the original.
 */
export function reuse<
  O extends Option,
  const K extends string = O['key'],
  const F extends string = O['field'],
>(
  o: O,
  changes: { key?: K; field?: F; default?: unknown; defaultText?: string; help?: string } = {},
): Option<K, F, ValueOf<O>> {
  const changed = 'default' in changes;
  const defaultText = changed ? changes.defaultText : (changes.defaultText ?? o.defaultText);
  return {
    key: (changes.key ?? o.key) as K,
    field: (changes.field ?? o.field) as F,
    kind: o.kind as Kind<ValueOf<O>>,
    default: changed ? changes.default : o.default,
    help: changes.help ?? o.help,
    ...(defaultText === undefined ? {} : { defaultText }),
  };
}

type ValueOf<O> = O extends Option<string, string, infer T> ? T : never;

/** The compiled object of a section whose options are the union U. */
export type Infer<U extends Option> = { [O in U as O['field']]: ValueOf<O> };

/** A layer of raw values (later layers win): a file's object, the environment, flags. */
export interface Layer {
  values: Record<string, unknown>;
  /** Where its values came from: one file, or per option (its variable, its flag); none: errors say only the path. */
  source?: Source | ((o: Option) => Source);
  /** Values are text (environment, flags): each kind reads its own. */
  text?: boolean;
  /** A config file: options marked notInFile are refused. */
  file?: boolean;
}

/** An option's default, compiled; an error when it has none (a required key). */
function defaultValue(o: Option, path: string, ctx: ParseContext): unknown {
  if (o.default === undefined) throw new ConfigError(path, 'required field is missing');
  return convert(
    o.kind,
    typeof o.default === 'function' ? (o.default as () => unknown)() : o.default,
    path,
    ctx,
  );
}

/** Where a layer's value for `o` came from (a key no option declares: the layer's file, if any). */
function sourceOf(layer: Layer, o: Option | undefined): Source | null {
  const s = layer.source;
  if (s === undefined) return null;
  if (typeof s !== 'function') return s;
  return o === undefined ? null : s(o);
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A set of options read from one object; itself a kind, so sections nest. */
export class Section<U extends Option> implements Kind<Infer<U>> {
  readonly type = 'object';
  readonly placeholder = '<json>';
  private readonly byKey: Map<string, U>;
  /** Keys refused with a reason (declared elsewhere). */
  private readonly refused: Map<string, string>;

  constructor(
    readonly options: readonly U[],
    private readonly extra: {
      /** Checks across fields, after every field was read; throws ConfigError. */
      check?: (v: Infer<U>, path: string) => void;
      refused?: Map<string, string>;
      /** Where the docs list its keys, when not under the option that holds it ("the scheduler keys"). */
      documentedAs?: string;
    } = {},
  ) {
    this.byKey = new Map(options.map((o) => [o.key, o]));
    this.refused = extra.refused ?? new Map();
  }

  /** The option declared under `key`. */
  option<K extends U['key']>(key: K): Extract<U, { key: K }> {
    const o = this.byKey.get(key);
    if (o === undefined) throw new Error(`no option ${key}`);
    return o as Extract<U, { key: K }>;
  }

  /** The same section without `keys`; a value for one of them is refused with `why`. */
  without<K extends U['key']>(keys: readonly K[], why: string): Section<Exclude<U, { key: K }>> {
    const refused = new Map(this.refused);
    for (const k of keys) refused.set(k, why);
    const kept = this.options.filter((o) => !(keys as readonly string[]).includes(o.key));
    return new Section<Exclude<U, { key: K }>>(kept as never, { ...this.extra, refused } as never);
  }

  /** Where the docs list its keys (set with documentedAs), if elsewhere. */
  get documentedAs(): string | undefined {
    return this.extra.documentedAs;
  }

  /** The same section, listed in the docs under its own heading `name`. */
  documented(name: string): Section<U> {
    return new Section(this.options, { ...this.extra, documentedAs: name });
  }

  /** This section's fields of a compiled object that holds them (and more). */
  fieldsOf(v: Infer<U>): Infer<U> {
    return Object.fromEntries(
      this.options.map((o) => [o.field, (v as Record<string, unknown>)[o.field]]),
    ) as Infer<U>;
  }

  /** Parses one object (absent keys take their defaults); the caller adds the source to errors. */
  parse(raw: unknown, path = '', ctx: ParseContext = { baseDir: process.cwd() }): Infer<U> {
    if (!isObject(raw)) throw new ConfigError(path, `expected an object, got ${describe(raw)}`);
    return this.compile([{ values: raw }], path, ctx);
  }

  /** One option's default, compiled. */
  defaultOf<K extends U['key']>(
    key: K,
    ctx: ParseContext = { baseDir: process.cwd() },
  ): ValueOf<Extract<U, { key: K }>> {
    return defaultValue(this.option(key), key, ctx) as ValueOf<Extract<U, { key: K }>>;
  }

  /** Every option at its default. */
  defaults(ctx: ParseContext = { baseDir: process.cwd() }): Infer<U> {
    return this.compile([], '', ctx);
  }

  /** Merges layers over the defaults (later wins) and validates; errors name the path and the source. */
  compile(layers: readonly Layer[], path = '', ctx: ParseContext = { baseDir: process.cwd() }): Infer<U> {
    const chosen = new Map<string, { raw: unknown; layer: Layer }>();
    for (const layer of layers) {
      for (const [key, raw] of Object.entries(layer.values)) {
        if (raw === undefined) continue;
        const o = this.byKey.get(key);
        const fail = (problem: string) => new ConfigError(at(path, key), problem, sourceOf(layer, o));
        if (o === undefined) throw fail(this.refused.get(key) ?? 'unknown field');
        if (layer.file && o.notInFile) throw fail('not allowed in a config file');
        chosen.set(key, { raw: layer.text && o.kind.fromText ? o.kind.fromText(raw as string) : raw, layer });
      }
    }
    const out: Record<string, unknown> = {};
    for (const o of this.options) {
      const p = at(path, o.key);
      const c = chosen.get(o.key);
      if (c === undefined) {
        if (o.default === undefined && o.kind.optional) {
          out[o.field] = undefined;
          continue;
        }
        out[o.field] = defaultValue(o, p, ctx);
        continue;
      }
      try {
        out[o.field] = convert(o.kind, c.raw, p, ctx);
      } catch (err) {
        const source = sourceOf(c.layer, o);
        if (err instanceof ConfigError && source) throw err.from(source);
        throw err;
      }
    }
    this.extra.check?.(out as Infer<U>, path);
    return out as Infer<U>;
  }
}

/** Declares a section. */
export function section<const U extends Option>(
  options: readonly U[],
  check?: (v: Infer<U>, path: string) => void,
): Section<U> {
  return new Section(options, check ? { check } : {});
}

/** An object of any keys whose values are all of one kind ("type name → count"). */
export function mapOf<T>(kind: Kind<T>): Kind<Record<string, T>> {
  return {
    type: `object of ${kind.type}`,
    placeholder: '<json>',
    parse(v, path, ctx) {
      if (!isObject(v)) throw new Expected('an object');
      const out: Record<string, T> = {};
      for (const [k, x] of Object.entries(v)) out[k] = convert(kind, x, at(path, k), ctx);
      return out;
    },
  };
}

/** An array whose items are all of one kind. */
export function listOf<T>(kind: Kind<T>, what = `an array of ${kind.type}`): Kind<T[]> {
  return {
    type: `array of ${kind.type}`,
    placeholder: '<json>',
    items: kind,
    parse(v, path, ctx) {
      if (!Array.isArray(v)) throw new Expected(what);
      return v.map((x, i) => convert(kind, x, `${path}[${i}]`, ctx));
    },
  };
}

/** An object whose `tag` field picks the section that reads the rest: {"kind": "fixed", "time": "90s"}. */
export function variant<const Tag extends string, const V extends Record<string, Section<Option>>>(
  tag: Tag,
  variants: V,
): Kind<{ [N in keyof V]: { [T in Tag]: N } & (V[N] extends Kind<infer X> ? X : never) }[keyof V]> {
  const names = Object.keys(variants);
  const list = `${names.slice(0, -1).join(', ')} or ${names.at(-1)}`;
  return {
    type: names
      .map((n) => `{${[`${tag}: ${n}`, ...variants[n]!.options.map((o) => o.key)].join(', ')}}`)
      .join(' | '),
    placeholder: '<json>',
    parse(v, path, ctx) {
      if (!isObject(v)) throw new Expected('an object');
      const name = v[tag];
      const s = typeof name === 'string' && Object.hasOwn(variants, name) ? variants[name] : undefined;
      if (s === undefined) throw new ConfigError(at(path, tag), `expected ${list}, got ${describe(name)}`);
      const rest = { ...v };
      delete rest[tag];
      return { [tag]: name, ...s.parse(rest, path, ctx) } as never;
    },
  };
}
