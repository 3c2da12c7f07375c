import { readFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineScraper, defaultFetchText, type FetchText } from '../../../../src/sidecar/load/engine-scraper.js';
import { recordingLogger } from '../../../support/recording-logger.js';
import { waitFor } from '../../../support/wait.js';

const vllm = readFileSync(new URL('../../../fixtures/engine-metrics/vllm.txt', import.meta.url), 'utf8');

type Mode = 'ok' | 'error' | 'hang' | 'html';
let mode: Mode = 'ok';
let requests = 0;
const hanging: ServerResponse[] = [];
let server: Server;
let url: string;

/**
 * The real fetch, wrapped to count overlapping scrapes where they happen: in the scraper. (The
 * server sees an aborted request's close only some time after the client gave up, so counting
 * there reports overlaps that never happened when the machine is busy.)
 */
function countingFetch(): { fetchText: FetchText; starts: () => number; maxInFlight: () => number } {
  let inFlight = 0;
  let maxInFlight = 0;
  let starts = 0;
  const fetchText: FetchText = async (u, signal) => {
    starts++;
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      return await defaultFetchText(u, signal);
    } finally {
      inFlight--;
    }
  };
  return { fetchText, starts: () => starts, maxInFlight: () => maxInFlight };
}

beforeAll(async () => {
  server = createServer((_req, res) => {
    requests++;
    if (mode === 'ok') res.end(vllm);
    else if (mode === 'html') res.end('<html>hello</html>');
    else if (mode === 'error') res.writeHead(500).end('boom');
    else hanging.push(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
  await (await fetch(url)).text(); // the first fetch in a process is slow; keep it out of the 50 ms budgets below
});

afterAll(async () => {
  for (const res of hanging) res.destroy();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe('EngineScraper', () => {
  it('goes fresh, turns stale once on errors and timeouts, recovers, and never overlaps scrapes', async () => {
    mode = 'ok';
    const logger = recordingLogger();
    const { lines } = logger;
    let updates = 0;
    const counting = countingFetch();
    const s = new EngineScraper({ url, intervalMs: 80, timeoutMs: 50, logger, onUpdate: () => updates++, fetchText: counting.fetchText });
    expect(s.stale).toBe(true);
    s.start();
    try {
      await waitFor(() => !s.stale, 'the first good scrape', 3000);
      expect(s.ranks.get(1)).toMatchObject({ kvUsedBlocks: 256, kvTotalBlocks: 4096 });
      const before = requests;
      await waitFor(() => requests >= before + 3, 'three more scrapes', 3000); // identical bodies: no further onUpdate
      expect(updates).toBe(1);

      mode = 'error';
      await waitFor(() => s.errors >= 2, 'two HTTP 500 scrapes counted as errors', 3000);
      expect(s.stale).toBe(true);
      expect(s.lastError).toMatch(/HTTP 500/);
      mode = 'hang';
      const errorsBefore = s.errors;
      await waitFor(() => s.errors >= errorsBefore + 2, 'two timed-out scrapes counted as errors', 3000);
      expect(s.lastError).toMatch(/timed out after 50 ms/);
      mode = 'html';
      // A hung scrape may still be in flight at the switch (it then times out, one more error):
      // wait for the HTML body's own error, not a count.
      const errorsBeforeHtml = s.errors;
      await waitFor(() => /no known engine metrics/.test(s.lastError ?? ''), 'an HTML body counted as an error', 3000);
      expect(s.errors).toBeGreaterThan(errorsBeforeHtml);
      expect(s.ranks.get(0)).toMatchObject({ kvUsedBlocks: 1024 }); // last good values kept for inspection
      expect(lines.filter((l) => l.msg === 'engine metrics stale')).toHaveLength(1);
      expect(updates).toBe(2);

      mode = 'ok';
      await waitFor(() => !s.stale, 'the scraper fresh again', 3000);
      expect(lines.map((l) => l.msg)).toEqual(['engine metrics fresh', 'engine metrics stale', 'engine metrics fresh']);
      expect(updates).toBe(3);
      expect(counting.maxInFlight()).toBe(1);
    } finally {
      s.stop();
    }
  });

  it('counts a refused connection as an error without throwing', async () => {
    const logger = recordingLogger();
    const { lines } = logger;
    const s = new EngineScraper({ url: 'http://127.0.0.1:1/metrics', intervalMs: 50, logger });
    await s.scrapeOnce();
    await s.scrapeOnce();
    expect(s.errors).toBe(2);
    expect(s.stale).toBe(true);
    expect(lines).toHaveLength(1);
    expect(lines[0]!.fields?.['reason']).toMatch(/fetch failed/);
  });

  it('stop() aborts an in-flight scrape without counting it', async () => {
    mode = 'hang';
    const s = new EngineScraper({ url, intervalMs: 1000, timeoutMs: 900, logger: recordingLogger() });
    const p = s.scrapeOnce();
    await waitFor(() => hanging.length > 0, 'the server to hold the scrape', 3000);
    s.stop();
    await p;
    expect(s.errors).toBe(0);
  });

  it('waits for a slow scrape longer than the interval without starting a second one', async () => {
    mode = 'hang';
    const counting = countingFetch();
    const s = new EngineScraper({ url, intervalMs: 30, timeoutMs: 200, logger: recordingLogger(), fetchText: counting.fetchText });
    s.start();
    try {
      await waitFor(() => s.errors >= 3, 'three timed-out scrapes', 5000);
      expect(s.lastError).toMatch(/timed out after 200 ms/);
      // Each scrape ran to its 200 ms timeout before the next began, although the interval is 30 ms.
      expect(counting.maxInFlight()).toBe(1);
      expect(counting.starts()).toBeLessThanOrEqual(s.errors + 1);
    } finally {
      s.stop();
      mode = 'ok';
    }
  });
});
