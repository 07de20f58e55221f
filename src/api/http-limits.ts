// Requests refused before any route sees them: a URL that is too long (414) or not valid percent-encoding
// (400), headers past Node's limit (431), and HTTP that does not parse (400). Each answer is in the one
// error shape (errors.ts), which fastify's and Node's built-in answers are not.
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { errorBody, handleError, HttpError } from './errors.js';

/** The longest URL served; a request line past Node's header limit (16 KiB) is answered 431 by Node. */
export const MAX_URL_LENGTH = 8192;

/** The longest path parameter (ids are at most 128 characters). */
export const MAX_PARAM_LENGTH = 200;

/** An onRequest hook: the URL's length and its query's percent-encoding, before authentication. */
export async function checkUrl(req: FastifyRequest): Promise<void> {
  if (req.url.length > MAX_URL_LENGTH) {
    throw new HttpError(414, 'uri_too_long', `the URL is longer than ${MAX_URL_LENGTH} characters`, [
      { field: 'url', problem: `expected at most ${MAX_URL_LENGTH} characters, got ${req.url.length}` },
    ]);
  }
  const q = req.url.indexOf('?');
  if (q < 0) return;
  try {
    decodeURIComponent(req.url.slice(q + 1).replace(/\+/g, ' '));
  } catch {
    // fastify's query parser keeps such text as it is; refuse it instead of guessing what it meant.
    throw new HttpError(400, 'bad_url', 'the query string is not valid percent-encoded UTF-8', [
      {
        field: 'query',
        problem: 'expected percent-encoded UTF-8 (a "%" followed by two hex digits, forming valid UTF-8)',
      },
    ]);
  }
}

/** fastify's own routing errors (a path that does not decode, a parameter too long), in the one shape. */
export function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  if (err.code === 'FST_ERR_BAD_URL') {
    void reply.status(400).send(
      errorBody('bad_url', 'the path is not valid percent-encoded UTF-8', [
        {
          field: 'path',
          problem: 'expected percent-encoded UTF-8 (a "%" followed by two hex digits, forming valid UTF-8)',
        },
      ]),
    );
    return;
  }
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    void reply.status(414).send(
      errorBody('uri_too_long', `a path parameter is longer than ${MAX_PARAM_LENGTH} characters`, [
        {
          field: 'path',
          problem: `expected each part of the path to be at most ${MAX_PARAM_LENGTH} characters`,
        },
      ]),
    );
    return;
  }
  handleError(err, req, reply);
}

/** Errors Node's HTTP parser raises before fastify has a request: answered on the raw socket. */
export function clientErrorHandler(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const [status, text, body] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [
          431,
          'Request Header Fields Too Large',
          errorBody('headers_too_large', 'the request line and headers are larger than 16 KiB', [
            { field: 'headers', problem: 'expected the URL and headers together to be at most 16 KiB' },
          ]),
        ]
      : [
          400,
          'Bad Request',
          errorBody('bad_request', 'the request is not valid HTTP/1.1', [
            { field: 'request', problem: `expected an HTTP/1.1 request (${err.code ?? 'parse error'})` },
          ]),
        ];
  const json = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
  );
}
