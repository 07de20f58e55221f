// /openapi.json, generated from the same route schemas that validate requests.
import type { FastifyInstance, RouteOptions } from 'fastify';

interface Op {
  method: string;
  url: string;
  schema: Record<string, unknown>;
  scopes?: readonly string[];
}

/** Records every route as it is added, so the document can be built once they all are. */
export function collectRoutes(app: FastifyInstance): Op[] {
  const ops: Op[] = [];
  app.addHook('onRoute', (r: RouteOptions) => {
    const methods = Array.isArray(r.method) ? r.method : [r.method];
    if ((r.config as { page?: boolean } | undefined)?.page) return;
    for (const m of methods) {
      if (m === 'HEAD') continue;
      ops.push({
        method: m.toLowerCase(),
        url: r.url,
        schema: (r.schema ?? {}) as Record<string, unknown>,
        scopes: (r.config as { scopes?: string[] })?.scopes,
      });
    }
  });
  return ops;
}

function parameters(where: 'path' | 'query', schema: unknown): unknown[] {
  const props = (schema as { properties?: Record<string, unknown>; required?: string[] })?.properties ?? {};
  const required = new Set((schema as { required?: string[] })?.required ?? []);
  return Object.entries(props).map(([name, s]) => ({
    name,
    in: where,
    required: where === 'path' || required.has(name),
    schema: s,
  }));
}

export function openApiDocument(ops: Op[], version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const errorRef = { $ref: '#/components/schemas/Error' };
  for (const op of [...ops].sort((a, b) => a.url.localeCompare(b.url) || a.method.localeCompare(b.method))) {
    const url = op.url.replace(/:([A-Za-z_]+)/g, '{$1}');
    const s = op.schema;
    const entry: Record<string, unknown> = {
      summary: s.summary,
      tags: s.tags,
      parameters: [...parameters('path', s.params), ...parameters('query', s.querystring)],
      responses: {
        '200': { description: 'OK' },
        '400': { description: 'Invalid input', content: { 'application/json': { schema: errorRef } } },
        ...(op.scopes
          ? { '401': { description: 'Missing or unknown token' }, '403': { description: 'Wrong scope' } }
          : {}),
      },
    };
    if (s.body) entry.requestBody = { required: true, content: { 'application/json': { schema: s.body } } };
    if (op.scopes) {
      entry.security = [{ bearer: [] }];
      entry['x-scopes'] = op.scopes;
    }
    (paths[url] ??= {})[op.method] = entry;
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Berth API', version },
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        Error: {
          type: 'object',
          properties: {
            error: {
              type: 'object',
              properties: {
                code: { type: 'string' },
                message: { type: 'string' },
                details: {
                  type: 'array',
                  items: {
                    type: 'object',
                    properties: { field: { type: 'string' }, problem: { type: 'string' } },
                  },
                },
              },
            },
          },
        },
      },
    },
  };
}

declare module 'fastify' {
  interface FastifySchema {
    /** OpenAPI grouping and one-line description of the route. */
    tags?: string[];
    summary?: string;
  }
}
