// Cursor pagination: lists are ordered by id (time-sortable), newest first; the cursor is the last id seen.
import { ValidationError } from '../model/request.js';
import type { Queryable } from './db.js';
import type { Where } from './where.js';

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export function encodeCursor(lastId: string): string {
  return Buffer.from(lastId, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): string {
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[a-z]-[0-9a-z]{16}$/.test(id))
    throw new ValidationError([{ field: 'cursor', problem: 'expected a cursor from a previous page' }]);
  return id;
}

/** One page of `SELECT columns FROM table WHERE …`, newest first, with the cursor of the next page. */
export async function listPage<T extends { id: string }>(
  db: Queryable,
  table: string,
  columns: string,
  where: Where,
  cursor: string | undefined,
  limit = 100,
): Promise<Page<T>> {
  if (cursor !== undefined) where.add('id < ?', decodeCursor(cursor));
  const r = await db.query(
    `SELECT ${columns} FROM ${table} ${where} ORDER BY id DESC LIMIT ${where.param(limit + 1)}`,
    where.args,
  );
  const items = r.rows.slice(0, limit) as T[];
  return { items, next_cursor: r.rows.length > limit ? encodeCursor(items[items.length - 1]!.id) : null };
}
