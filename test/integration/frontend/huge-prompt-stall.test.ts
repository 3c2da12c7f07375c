/**
 * Two concurrent 6.8 MB chat bodies ("a a a ...", 3.4 million words) must cost only their own
 * clients: they are refused with a 413 in the OpenAI error shape, while small requests sent at
 * the same time are all served and both workers stay routable (their load streams are never
 * taken for silent, which a frontend whose event loop stalls longer than 3 heartbeats would
 * do). Once with the default body limit (the bodies are refused before they are read), once
 * with a 16 MiB limit (they are read and tokenized, off the event loop, and refused because the
 * Generate message would not fit the workers' gRPC limit). Real processes, built dist/.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SystemUnderTest, type FrontendProcess, type Worker } from '../../support/system-processes.js';
import { waitFor } from '../../support/wait.js';

const sys = new SystemUnderTest();
let workers: Worker[];

beforeAll(async () => {
  workers = [await sys.worker(), await sys.worker()];
});
afterAll(() => sys.stopAll());

const HUGE_WORDS = 3_400_000;
const STREAM_LOST = 'worker load stream lost';

async function frontendOver(extra: string[]): Promise<FrontendProcess> {
  const frontend = await sys.frontend([...workers.flatMap((w) => ['--worker', w.sidecar.address]), ...extra]);
  await waitFor(async () => (await frontend.get('/ready')).status === 200, 'the frontend to know the workers');
  return frontend;
}

interface Outcome {
  readonly huge: { status: number; body: string }[];
  readonly probes: number[];
}

/** Both huge bodies at once, and small requests one after another until both are answered (at most 400 of them). */
async function hugeWithProbes(frontend: FrontendProcess): Promise<Outcome> {
  const model = workers[0]!.engine.model;
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'a '.repeat(HUGE_WORDS) }], max_tokens: 2 });
  let pending = 2;
  const hugeOne = async (): Promise<{ status: number; body: string }> => {
    try {
      return await frontend.post('/v1/chat/completions', undefined, { body });
    } finally {
      pending--;
    }
  };
  const huge = Promise.all([hugeOne(), hugeOne()]);
  const probes: number[] = [];
  while (pending > 0 && probes.length < 400) {
    const res = await frontend.post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hello there' }], max_tokens: 2 });
    probes.push(res.status);
  }
  return { huge: await huge, probes };
}

function expectRefusedTooLarge(answer: { status: number; body: string }): void {
  expect(answer.status).toBe(413);
  const body = JSON.parse(answer.body) as { error: { message: string; type: string; code: number } };
  expect(body.error).toEqual({ message: expect.stringMatching(/too large/u) as unknown, type: 'PayloadTooLarge', code: 413 });
}

describe('two huge prompts at once', () => {
  it.each([
    ['the default body limit', []],
    ['a 16 MiB body limit (tokenized, then too large for a worker message)', ['--max-body-bytes', String(16 * 1024 * 1024)]],
  ])('with %s: both get 413, every small request sent meanwhile is served, and no worker turns unroutable', async (_name, extra) => {
    const frontend = await frontendOver(extra);
    const { huge, probes } = await hugeWithProbes(frontend);
    for (const answer of huge) expectRefusedTooLarge(answer);
    expect(probes.length).toBeGreaterThan(0);
    expect(probes.filter((s) => s !== 200)).toEqual([]);
    expect(frontend.stderr()).not.toContain(STREAM_LOST);
    const after = await frontend.post('/v1/chat/completions', { model: workers[0]!.engine.model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
    expect(after.status).toBe(200);
    await frontend.stop();
  });
});
