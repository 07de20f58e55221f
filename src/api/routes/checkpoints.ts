// Containers' own checkpoints (issue 16; src/store/checkpoints.ts): the agent of a Running container
// uploads the tar archive of its $BERTH_CHECKPOINT_DIR, and the agent of the request's next attempt, on any
// instance, downloads it. Both are node calls that also carry the container's per-lock token (header
// `x-berth-lock-token`), as every agent call about a container does. Users see only that a checkpoint
// exists (the container's `checkpoint` field: size and time).
import { Type } from '@sinclair/typebox';
import { who } from '../auth.js';
import { HttpError } from '../errors.js';
import { ContainerParams } from '../schemas.js';
import type { Api, ApiDeps } from '../server.js';
import { Readable } from 'node:stream';
import {
  CHECKPOINT_TYPE,
  LOCK_TOKEN_HEADER,
  notTarHead,
  notTarLength,
  RUNTIME_NAME_PATTERN,
  WHOLE_STATE_HEADER,
} from '../../model/checkpoint.js';

const CheckpointQuery = Type.Object(
  {
    reclaimed: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])),
    /** The runtime that saved the container whole; absent: the container wrote the checkpoint itself. */
    whole: Type.Optional(Type.String({ pattern: RUNTIME_NAME_PATTERN })),
  },
  { additionalProperties: false },
);

function caller(req: { headers: Record<string, unknown>; params: { id: string } }, nodeId: string | null) {
  if (nodeId === null) throw new HttpError(403, 'forbidden', 'this token is not bound to a node');
  const token = req.headers[LOCK_TOKEN_HEADER];
  if (typeof token !== 'string' || token === '')
    throw new HttpError(400, 'invalid', `the ${LOCK_TOKEN_HEADER} header is required`, [
      { field: LOCK_TOKEN_HEADER, problem: "is required: the container's lock token" },
    ]);
  return { id: req.params.id, node: nodeId, token };
}

const invalidBody = (problem: string) =>
  new HttpError(400, 'invalid', `body: ${problem}`, [{ field: 'body', problem }]);
const tooLarge = (limit: number) =>
  new HttpError(413, 'too_large', `body: a checkpoint is at most ${limit} bytes (checkpoint_limit)`, [
    { field: 'body', problem: `is over the checkpoint limit of ${limit} bytes (checkpoint_limit)` },
  ]);

/**
 * The checkpoint body's bytes as they arrive, refused (thrown, so that the store's transaction rolls back)
 * past `limit` bytes or when it is not a tar archive: its first header is checked as soon as it is in,
 * its length at the end.
 */
async function* tarBody(
  body: AsyncIterable<Buffer>,
  limit: number,
  declared: number | null,
): AsyncGenerator<Buffer> {
  let bytes = 0;
  let head: Buffer | null = Buffer.alloc(0);
  for await (const piece of body) {
    bytes += piece.length;
    if (bytes > limit) throw tooLarge(limit);
    if (head === null) {
      yield piece;
      continue;
    }
    head = Buffer.concat([head, piece]);
    if (head.length < 512) continue;
    const bad = notTarHead(head);
    if (bad) throw invalidBody(bad);
    yield head;
    head = null;
  }
  if (declared !== null && bytes !== declared)
    throw invalidBody(`ended after ${bytes} of the ${declared} bytes its content-length declared`);
  const bad = notTarLength(bytes);
  if (bad) throw invalidBody(bad);
}

export function checkpointRoutes(app: Api, deps: ApiDeps, limitBytes: number): void {
  const { store } = deps;
  // Tar bodies are not read here: the handler streams them into the store as they arrive (tarBody checks
  // the limit and the format on the way), never holding a whole archive.
  app.addContentTypeParser(CHECKPOINT_TYPE, (_req, payload, done) => done(null, payload));

  app.put(
    '/v1/containers/:id/checkpoint',
    {
      schema: {
        params: ContainerParams,
        querystring: CheckpointQuery,
        tags: ['agent'],
        summary: `Keep the container's checkpoint (a ${CHECKPOINT_TYPE} body) for its request's next attempt`,
      },
      config: { scopes: ['node'] },
      bodyLimit: limitBytes,
    },
    async (req) => {
      const c = caller(req, who(req).nodeId);
      const type = String(req.headers['content-type'] ?? '')
        .split(';')[0]!
        .trim();
      if (type !== CHECKPOINT_TYPE || !(req.body instanceof Readable))
        throw new HttpError(415, 'unsupported_media_type', `content-type: expected ${CHECKPOINT_TYPE}`, [
          { field: 'content-type', problem: `expected ${CHECKPOINT_TYPE}, got ${type || 'none'}` },
        ]);
      // A declared length is judged before anything is read or stored; a chunked body as it arrives.
      const header = req.headers['content-length'];
      const declared = header === undefined ? null : Number(header);
      if (declared !== null) {
        if (declared > limitBytes) throw tooLarge(limitBytes);
        const bad = notTarLength(declared);
        if (bad) throw invalidBody(bad);
      }
      const body = tarBody(req.body, limitBytes, declared);
      const info = await store.checkpoints.put(
        c,
        body,
        req.query.reclaimed === 'true',
        req.query.whole ?? null,
      );
      return { bytes: info.bytes, at: info.at };
    },
  );

  app.get(
    '/v1/containers/:id/checkpoint',
    {
      schema: {
        params: ContainerParams,
        querystring: Type.Object({}, { additionalProperties: false }),
        tags: ['agent'],
        summary: "The checkpoint of the container's request (a tar archive), or 204 when there is none",
      },
      config: { scopes: ['node'] },
    },
    async (req, reply) => {
      const kept = await store.checkpoints.take(caller(req, who(req).nodeId));
      if (kept === null) return reply.code(204).send();
      // Chunk by chunk from the store's transaction to the socket (a closed socket ends the transaction).
      if (kept.wholeState !== null) reply.header(WHOLE_STATE_HEADER, kept.wholeState);
      return reply
        .type(CHECKPOINT_TYPE)
        .header('content-length', kept.bytes)
        .send(Readable.from(kept.chunks, { objectMode: false }));
    },
  );
}
