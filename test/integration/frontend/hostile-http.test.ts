/**
 * The frontend process under hostile HTTP clients, over raw sockets (test/support/raw-http1.ts),
 * in front of a real sidecar and simulated engine: request smuggling, chunked garbage, slow
 * headers and bodies (the receive and headers timeouts set short), oversized and deeply nested
 * JSON, a client that stops reading a stream, hundreds of connections opened and dropped, and
 * the answers of issue 20's items 2, 5 and 6. Every case ends the same way: the process is
 * alive, a normal request gets 200, and nothing is left in flight, neither in the frontend
 * (dynamo_frontend_inflight_requests) nor in the engine behind the sidecar (dynamo_engine_request).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { jsonRequest, rawRequest, RawHttp1 } from '../../support/raw-http1.js';
import { SystemUnderTest, type FrontendProcess, type Worker } from '../../support/system-processes.js';
import { waitFor } from '../../support/wait.js';

const RECEIVE_TIMEOUT_MS = 800;
const HEADERS_TIMEOUT_MS = 400;
const BODY_LIMIT = 256 * 1024;
// A decode step of 2 ms: a 600-token stream outlasts the receive timeout, a 4000-token one lasts 8 s.
const DECODE_STEP_MS = 2;

const sys = new SystemUnderTest();
let worker: Worker;
let frontend: FrontendProcess;
let model: string;
const sockets: RawHttp1[] = [];

beforeAll(async () => {
  // A 1 s heartbeat (the helper's is 200 ms): a machine busy with other tests must not make the
  // worker's load stale (3 heartbeats) and the normal request that ends each case a 503.
  worker = await sys.worker({ engine: ['--decode-step-ms', String(DECODE_STEP_MS)], sidecar: ['--load-heartbeat-ms', '1000'] });
  model = worker.engine.model;
  frontend = await sys.frontend([
    '--worker',
    worker.sidecar.address,
    '--http-receive-timeout-ms',
    String(RECEIVE_TIMEOUT_MS),
    '--http-headers-timeout-ms',
    String(HEADERS_TIMEOUT_MS),
    '--max-body-bytes',
    String(BODY_LIMIT),
  ]);
  await waitFor(async () => (await frontend.get('/ready')).status === 200, 'the frontend to know its worker');
});
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.destroy();
});
afterAll(async () => {
  await sys.stopAll();
});

async function open(): Promise<RawHttp1> {
  const socket = await RawHttp1.connect(frontend.port);
  sockets.push(socket);
  return socket;
}

const chatBody = (extra: Record<string, unknown> = {}) => ({ model, messages: [{ role: 'user', content: 'hello there' }], max_tokens: 2, ...extra });

/** The one error shape: message, type and code, flat and again under `error`. */
function expectErrorShape(body: string, code: number): void {
  const fields = { message: expect.any(String), type: expect.any(String), code };
  expect(JSON.parse(body)).toEqual({ ...fields, error: fields });
}

/** How every case ends: alive, serving, and nothing left in flight in the frontend or the engine. */
async function expectHealthy(): Promise<void> {
  const log = () => `frontend stderr: ${frontend.stderr().slice(-3000)}`;
  expect(frontend.proc.exitCode, log()).toBeNull();
  expect(frontend.proc.signalCode, log()).toBeNull();
  const res = await frontend.post('/v1/chat/completions', chatBody());
  expect(res.status, `${res.body}\n${log()}`).toBe(200);
  await waitFor(async () => (await frontend.metric('dynamo_frontend_inflight_requests')) === 0, 'the frontend to have no request in flight', 5000);
  await waitFor(async () => (await worker.sidecar.metric('dynamo_engine_request')) === 0, 'the engine to have no request in flight', 5000);
}

/** Sends `bytes` on a new connection: the first response, then the server must close; nothing else may come. */
async function refusedOnce(bytes: string): Promise<{ status: number; body: string; socket: RawHttp1 }> {
  const socket = await open();
  socket.write(bytes);
  const response = await socket.response();
  await socket.closed();
  expect(socket.text.split('HTTP/1.1 ').length - 1, 'responses on the connection').toBe(1);
  return { ...response, socket };
}

/** A second request, hidden where a server that misreads the framing would take it for one. */
const HIDDEN = jsonRequest('POST', '/v1/completions', { model: 'smuggled', prompt: 'x' });

