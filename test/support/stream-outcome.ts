import type { ClientHttp2Stream } from 'node:http2';

/** Ends the request side of a plain HTTP/2 stream; resolves with "STATUS BODY", or the error's code. */
export function streamOutcome(stream: ClientHttp2Stream): Promise<string> {
  stream.end();
  return new Promise((resolve) => {
    let status = 0;
    let body = '';
    stream.setEncoding('utf8');
    stream.on('response', (headers) => (status = Number(headers[':status'])));
    stream.on('data', (chunk: string) => (body += chunk));
    stream.on('end', () => resolve(`${status} ${body}`));
    stream.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}
