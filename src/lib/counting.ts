// One owner for counting the bytes of a stream on its way (the agent's checkpoint upload, which also
// enforces its size limit, and its download).
import { Transform } from 'node:stream';

/** The bytes passed their limit: the counting stream failed with this (after `bytes` bytes). */
export class OverLimitError extends Error {
  override name = 'OverLimitError';
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`passed its limit of ${limit} bytes after ${bytes} bytes`);
  }
}

/** A pass-through stream that counts the bytes through it (`bytes`). */
export type Counting = Transform & { readonly bytes: number };

/**
 * A pass-through stream counting its bytes; with `limit`, the chunk that takes it past the limit is not
 * passed on: the stream fails with OverLimitError.
 */
export function counting(limit = Infinity): Counting {
  let bytes = 0;
  const stream = new Transform({
    transform(b: Buffer, _enc, done) {
      bytes += b.length;
      if (bytes > limit) return done(new OverLimitError(bytes, limit));
      done(null, b);
    },
  });
  return Object.defineProperty(stream, 'bytes', { get: () => bytes }) as Counting;
}
