// The wire format is declared once (src/api/schemas.ts, src/cloud/boot-data.ts) and both sides use it:
// what the agent's client sends is what the API's schemas accept (checked at compile time by the types
// and here at run time), and boot data written by the dispatcher reads back, or fails naming the field.
import { Value } from '@sinclair/typebox/value';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { CompleteBody, PingBody } from '../../src/agent/client.js';
import {
  CompleteBody as CompleteSchema,
  LogAppendBody,
  PingBody as PingSchema,
  type CompleteBodyT,
  type PingBodyT,
  type UsageSample,
} from '../../src/api/schemas.js';
import { BootDataError, bootDataFor, parseBootData } from '../../src/cloud/boot-data.js';
import type { UsageSample as StoreUsageSample } from '../../src/store/containers.js';

describe('one wire format for the API and the agent', () => {
  it("the agent's bodies are the schemas' types", () => {
    expectTypeOf<PingBody>().toMatchTypeOf<PingBodyT>();
    expectTypeOf<CompleteBody & { lock_token: string }>().toMatchTypeOf<CompleteBodyT>();
    expectTypeOf<StoreUsageSample>().toEqualTypeOf<UsageSample>();
  });

  it('bodies the agent sends validate against the schemas the API checks', () => {
    const ping: PingBody = {
      state: 'busy',
      running: ['c-0123456789abcdef'],
      wait_ms: 10_000,
      usage: { 'c-0123456789abcdef': { cpu_seconds: 1.5, ram: 1024, peak_ram: 2048 } },
    };
    expect([...Value.Errors(PingSchema, ping)]).toEqual([]);
    const done: CompleteBody = {
      exit_code: 0,
      oom_killed: false,
      usage: { peak_ram: 1, cpu_seconds: 0.25, wall_ms: 12, scratch_peak: 0 },
    };
    expect([...Value.Errors(CompleteSchema, { lock_token: '3.abc_-', ...done })]).toEqual([]);
    expect(
      Value.Check(LogAppendBody, {
        lock_token: '3.abc',
        chunks: [{ seq: 0, stream: 'stdout', data: 'hi\n' }],
      }),
    ).toBe(true);
    // and what PostgreSQL cannot hold is not accepted
    expect(
      Value.Check(LogAppendBody, {
        lock_token: '3.abc',
        chunks: [{ seq: 0, stream: 'stdout', data: 'a\u0000' }],
      }),
    ).toBe(false);
  });
});

describe('boot data', () => {
  const boot = bootDataFor('http://10.0.0.1:8080');
  const text = boot({ nodeId: 'n-1', bootstrapSecret: 'bs_x', instanceType: { name: 'small' } });

  it('reads back what the dispatcher writes', () => {
    expect(parseBootData(text)).toEqual({
      api_url: 'http://10.0.0.1:8080',
      node_id: 'n-1',
      bootstrap_secret: 'bs_x',
      instance_type: 'small',
    });
  });

  it('fails naming the field that is missing or wrong, or the whole when it is not JSON', () => {
    const fail = (t: string) => {
      try {
        parseBootData(t);
      } catch (err) {
        expect(err).toBeInstanceOf(BootDataError);
        return (err as BootDataError).field;
      }
      throw new Error(`accepted ${t}`);
    };
    const d = JSON.parse(text) as Record<string, unknown>;
    expect(fail(JSON.stringify({ ...d, node_id: undefined }))).toBe('node_id');
    expect(fail(JSON.stringify({ ...d, bootstrap_secret: '' }))).toBe('bootstrap_secret');
    expect(fail(JSON.stringify({ ...d, extra: 1 }))).toBe('extra');
    expect(fail('{not json')).toBe('(all)');
  });
});
