/**
 * A `fetch` over node:https that trusts the test CA (and presents a client certificate when
 * given one), for clients that take a fetch function (the `openai` SDK): Node's global fetch has
 * no per-call CA option. Bodies stream both ways; an abort signal ends the request.
 */
import { request } from 'node:https';
import { Readable } from 'node:stream';
import type { TlsClientOptions } from './certs.js';

export function httpsFetch(tls: TlsClientOptions): typeof fetch {
  return (input, init = {}) =>
    new Promise<Response>((resolve, reject) => {
      const url = input instanceof Request ? input.url : String(input);
      const headers: Record<string, string> = {};
      new Headers(init.headers).forEach((value, key) => (headers[key] = value));
      const req = request(url, { method: init.method ?? 'GET', headers, ...tls, agent: false }, (res) => {
        const responseHeaders = new Headers();
        for (const [key, value] of Object.entries(res.headers)) {
          if (value !== undefined) responseHeaders.set(key, Array.isArray(value) ? value.join(', ') : value);
        }
        resolve(new Response(Readable.toWeb(res) as ReadableStream<Uint8Array>, { status: res.statusCode ?? 0, headers: responseHeaders }));
      });
      req.on('error', reject);
      init.signal?.addEventListener('abort', () => req.destroy(new Error('aborted')), { once: true });
      if (typeof init.body === 'string' || init.body instanceof Uint8Array) req.end(init.body);
      else if (init.body == null) req.end();
      else reject(new Error('httpsFetch: only string and byte bodies'));
    });
}
