// Cursor pagination: lists are ordered by id (time-sortable), newest first; the cursor is the last id seen.
import { ValidationError } from '../model/request.js';

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
