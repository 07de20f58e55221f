// The byte-counting stream (src/lib/counting.ts): the agent's checkpoint upload (with its limit) and
// download count through it.
import { describe, expect, it } from 'vitest';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { counting, OverLimitError } from '../../src/lib/counting.js';

/** Pipes `pieces` through `through` into a sink; what reached the sink and how it ended. */
async function run(pieces: Buffer[], through: ReturnType<typeof counting>) {
  const got: Buffer[] = [];
  const sink = new Writable({
    write(b: Buffer, _enc, done) {
      got.push(b);
      done();
    },
  });
  const ended = await pipeline(Readable.from(pieces), through, sink).then(
    () => null,
    (err: Error) => err,
  );
  return { got: Buffer.concat(got), ended };
}

describe('counting', () => {
  it('passes every byte on unchanged and counts them', async () => {
    const c = counting();
    const pieces = [Buffer.from('abc'), Buffer.alloc(5000, 7), Buffer.from('z')];
    const { got, ended } = await run(pieces, c);
    expect(ended).toBeNull();
    expect(got.equals(Buffer.concat(pieces))).toBe(true);
    expect(c.bytes).toBe(5004);
  });

  it('with a limit, fails on the piece that passes it, without passing that piece on', async () => {
    const c = counting(10);
    const { got, ended } = await run([Buffer.from('12345'), Buffer.from('67890'), Buffer.from('x')], c);
    expect(got.toString()).toBe('1234567890'); // exactly at the limit is within it
    expect(ended).toBeInstanceOf(OverLimitError);
    expect(ended).toMatchObject({ bytes: 11, limit: 10 });
    expect(c.bytes).toBe(11);
  });
});
