// A body refused for its size, over a real socket: the client still uploading it reads the 413 and its reason, not a broken pipe.
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { testApp, type TestApp } from '../../../support/frontend-fakes.js';

let t: TestApp | undefined;
afterEach(async () => {
  await t?.app.close();
  t = undefined;
});

async function listening(bodyLimitBytes: number): Promise<string> {
  t = testApp({ options: { bodyLimitBytes } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}

const hugeChat = (bytes: number) => JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'a'.repeat(bytes) }] });

describe('a body over the limit', () => {
  it('is answered 413 in the OpenAI error shape to a client still uploading 8 MB of it, and the connection serves the next request', async () => {
    const base = await listening(64 * 1024);
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: hugeChat(8 * 1024 * 1024),
    });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: unknown }).error).toEqual({ message: 'Request body is too large', type: 'PayloadTooLarge', code: 413 });
    expect(res.headers.get('connection')).not.toBe('close');
    const next = await fetch(`${base}/v1/models`);
    expect(next.status).toBe(200);
  });
});
