/** StatusAssets serves only the files it lists, with their content types, read once; and the real static/status files exist. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ASSET_HEADERS, StatusAssets } from '../../../../src/platform/status/status-assets.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('StatusAssets', () => {
  it('serves the page and the listed files with their types, and nothing else', () => {
    const dir = mkdtempSync(join(tmpdir(), 'assets-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'p.html'), '<p>hi</p>');
    writeFileSync(join(dir, 'a.js'), 'x');
    writeFileSync(join(dir, 'b.css'), 'y');
    writeFileSync(join(dir, 'secret.txt'), 'no');
    const assets = new StatusAssets('p.html', ['a.js', 'b.css'], dir + '/');
    expect(assets.pageAsset()).toEqual({ body: Buffer.from('<p>hi</p>'), contentType: 'text/html; charset=utf-8' });
    expect(assets.file('a.js')?.contentType).toBe('text/javascript; charset=utf-8');
    expect(assets.file('b.css')?.contentType).toBe('text/css; charset=utf-8');
    expect(assets.file('secret.txt')).toBeUndefined();
    expect(assets.file('../p.html')).toBeUndefined();
    // Read once: a later change on disk is not seen.
    writeFileSync(join(dir, 'a.js'), 'changed');
    expect(assets.file('a.js')?.body.toString()).toBe('x');
  });

  it('finds the shipped pages and scripts', () => {
    for (const [page, files] of [
      ['frontend.html', ['status.js', 'frontend.js', 'status.css']],
      ['sidecar.html', ['status.js', 'sidecar.js', 'status.css']],
    ] as const) {
      const assets = new StatusAssets(page, files);
      expect(assets.pageAsset().body.toString()).toContain('<!doctype html>');
      for (const f of files) expect(assets.file(f)!.body.length).toBeGreaterThan(100);
    }
  });

  it('lets the page run only its own script and style', () => {
    expect(ASSET_HEADERS['content-security-policy']).toContain("script-src 'self'");
    expect(ASSET_HEADERS['content-security-policy']).toContain("default-src 'none'");
  });
});
