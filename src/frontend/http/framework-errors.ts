/**
 * What Fastify and node answer of their own, in the error table's one shape (flat fields and
 * the same under `error`, where OpenAI's SDKs look) instead of their defaults, whose `error` is
 * a string: an unknown route (404), a failure outside the routes' plugins (a body too large or
 * of the wrong type sent to an unknown route, /metrics), a URL Fastify cannot decode, and what
 * node's HTTP parser refuses before any route sees a request (a malformed request line,
 * Content-Length with Transfer-Encoding or twice, a bad chunk: 400; headers over the size
 * limit: 431; headers or a request not received in time: 408). /busy_threshold keeps Dynamo's
 * `{"error": "..."}` in its own plugin.
 */
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyServerOptions } from 'fastify';
import type { Logger } from '../../platform/log.js';
import { FrontendError } from '../generate/errors.js';
import { errorAnswer, toFrontendError, type ErrorAnswerOptions } from './error-table.js';

/** The Fastify constructor's hooks for errors raised before routing: a bad URL, and node's clientError. */
export function frameworkErrorOptions(errors: ErrorAnswerOptions): Pick<FastifyServerOptions, 'frameworkErrors' | 'clientErrorHandler'> {
  return {
    frameworkErrors: (error: FastifyError, _request, reply: FastifyReply) => void send(reply, toFrontendError(error), errors),
    clientErrorHandler: (error: Error & { code?: string }, socket: Socket) => answerClientError(error, socket, errors),
  };
}

/** Unknown routes, and any failure no plugin's own error handler takes. */
export function answerRootErrors(app: FastifyInstance, errors: ErrorAnswerOptions, logger: Logger): void {
  app.setNotFoundHandler((request, reply) =>
    send(reply, new FrontendError('no_route', `Route ${request.method} ${request.url.split('?')[0]} not found`), errors),
  );
  app.setErrorHandler((error, request, reply) => {
    const failure = toFrontendError(error);
    if (failure.code === 'internal') logger.error('request failed', { url: request.url, error: failure.message });
    return send(reply, failure, errors);
  });
}

function send(reply: FastifyReply, failure: FrontendError, errors: ErrorAnswerOptions): FastifyReply {
  const { status, body } = errorAnswer(failure, errors);
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}

/**
 * node's 'clientError': the parser refused the bytes, or a timeout cut the request. The answer is
 * written on the socket, which is then destroyed (as node's own handler does), and only when no
 * response has started on it: a parse error in a request pipelined behind a stream must not
 * write a status line into that stream.
 */
function answerClientError(error: Error & { code?: string }, socket: Socket, errors: ErrorAnswerOptions): void {
  // A reset: nobody is left to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // node's own check before it answers a client error (lib/_http_server.js, socketOnError).
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    const { status, body } = errorAnswer(clientErrorCause(error), errors);
    const text = JSON.stringify(body);
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
    );
  }
  socket.destroy();
}

function clientErrorCause(error: Error & { code?: string }): FrontendError {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return new FrontendError('request_timeout', 'Request not received in time', { cause: error });
  if (error.code === 'HPE_HEADER_OVERFLOW') return new FrontendError('headers_too_large', 'Request header fields too large', { cause: error });
  return new FrontendError('bad_request', `Malformed HTTP request: ${error.message.replace(/^Parse Error: /u, '')}`, { cause: error });
}
