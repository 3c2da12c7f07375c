/** Repository-relative locations; nothing here is an absolute path of a particular machine. */
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const SIDECAR_MAIN = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
export const UPSTREAM_SCRIPT = fileURLToPath(new URL('../upstream/server.ts', import.meta.url));
export const clientScript = (name: string): string => fileURLToPath(new URL(`../clients/${name}.ts`, import.meta.url));

/** node with the tsx loader, for the benchmark's own TypeScript helpers run as child processes. */
export const TSX_NODE_ARGS = ['--import', 'tsx'];
