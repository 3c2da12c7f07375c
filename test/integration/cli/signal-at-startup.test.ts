/**
 * A SIGTERM sent the moment a command prints its startup line (an orchestrator that waits for
 * the line, a test, an operator's quick Ctrl-C) is a clean stop, exit 0. Node's default action
 * for a signal without a listener kills the process, so each long-running command listens
 * before it prints. The fake io delivers SIGTERM from inside the startup write.
 */
import { describe, expect, it } from 'vitest';
import { main } from '../../../src/cli/main.js';
import { fakeIo } from '../../support/fake-io.js';
import { TEST_PORTS_ENV } from '../../support/sidecar-process.js';
import { waitFor } from '../../support/wait.js';

/** The sidecar's test ports, and the frontend's HTTP port likewise: any free one, on loopback. */
const LOOPBACK_PORTS = { ...TEST_PORTS_ENV, DYN_HTTP_HOST: '127.0.0.1', DYN_HTTP_PORT: '0' };

describe('SIGTERM as the startup line appears', () => {
  it.each([
    ['the sidecar', ['--upstream', '127.0.0.1:1'], /listening on/],
    ['the frontend', ['frontend', '--worker', '127.0.0.1:1'], /^dynamo-frontend: listening on/],
    ['the demo', ['demo', '--workers', '1', '--http-port', '0', '--quiet'], /^dynamo-sidecar demo: frontend/],
  ])('stops %s cleanly with exit 0', { timeout: 20_000 }, async (_name, args, startupLine) => {
    const io = { ...fakeIo(), env: LOOPBACK_PORTS };
    const listenersAtStartupLine: number[] = [];
    io.stdout = {
      write: (text: string) => {
        io.out.push(text);
        if (!startupLine.test(text)) return;
        listenersAtStartupLine.push(io.emitter.listenerCount('SIGTERM'));
        io.emitter.emit('SIGTERM');
      },
    };
    const run = main(args, io);
    await waitFor(() => io.exits.length > 0 || listenersAtStartupLine.length > 0, 'the startup line', 15_000);
    expect(listenersAtStartupLine, io.err.join('')).toEqual([1]);
    await waitFor(() => io.exits.length > 0, 'exit after SIGTERM', 15_000);
    await run;
    expect(io.exits, io.err.join('')).toEqual([0]);
  });
});
