// Following a container's log as Server-Sent Events: every chunk after `after`, woken by the store's
// notifications (or a short poll), until the container has ended and every chunk has been sent. Shared by
// the API (`GET /v1/containers/:id/logs?follow=true`) and the dashboard's live log tail.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isFinalContainerState } from '../model/types.js';
import type { ApiDeps } from './server.js';

/** How often a follower looks for new chunks when no notification arrives. */
const FOLLOW_POLL_MS = 250;

/** Writes `event: log` for each chunk, then `event: end`; returns when done or when `gone()` says so. */
export async function followLog(
  deps: Pick<ApiDeps, 'store' | 'waiter' | 'closing'>,
  containerId: string,
  after: number,
  write: (event: string, data: unknown, id?: number) => void,
  gone: () => boolean,
): Promise<void> {
  const { store } = deps;
  const wake = deps.waiter('berth_logs', containerId);
  try {
    while (!gone() && !deps.closing()) {
      // Read the state before the chunks: if it was final before we read, we have every chunk.
      const final = isFinalContainerState((await store.containers.get(containerId)).state);
      const chunks = await store.logs.read(containerId, after, 1000);
      for (const ch of chunks) {
        write('log', ch, ch.seq);
        after = ch.seq;
      }
      if (chunks.length === 1000) continue;
      if (final) {
        const c = await store.containers.get(containerId);
        write('end', { state: c.state, exit_code: c.exit_code });
        break;
      }
      await wake.next(FOLLOW_POLL_MS);
    }
  } finally {
    wake.close();
  }
}

/** A Server-Sent Events response: the reply is taken over from fastify and written event by event. */
export interface Sse {
  send(event: string, data: unknown, id?: number): void;
  /** A comment line: keeps proxies from closing a quiet stream. */
  comment(text: string): void;
  /** The client went away. */
  closed(): boolean;
  end(): void;
}

export function openSse(req: FastifyRequest, reply: FastifyReply, headers: Record<string, string> = {}): Sse {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    ...headers,
  });
  let closed = false;
  req.raw.on('close', () => (closed = true));
  return {
    send: (event, data, id) =>
      void res.write(
        `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`,
      ),
    comment: (text) => void res.write(`: ${text}\n\n`),
    closed: () => closed,
    end: () => res.end(),
  };
}
