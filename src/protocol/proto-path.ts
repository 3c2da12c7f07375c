import { fileURLToPath } from 'node:url';

/** The repo's proto/ folder; the same relative place from src/ (tests) and dist/ (built). */
export const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));
