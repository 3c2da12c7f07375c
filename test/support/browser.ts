/**
 * A real browser for the status-page tests: Debian's chromium (.ci/setup.sh installs it),
 * driven by playwright-core, headless, with a fresh profile and nothing downloaded. One browser
 * per test file: launch in beforeAll, close in afterAll. If chromium cannot start the test fails
 * and says why; it is never skipped.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM_PATH = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface TestBrowser {
  readonly context: BrowserContext;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'status-page-browser-'));
  let context: BrowserContext;
  try {
    // A persistent context is how playwright takes a --user-data-dir of our choosing: fresh each run.
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: ARGS,
      viewport: { width: 1400, height: 900 },
      timeout: 30_000,
    });
  } catch (err) {
    rmSync(profile, { recursive: true, force: true });
    throw new Error(`cannot start chromium at ${CHROMIUM_PATH} (install the Debian package chromium: bash .ci/setup.sh): ${(err as Error).message}`);
  }
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
