// The benches' one option parser (bench/args.ts): defaults, values, and a refusal that names the option
// and what it expected for anything else; --help is the usage, with exit code 0.
import { describe, expect, it } from 'vitest';
import { benchArgs, opt, UsageError } from '../../bench/args.js';

const SPEC = {
  json: opt.flag('print JSON'),
  runs: opt.int(30, 'runs'),
  queued: opt.int(100, 'queued', 0),
  limit: opt.int(undefined, 'first N'),
  share: opt.number(0.5, 'a share'),
  concurrency: opt.ints('1,10,50', 'in flight'),
  latency: opt.durations('50ms,1s', 'latency'),
  runtime: opt.oneOf(['process', 'runc'] as const, 'process', 'runtime'),
  runtimes: opt.someOf(['docker', 'runc', 'process'] as const, ['runc', 'process'], 'runtimes'),
  trace: opt.repeated('a trace'),
  'sync-interval': opt.text('10s', 'sync'),
};

const refused = (argv: string[]): UsageError => {
  try {
    benchArgs('b', argv, SPEC);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return err as UsageError;
  }
  throw new Error(`${argv.join(' ')} was accepted`);
};

describe('bench options', () => {
  it('defaults when absent; the values given otherwise', () => {
    expect(benchArgs('b', [], SPEC)).toEqual({
      json: false,
      runs: 30,
      queued: 100,
      limit: undefined,
      share: 0.5,
      concurrency: [1, 10, 50],
      latency: [50, 1000],
      runtime: 'process',
      runtimes: ['runc', 'process'],
      trace: [],
      'sync-interval': '10s',
    });
    expect(
      benchArgs(
        'b',
        ['--json', '--runs', '3', '--queued=0', '--limit', '7', '--share', '0.25', '--concurrency', '2,4'],
        SPEC,
      ),
    ).toMatchObject({ json: true, runs: 3, queued: 0, limit: 7, share: 0.25, concurrency: [2, 4] });
    expect(
      benchArgs(
        'b',
        ['--latency', '0ms,2s', '--runtime', 'runc', '--runtimes', 'docker', '--trace', 'a', '--trace', 'b'],
        SPEC,
      ),
    ).toMatchObject({ latency: [0, 2000], runtime: 'runc', runtimes: ['docker'], trace: ['a', 'b'] });
  });

  it('refuses a wrong value naming the option and what it expected', () => {
    const cases: [string[], string][] = [
      [['--runs', '0'], '--runs: expected a whole number ≥ 1, got "0"'],
      [['--runs', '2.5'], '--runs: expected a whole number ≥ 1, got "2.5"'],
      [['--runs', 'x'], '--runs: expected a whole number ≥ 1, got "x"'],
      [['--queued=-1'], '--queued: expected a whole number ≥ 0, got "-1"'],
      [['--share', '0'], '--share: expected a number > 0, got "0"'],
      [['--concurrency', '1,,3'], '--concurrency: expected whole numbers ≥ 1, comma-separated, got "1,,3"'],
      [['--latency', 'soon'], '--latency: expected durations such as 50ms,1s, got "soon"'],
      [['--runtime', 'docker'], '--runtime: expected one of process, runc, got "docker"'],
      [['--runtimes', 'runc,vm'], '--runtimes: expected a list of docker, runc, process, got "vm"'],
    ];
    for (const [argv, message] of cases) {
      const e = refused(argv);
      expect(e.exitCode, argv.join(' ')).toBe(2);
      expect(e.message).toBe(message);
    }
  });

  it('refuses an unknown option or a missing value naming it, with the usage', () => {
    const unknown = refused(['--rusn', '3']);
    expect(unknown.message).toMatch(/--rusn/);
    expect(unknown.message).toContain('usage: npm run bench -- b [options]');
    expect(refused(['--runs']).message).toMatch(/--runs/);
    expect(refused(['extra']).message).toMatch(/extra/);
  });

  it('--help is the usage: every option with what it takes and its default, exit code 0', () => {
    const help = refused(['--help']);
    expect(help.exitCode).toBe(0);
    expect(help.message).toContain('--runs N');
    expect(help.message).toContain('(default 30)');
    expect(help.message).toMatch(/--runtime process\|runc +runtime \(default process\)/);
    expect(help.message).toMatch(/--trace S +a trace \(may be repeated\)/);
    expect(help.message.split('\n')).toHaveLength(1 + Object.keys(SPEC).length + 1);
  });
});
