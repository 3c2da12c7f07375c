/**
 * PROTO_DIR, where every .proto the processes load is found: the package's proto/ folder, from
 * src/ (tests, tsx) as from dist/ (the built package), which is why the build must keep
 * src/protocol/ two levels below the package root.
 */
import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { PROTO_DIR } from '../../../src/protocol/proto-path.js';

const packageRoot = fileURLToPath(new URL('../../../', import.meta.url));

describe('PROTO_DIR', () => {
  it("is the absolute path of the package's proto/ folder, ending in a separator", () => {
    expect(isAbsolute(PROTO_DIR)).toBe(true);
    expect(PROTO_DIR).toBe(join(packageRoot, 'proto') + sep);
  });

  it.each(['vllm/vllm_engine.proto', 'grpc/health/v1/health.proto', 'dynamo/sidecar/v1/worker_load.proto'])(
    'holds %s, which the processes load from it',
    (file) => {
      expect(existsSync(join(PROTO_DIR, file))).toBe(true);
    },
  );

  it('is found from dist/ too: the build keeps the folder depth and the package ships proto/', () => {
    const tsconfig = JSON.parse(readFileSync(join(packageRoot, 'tsconfig.json'), 'utf8')) as { compilerOptions: { rootDir: string; outDir: string } };
    expect(tsconfig.compilerOptions.rootDir).toBe('src');
    expect(tsconfig.compilerOptions.outDir).toBe('dist');
    // Two levels up from the module's folder: dist/protocol/ is as deep as src/protocol/.
    expect(relative(join(packageRoot, 'src', 'protocol'), PROTO_DIR)).toBe(join('..', '..', 'proto'));
    const pkg = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { files: string[] };
    expect(pkg.files).toEqual(expect.arrayContaining(['dist', 'proto']));
  });
});
