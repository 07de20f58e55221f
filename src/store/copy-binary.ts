// PostgreSQL's binary COPY format (https://www.postgresql.org/docs/current/sql-copy.html, "Binary Format"),
// the little of it that moving bytea in bulk needs: node-postgres sends a bytea parameter raw but reads a
// bytea result as hex text (twice the bytes, decoded in JS; its binary result mode turns every field into
// a string), so checkpoints (src/store/checkpoints.ts) go in and out by COPY … (FORMAT binary) through
// pg-copy-streams instead: measured (bench/checkpoint.ts) 5–8× faster out and 2× in than SELECT/INSERT.

/** The file header: signature, flags (no OIDs), no header extension. */
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
export const COPY_HEADER = Buffer.concat([SIGNATURE, Buffer.alloc(8)]);
/** The file trailer: a field count of -1. */
export const COPY_TRAILER = Buffer.from([0xff, 0xff]);

/** One tuple's fields, for a COPY … FROM STDIN (FORMAT binary). */
export type CopyField = { text: string } | { int4: number } | { bytea: Buffer };

/** The tuple's bytes: its field count, then each field's length and bytes (a bytea field not copied). */
export function copyTuple(fields: CopyField[]): Buffer[] {
  const out: Buffer[] = [];
  let head = Buffer.alloc(2);
  head.writeInt16BE(fields.length);
  for (const f of fields) {
    const data = 'text' in f ? Buffer.from(f.text, 'utf8') : 'int4' in f ? int4(f.int4) : f.bytea;
    const len = Buffer.alloc(4);
    len.writeInt32BE(data.length);
    if ('bytea' in f) {
      out.push(Buffer.concat([head, len]), data);
      head = Buffer.alloc(0);
    } else head = Buffer.concat([head, len, data]);
  }
  if (head.length > 0) out.push(head);
  return out;
}

function int4(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
}

/**
 * The bytes of the single, non-null column of a COPY … TO STDOUT (FORMAT binary), tuple after tuple, as
 * they arrive (slices of the input: nothing is gathered whole). Throws on a stream that is not that
 * format or ends before its trailer.
 */
export async function* copyColumnBytes(src: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  let rest: Buffer = Buffer.alloc(0);
  let headerDone = false;
  let ended = false;
  let left = 0; // bytes of the current field still to come
  for await (const piece of src) {
    const b = rest.length > 0 ? Buffer.concat([rest, piece]) : piece;
    let off = 0;
    while (!ended) {
      if (left > 0) {
        const n = Math.min(left, b.length - off);
        if (n === 0) break;
        yield b.subarray(off, off + n);
        off += n;
        left -= n;
        continue;
      }
      if (!headerDone) {
        if (b.length - off < COPY_HEADER.length) break;
        if (!b.subarray(off, off + SIGNATURE.length).equals(SIGNATURE))
          throw new Error('COPY binary: no PGCOPY signature');
        const ext = b.readUInt32BE(off + 15);
        if (b.length - off < COPY_HEADER.length + ext) break;
        off += COPY_HEADER.length + ext;
        headerDone = true;
        continue;
      }
      if (b.length - off < 2) break;
      const fields = b.readInt16BE(off);
      if (fields === -1) {
        off += 2;
        ended = true;
        break;
      }
      if (fields !== 1) throw new Error(`COPY binary: expected 1 field a tuple, got ${fields}`);
      if (b.length - off < 6) break;
      left = b.readInt32BE(off + 2);
      if (left < 0) throw new Error('COPY binary: a null field');
      off += 6;
    }
    rest = b.subarray(off);
  }
  if (!ended) throw new Error('COPY binary: the data ended before its trailer');
}
