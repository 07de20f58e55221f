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
import { CHECKPOINT_TYPE, LOCK_TOKEN_HEADER, notTar } from '../../model/checkpoint.js';

const CheckpointQuery = Type.Object(
  { reclaimed: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])) },
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

export function checkpointRoutes(app: Api, deps: ApiDeps, limitBytes: number): void {
  const { store } = deps;
  // Tar bodies arrive as one Buffer, up to the checkpoint limit (the agent does not send larger ones).
  app.addContentTypeParser(
    CHECKPOINT_TYPE,
    { parseAs: 'buffer', bodyLimit: limitBytes },
    (_req, body, done) => done(null, body),
  );

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
      if (type !== CHECKPOINT_TYPE || !Buffer.isBuffer(req.body))
        throw new HttpError(415, 'unsupported_media_type', `content-type: expected ${CHECKPOINT_TYPE}`, [
          { field: 'content-type', problem: `expected ${CHECKPOINT_TYPE}, got ${type || 'none'}` },
        ]);
      const bad = notTar(req.body);
      if (bad) throw new HttpError(400, 'invalid', `body: ${bad}`, [{ field: 'body', problem: bad }]);
      const info = await store.checkpoints.put(c, req.body, req.query.reclaimed === 'true');
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
      const data = await store.checkpoints.take(caller(req, who(req).nodeId));
      if (data === null) return reply.code(204).send();
      return reply.type(CHECKPOINT_TYPE).send(data);
    },
  );
}
