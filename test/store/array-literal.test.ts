// arrayLiteral (src/store/db.ts): a batch's column as PostgreSQL's array text literal, read back through a
// real PostgreSQL equal to what went in, for the element types a submission passes.
import { beforeAll, describe, expect, it } from 'vitest';
import { arrayLiteral, type Db } from '../../src/store/db.js';
import { testDb } from '../helpers/db.js';

let pool: Db;

beforeAll(async () => {
  ({ pool } = await testDb());
});

const back = async (literal: string, type: string): Promise<unknown> =>
  (await pool.query(`SELECT $1::${type} AS v`, [literal])).rows[0].v;

describe('arrayLiteral', () => {
  it('text: quotes, backslashes, separators, braces, spaces, NULL as a word, empty, unicode, and null', async () => {
    const values = [
      'plain',
      'with "quotes"',
      'back\\slash \\" both',
      'a,b',
      '{x,y}',
      ' padded ',
      'NULL',
      'null',
      '',
      'é ü 😀',
      'tab\tnew\nline',
      '"',
      '\\',
      null,
      '["sh","-c","echo \\"x\\""]',
    ];
    expect(await back(arrayLiteral(values), 'text[]')).toEqual(values);
  });

  it('numbers (integers, fractions, negatives, large) and booleans', async () => {
    const floats = [0, 1, -2.5, 0.25, 1e-7, 123456789.125, 2 ** 53, null];
    expect(await back(arrayLiteral(floats), 'float8[]')).toEqual(floats);
    const ints = [0, -1, 3 * 1024 ** 3, 2 ** 52, null];
    expect(await back(arrayLiteral(ints), 'int8[]')).toEqual(
      ints.map((v) => (v === null ? null : String(v))),
    );
    const bools = [true, false, null];
    expect(await back(arrayLiteral(bools), 'bool[]')).toEqual(bools);
  });

  it('an empty array, and a list whose literal is itself an element (text[] of text[] literals)', async () => {
    expect(await back(arrayLiteral([]), 'text[]')).toEqual([]);
    const inner = arrayLiteral(['m5.large', 'odd "type", {x}']);
    const outer = arrayLiteral([inner, null]);
    const r = await pool.query(`SELECT (($1::text[])[1])::text[] AS v, ($1::text[])[2] AS n`, [outer]);
    expect(r.rows[0]).toEqual({ v: ['m5.large', 'odd "type", {x}'], n: null });
  });
});
