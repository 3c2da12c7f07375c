/**
 * A sidecar process carries only what it runs: the CLI's other commands (the frontend with
 * Fastify, the simulated engine and the load tool with grpc-js) are imported when their command
 * runs, so they cost a sidecar no memory (docs/data-plane.md, about 12 MB of idle RSS).
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startSidecarProcess } from '../../support/sidecar-process.js';

const HOOK = fileURLToPath(new URL('../../support/loaded-packages.ts', import.meta.url));

describe('sidecar process footprint', () => {
  it('loads neither grpc-js nor Fastify, only the packages the sidecar uses', { timeout: 30_000 }, async () => {
    const sidecar = await startSidecarProcess(['--upstream', '127.0.0.1:1'], { NODE_OPTIONS: `--import tsx --import ${HOOK}` });
    const code = await sidecar.stop();
    expect(code, sidecar.stderr().slice(-3000)).toBe(0);
    const line = /^loaded-packages: (.*)$/m.exec(sidecar.stderr());
    expect(line, sidecar.stderr().slice(-2000)).not.toBeNull();
    const loaded = line![1]!.split(' ');
    // The hook sees packages the sidecar does use, so an absence below is not a blind spot.
    expect(loaded).toEqual(expect.arrayContaining(['prom-client', 'protobufjs', 'commander']));
    for (const unwanted of ['@grpc/grpc-js', 'fastify', '@fastify/sse']) expect(loaded).not.toContain(unwanted);
  });
});
