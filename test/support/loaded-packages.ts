/**
 * Preloaded into a CLI child (`NODE_OPTIONS=--import tsx --import <this file>`): when the process
 * exits it writes the npm packages it loaded through node's CommonJS loader (which ESM imports
 * of CommonJS packages go through too) as one stderr line, `loaded-packages: a b c`.
 */
import { createRequire } from 'node:module';

const cache = createRequire(import.meta.url).cache;
process.on('exit', () => {
  const packages = new Set<string>();
  for (const file of Object.keys(cache)) {
    const name = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file)?.[1];
    if (name) packages.add(name);
  }
  process.stderr.write(`loaded-packages: ${[...packages].sort().join(' ')}\n`);
});
