/**
 * Runs test/support/grpcio-engine.py, a gRPC engine on grpcio (grpc-core), with the system's
 * Python (the one its python3-grpcio package installs into), and stops it.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { listeningPort } from './engine-process.js';

const SCRIPT = fileURLToPath(new URL('./grpcio-engine.py', import.meta.url));
// Debian's python3-grpcio installs into the system interpreter, which the first python3 on PATH may not be.
const PYTHON = '/usr/bin/python3';
/** The engine's one method: answers with the bytes it was sent. */
export const GRPCIO_ECHO_PATH = '/dynamo.sidecar.testing.GrpcioEngine/Echo';

export interface GrpcioEngine {
  readonly address: string;
  readonly proc: ChildProcessWithoutNullStreams;
  stop(): Promise<void>;
}

export async function startGrpcioEngine(timeoutMs = 15_000): Promise<GrpcioEngine> {
  const proc = spawn(PYTHON, [SCRIPT]);
  const port = await listeningPort(proc, 'grpcio engine', timeoutMs);
  return {
    address: `127.0.0.1:${port}`,
    proc,
    stop: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill('SIGKILL');
      }),
  };
}
