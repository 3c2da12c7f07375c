// What Fastify and node answer of their own (unknown routes, bad URLs, what the HTTP parser refuses) comes in the error table's one shape.
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { jsonRequest, rawRequest, RawHttp1 } from '../../../support/raw-http1.js';
import { streams, testApp, type TestApp } from '../../../support/frontend-fakes.js';
import { waitFor } from '../../../support/wait.js';

let t: TestApp;
const sockets: RawHttp1[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await t?.app.close();
});

/** The one error shape: message, type and code, flat and again under `error`. */
const errorShape = (code: number, message: unknown = expect.any(String), type: unknown = expect.any(String)) => {
  const fields = { message, type, code };
  return { ...fields, error: fields };
};

async function listening(options: Parameters<typeof testApp>[0] = {}): Promise<number> {
  t = testApp(options);
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  return (t.app.server.address() as AddressInfo).port;
}

async function exchange(port: number, bytes: string) {
  const socket = await RawHttp1.connect(port);
  sockets.push(socket);
  socket.write(bytes);
  return { response: await socket.response(), socket };
}

describe('unknown routes', () => {
  it('answer 404 in the one error shape, for any method', async () => {
    t = testApp();
    for (const method of ['GET', 'POST', 'DELETE', 'PUT'] as const) {
      const res = await t.app.inject({ method, url: '/v1/embeddings?x=1', ...(method === 'POST' ? { payload: { input: 'x' } } : {}) });
      expect(res.statusCode, method).toBe(404);
      expect(res.headers['content-type']).toMatch(/^application\/json/u);
      expect(res.json(), method).toEqual(errorShape(404, `Route ${method} /v1/embeddings not found`, 'Not Found'));
    }
  });

  it('answer a body over the limit or of a refused type, sent to an unknown route, in the same shape', async () => {
    t = testApp({ options: { bodyLimitBytes: 256 } });
    const big = await t.app.inject({ method: 'POST', url: '/v1/embeddings', payload: { input: 'x'.repeat(300) } });
    expect(big.statusCode).toBe(413);
    expect(big.json()).toEqual(errorShape(413));
    const text = await t.app.inject({ method: 'POST', url: '/v1/embeddings', headers: { 'content-type': 'text/plain' }, payload: 'hi' });
    expect([404, 415]).toContain(text.statusCode);
    expect(text.json()).toEqual(errorShape(text.statusCode));
  });
});

describe('a URL Fastify cannot decode', () => {
  it('is a 400 in the one error shape', async () => {
    const port = await listening();
    const { response } = await exchange(port, rawRequest('GET', '/v1/%zz', { connection: 'close' }));
    expect(response.status).toBe(400);
    expect(JSON.parse(response.body)).toEqual(errorShape(400));
  });
});

describe("what node's HTTP parser refuses", () => {
  const refused: [string, string, number][] = [
    ['a malformed request line', 'GARBAGE\r\n\r\n', 400],
    [
      'Content-Length with Transfer-Encoding (smuggling)',
      rawRequest(
        'POST',
        '/v1/completions',
        { 'content-type': 'application/json', 'content-length': 4, 'transfer-encoding': 'chunked' },
        '2\r\n{}\r\n0\r\n\r\n',
      ),
      400,
    ],
    [
      'two Content-Length headers (smuggling)',
      rawRequest('POST', '/v1/completions', { 'content-type': 'application/json', 'content-length': 2, 'Content-Length': 3 }, '{}'),
      400,
    ],
    [
      'a chunk size that is not hex',
      rawRequest('POST', '/v1/completions', { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, 'zz\r\n{}\r\n0\r\n\r\n'),
      400,
    ],
    ['headers over the size limit', rawRequest('GET', '/v1/models', { 'x-big': 'a'.repeat(20_000) }), 431],
  ];

  it.each(refused)('%s: answered in the one error shape, then the connection is closed', async (_name, bytes, status) => {
    const port = await listening();
    const { response, socket } = await exchange(port, bytes);
    expect(response.status).toBe(status);
    expect(response.headers['content-type']).toMatch(/^application\/json/u);
    expect(JSON.parse(response.body)).toEqual(errorShape(status));
    await socket.closed();
    expect(t.workers.calls).toHaveLength(0);
  });

  it('never writes a status line into a response already under way: garbage pipelined behind a stream only closes it', async () => {
    const port = await listening();
    t.workers.defaultScript = streams([1, 2, 3, 4, 5, 6, 7, 8], 'length', 20);
    const socket = await RawHttp1.connect(port);
    sockets.push(socket);
    socket.write(jsonRequest('POST', '/v1/completions', { model: 'm1', prompt: 'hi', stream: true }));
    await waitFor(() => socket.text.includes('data: '), 'the first SSE event');
    socket.write('GARBAGE\r\n\r\n');
    await socket.closed();
    expect(socket.text.startsWith('HTTP/1.1 200')).toBe(true);
    expect(socket.text.slice(1)).not.toContain('HTTP/1.1');
  });
});
