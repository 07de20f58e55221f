// Labels of requests read for their containers: an instance created for several containers is tagged with
// the labels they all agree on (src/model/labels.ts).
import { agreedLabels, type Labels } from '../model/labels.js';
import type { Queryable } from './db.js';

/** The labels every one of these containers' requests carries with the same value. */
export async function agreedLabelsOf(db: Queryable, containers: string[]): Promise<Labels> {
  if (containers.length === 0) return {};
  const r = await db.query<{ labels: Labels }>(
    `SELECT r.labels FROM containers c JOIN container_requests r ON r.id = c.request_id WHERE c.id = ANY($1)`,
    [containers],
  );
  // A container that no longer exists has no say; none found at all: no labels.
  return agreedLabels(r.rows.map((row) => row.labels));
}