describe('request smuggling', () => {
  const cases: [string, string][] = [
    [
      'Content-Length with Transfer-Encoding',
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n${HIDDEN}`,
    ],
    [
      'two Content-Length headers',
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 0\r\ncontent-length: ${HIDDEN.length}\r\n\r\n${HIDDEN}`,
    ],
    [
      'a Content-Length list',
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 0, ${HIDDEN.length}\r\n\r\n${HIDDEN}`,
    ],
    [
      'Transfer-Encoding twice',
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\ntransfer-encoding: identity\r\n\r\n0\r\n\r\n${HIDDEN}`,
    ],
    [
      'Transfer-Encoding with a space before the colon',
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding : chunked\r\ncontent-length: 5\r\n\r\n0\r\n\r\n${HIDDEN}`,
    ],
    ['a folded header line', `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n transfer-encoding: chunked\r\n\r\n${HIDDEN}`],
  ];

  it.each(cases)('%s: 400 in the one error shape, the connection closed, the hidden request never served', async (_name, bytes) => {
    const { status, body } = await refusedOnce(bytes);
    expect(status).toBe(400);
    expectErrorShape(body, 400);
    await expectHealthy();
  });
});

describe('chunked garbage', () => {
  const chunked = (body: string) =>
    `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n${body}`;
  const cases: [string, string][] = [
    ['a chunk size that is not hex', chunked('zz\r\n{}\r\n0\r\n\r\n')],
    ['a chunk size past 64 bits', chunked('FFFFFFFFFFFFFFFFFF\r\n{}\r\n')],
    ['a chunk longer than its size', chunked('1\r\n{}\r\n0\r\n\r\n')],
    ['bare LF line ends', chunked('2\n{}\n0\n\n')],
    ['a NUL in a chunk extension', chunked('2;\u0000\r\n{}\r\n0\r\n\r\n')],
  ];

  it.each(cases)('%s: 400 in the one error shape, the connection closed', async (_name, bytes) => {
    const { status, body } = await refusedOnce(bytes);
    expect(status).toBe(400);
    expectErrorShape(body, 400);
    await expectHealthy();
  });
});

describe('slow clients (item 5)', () => {
  it('headers sent a byte at a time: 408 in the one error shape within the headers timeout, the connection closed', async () => {
    const socket = await open();
    const started = Date.now();
    void socket.drip(
      rawRequest('POST', '/v1/chat/completions', { 'content-type': 'application/json', 'content-length': 100_000, 'x-pad': 'a'.repeat(400) }),
      20,
    );
    const response = await socket.response(5000);
    expect(response.status).toBe(408);
    expectErrorShape(response.body, 408);
    await socket.closed();
    expect(Date.now() - started).toBeLessThan(RECEIVE_TIMEOUT_MS + 1000);
    await expectHealthy();
  });

  it('a body declared 100000 bytes and sent a byte at a time: 408 within the receive timeout, the connection closed, the request ended', async () => {
    const socket = await open();
    const started = Date.now();
    socket.write(rawRequest('POST', '/v1/chat/completions', { 'content-type': 'application/json', 'content-length': 100_000 }));
    void socket.drip(JSON.stringify(chatBody()).padEnd(500, ' '), 20);
    const response = await socket.response(5000);
    expect(response.status).toBe(408);
    expectErrorShape(response.body, 408);
    await socket.closed();
    expect(Date.now() - started).toBeLessThan(RECEIVE_TIMEOUT_MS + 1500);
    await expectHealthy();
  });

  it('a connection that sends nothing is closed after the headers timeout', async () => {
    const socket = await open();
    await socket.closed(HEADERS_TIMEOUT_MS + 3000);
    await expectHealthy();
  });

  it('an SSE stream running well past the receive timeout is not cut: the timeout covers receiving the request only', async () => {
    const socket = await open();
    const started = Date.now();
    socket.write(jsonRequest('POST', '/v1/chat/completions', chatBody({ max_tokens: 600, stream: true })));
    const response = await socket.response(20_000);
    expect(Date.now() - started).toBeGreaterThan(RECEIVE_TIMEOUT_MS);
    expect(response.status).toBe(200);
    expect(response.body.trimEnd().endsWith('data: [DONE]')).toBe(true);
    await expectHealthy();
  });
});

describe('bodies', () => {
  it('a body over --max-body-bytes, declared: 413 in the one error shape', async () => {
    const socket = await open();
    socket.write(rawRequest('POST', '/v1/chat/completions', { 'content-type': 'application/json', 'content-length': BODY_LIMIT + 1 }));
    socket.write('{"model":"' + 'x'.repeat(1000));
    const response = await socket.response();
    expect(response.status).toBe(413);
    expectErrorShape(response.body, 413);
    await expectHealthy();
  });

  it('a body over --max-body-bytes, chunked with no length: 413 in the one error shape', async () => {
    const socket = await open();
    socket.write(rawRequest('POST', '/v1/chat/completions', { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }));
    const piece = 'x'.repeat(16 * 1024);
    for (let sent = 0; sent <= BODY_LIMIT; sent += piece.length) {
      socket.write(`${piece.length.toString(16)}\r\n${piece}\r\n`);
    }
    const response = await socket.response();
    expect(response.status).toBe(413);
    expectErrorShape(response.body, 413);
    await expectHealthy();
  });

  it('JSON nested 20000 deep, in a field the API does not read and in the messages: 400 or served, never a crash', async () => {
    const depth = 20_000;
    const deepArrays = '['.repeat(depth) + ']'.repeat(depth);
    const deepObjects = '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
    for (const text of [
      `{"model":"${model}","max_tokens":2,"messages":[{"role":"user","content":"hi"}],"extra":${deepArrays}}`,
      `{"model":"${model}","max_tokens":2,"messages":[{"role":"user","content":${deepArrays}}]}`,
      `{"model":"${model}","max_tokens":2,"messages":[${deepObjects}]}`,
      `{"model":"${model}","max_tokens":2,"messages":[{"role":"user","content":"hi"}],"__proto__":${deepObjects}}`,
    ]) {
      expect(text.length).toBeLessThan(BODY_LIMIT);
      const res = await frontend.post('/v1/chat/completions', undefined, { body: text });
      expect([200, 400], res.body.slice(0, 200)).toContain(res.status);
      if (res.status === 400) expectErrorShape(res.body, 400);
    }
    await expectHealthy();
  });

  it('bytes that are not UTF-8 JSON: 400 in the one error shape', async () => {
    const socket = await open();
    const garbage = Buffer.from([0x7b, 0xff, 0xfe, 0x00, 0x22, 0xc3, 0x28, 0x7d]);
    socket.write(rawRequest('POST', '/v1/chat/completions', { 'content-type': 'application/json', 'content-length': garbage.length }));
    socket.write(garbage);
    const response = await socket.response();
    expect(response.status).toBe(400);
    expectErrorShape(response.body, 400);
    await expectHealthy();
  });
});

describe('a client that stops reading a streaming completion', () => {
  it('holds only its own request: others are served meanwhile, and when it leaves its worker call is cancelled at once', async () => {
    const socket = await open();
    // 4000 tokens at 2 ms a step: 8 s of stream, longer than the waits below.
    socket.write(jsonRequest('POST', '/v1/chat/completions', chatBody({ max_tokens: 4000, stream: true })));
    await waitFor(() => socket.text.includes('data: '), 'the first SSE event');
    socket.socket.pause();
    const others = await Promise.all([1, 2, 3].map(() => frontend.post('/v1/chat/completions', chatBody())));
    expect(others.map((r) => r.status)).toEqual([200, 200, 200]);
    // A 200 can reach its client before the sidecar has closed that call's books (its gauge drops
    // when the call ends there, after it passed the answer on): wait for the three to leave the
    // engine; the stalled stream stays in the engine and in the frontend (well within its 8 s).
    await waitFor(
      async () => (await worker.sidecar.metric('dynamo_engine_request')) === 1 && (await frontend.metric('dynamo_frontend_inflight_requests')) === 1,
      'only the stalled stream left in the engine and in the frontend',
      5000,
    );
    socket.destroy();
    await expectHealthy();
  });
});

describe('many connections', () => {
  it('200 sockets opened, some half-way through a request or a stream, then all dropped at once', async () => {
    const opened = await Promise.all(Array.from({ length: 200 }, () => open()));
    const streaming = jsonRequest('POST', '/v1/chat/completions', chatBody({ max_tokens: 4000, stream: true }));
    opened.forEach((socket, i) => {
      if (i % 4 === 1) socket.write('POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-');
      if (i % 4 === 2) socket.write(streaming);
      if (i % 4 === 3) socket.write(streaming.slice(0, streaming.length - 10));
    });
    await waitFor(() => opened.some((s) => s.text.includes('data: ')), 'a stream to have started');
    for (const socket of opened) socket.destroy();
    await expectHealthy();
  });
});

describe('error shapes and /busy_threshold (items 2 and 6)', () => {
  it('POST /v1/embeddings (no such route): 404 in the one error shape', async () => {
    const res = await frontend.post('/v1/embeddings', { model, input: 'x' });
    expect(res.status).toBe(404);
    expectErrorShape(res.body, 404);
    expect(JSON.parse(res.body)).toMatchObject({ error: { message: 'Route POST /v1/embeddings not found' } });
    await expectHealthy();
  });

  it('headers over 16 KiB: 431 in the one error shape, the connection closed', async () => {
    const { status, body } = await refusedOnce(rawRequest('GET', '/v1/models', { 'x-big': 'a'.repeat(20_000) }));
    expect(status).toBe(431);
    expectErrorShape(body, 431);
    await expectHealthy();
  });

  it('DELETE /busy_threshold with Content-Type: application/json and no body is served', async () => {
    const socket = await open();
    socket.write(
      rawRequest('DELETE', `/busy_threshold?model=${model}&check=active_decode_blocks_threshold`, { 'content-type': 'application/json', 'content-length': 0 }),
    );
    const response = await socket.response();
    expect(response.status, response.body).toBe(200);
    expect(JSON.parse(response.body)).toMatchObject({ model, active_decode_blocks_threshold: null });
    await expectHealthy();
  });

  it('a read-only POST /busy_threshold for a model with no workers is 404, as a set for it', async () => {
    const read = await frontend.post('/busy_threshold', { model: 'ghost' });
    const set = await frontend.post('/busy_threshold', { model: 'ghost', active_decode_blocks_threshold: 0.5 });
    expect([read.status, set.status]).toEqual([404, 404]);
    expect(JSON.parse(read.body)).toEqual({ error: "Model 'ghost' not found. Thresholds can only be read for discovered models." });
    await expectHealthy();
  });
});
