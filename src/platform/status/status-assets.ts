/**
 * The status pages' files (static/status/: hand-written HTML, CSS and plain JS, no build step),
 * served by the process itself: no CDN, nothing fetched at runtime. Read from disk once, on the
 * first request, and kept. Only the names listed here are served, so a request path can never
 * reach another file.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The repo's static/status/ folder; the same relative place from src/ (tests) and dist/ (built). */
const ASSETS_DIR = fileURLToPath(new URL('../../../static/status/', import.meta.url));

const TYPES: Readonly<Record<string, string>> = {
  html: 'text/html; charset=utf-8',
  css: 'text/css; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
};

export interface Asset {
  readonly body: Buffer;
  readonly contentType: string;
}

/**
 * Headers of every page and file: the page runs only its own script and style and talks only
 * to its own origin (a value that slipped past escaping could still not load or send anything).
 */
export const ASSET_HEADERS = Object.freeze({
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
});

export class StatusAssets {
  private readonly cache = new Map<string, Asset>();

  /** `page` is served as /status; `files` under /status/<name>. */
  constructor(
    private readonly page: string,
    private readonly files: readonly string[],
    private readonly dir: string = ASSETS_DIR,
  ) {}

  /** The page's HTML. */
  pageAsset(): Asset {
    return this.load(this.page);
  }

  /** One of the listed files by name, else undefined. */
  file(name: string): Asset | undefined {
    return this.files.includes(name) ? this.load(name) : undefined;
  }

  private load(name: string): Asset {
    let asset = this.cache.get(name);
    if (!asset) {
      asset = { body: readFileSync(this.dir + name), contentType: TYPES[name.slice(name.lastIndexOf('.') + 1)] ?? 'application/octet-stream' };
      this.cache.set(name, asset);
    }
    return asset;
  }
}
