/**
 * Starts a real nats-server on a free 127.0.0.1 port for integration tests.
 *
 *   const nats = await startNatsServer();  // nats.url, nats.port
 *   await nats.stop();     // broker gone, port kept for restart()
 *   await nats.restart();  // same port again
 *   startNatsServer({ start: false })  // port reserved, broker not running until restart()
 *   nats.pause(); nats.resume();  // SIGSTOP / SIGCONT: hung with TCP open
 *   startNatsServer({ args: ['--tls', ...] })  // more nats-server flags (TLS, --auth TOKEN)
 *
 * The binary is `NATS_SERVER_BIN` or `nats-server` on PATH (Debian puts it in /usr/sbin).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createConnection, createServer } from 'node:net';
import { waitFor } from './wait.js';

export interface NatsServerHandle {
  url: string;
  port: number;
  stop(): Promise<void>;
  restart(): Promise<void>;
  /** SIGSTOP: the broker hangs with its connections open (the hung-broker case). */
  pause(): void;
  /** SIGCONT after pause(). */
  resume(): void;
}

export class NatsServerNotInstalledError extends Error {
  override readonly name = 'NatsServerNotInstalledError';
}

const START_TIMEOUT_MS = 10_000;

/** The nats-server binary: `NATS_SERVER_BIN`, else the first that runs of the usual places. */
export function natsServerBinary(): string {
  const candidates = [process.env['NATS_SERVER_BIN'], 'nats-server', '/usr/sbin/nats-server', '/usr/local/bin/nats-server'].filter((c): c is string => !!c);
  for (const c of candidates) {
    const probe = spawnSync(c, ['--version'], { stdio: 'ignore' });
    if (probe.status === 0) return c;
  }
  throw new NatsServerNotInstalledError('nats-server not found: install it (Debian: apt-get install nats-server) or set NATS_SERVER_BIN');
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export async function startNatsServer(options: { start?: boolean; args?: readonly string[] } = {}): Promise<NatsServerHandle> {
  const bin = natsServerBinary();
  const port = await freePort();
  let child: ChildProcess | undefined;

  const launch = async (): Promise<void> => {
    let stderr = '';
    const proc = spawn(bin, ['-a', '127.0.0.1', '-p', String(port), ...(options.args ?? [])], { stdio: ['ignore', 'ignore', 'pipe'] });
    proc.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
    child = proc;
    const failed = (why: string): Error => {
      proc.kill('SIGKILL');
      return new Error(`nats-server did not start on 127.0.0.1:${port} (${why}): ${stderr.trim() || 'no output'}`);
    };
    const exited = (): boolean => proc.exitCode !== null || proc.signalCode !== null;
    await waitFor(async () => exited() || (await accepts(port)), 'nats-server to accept connections', START_TIMEOUT_MS, 20).catch((err: Error) => {
      throw failed(err.message);
    });
    if (exited()) throw failed(`exited with code ${proc.exitCode ?? proc.signalCode}`);
  };

  const stop = async (): Promise<void> => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await exited;
  };

  if (options.start !== false) await launch();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    stop,
    restart: async () => {
      await stop();
      await launch();
    },
    pause: () => void child?.kill('SIGSTOP'),
    resume: () => void child?.kill('SIGCONT'),
  };
}
