/**
 * What a command needs from its process, injected so tests can run commands in-process:
 * output streams, environment, exit, and the emitter that delivers SIGTERM/SIGINT/SIGHUP.
 */
import type { Command } from 'commander';
import { CommanderError } from 'commander';

export interface CommandIo {
  readonly stdout: { write(text: string): unknown; readonly isTTY?: boolean };
  readonly stderr: { write(text: string): unknown };
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Must not return in a real process; fakes may record the code and return. */
  exit(code: number): void;
  readonly signals: {
    once(signal: 'SIGTERM' | 'SIGINT', listener: () => void): unknown;
    on(signal: 'SIGHUP', listener: () => void): unknown;
    off(signal: 'SIGTERM' | 'SIGINT' | 'SIGHUP', listener: () => void): unknown;
  };
}

export const processIo: CommandIo = {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  exit: (code) => process.exit(code),
  signals: process,
};

/** Exit code for usage errors: bad flags or values (commander would use 1). */
export const USAGE_EXIT_CODE = 2;

/**
 * Routes commander's output through `io` and turns its parse errors (unknown option, missing
 * value) into exit code 2 like our own validation; --help stays exit 0. After `io.exit`
 * returns (fakes only) the CommanderError is rethrown so parseAsync rejects.
 */
export function applyUsageExit(command: Command, io: CommandIo): Command {
  return command.configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) }).exitOverride((error: CommanderError) => {
    io.exit(error.exitCode === 0 ? 0 : USAGE_EXIT_CODE);
    throw error;
  });
}

/** Resolves on the first SIGTERM or SIGINT and removes both listeners. */
export function waitForSignal(io: CommandIo): Promise<'SIGTERM' | 'SIGINT'> {
  return new Promise((resolve) => {
    const onTerm = (): void => done('SIGTERM');
    const onInt = (): void => done('SIGINT');
    const done = (signal: 'SIGTERM' | 'SIGINT'): void => {
      io.signals.off('SIGTERM', onTerm);
      io.signals.off('SIGINT', onInt);
      resolve(signal);
    };
    io.signals.once('SIGTERM', onTerm);
    io.signals.once('SIGINT', onInt);
  });
}

/** Calls `handler` on the first SIGTERM or SIGINT; the returned function removes both listeners. */
export function onFirstSignal(io: CommandIo, handler: () => void): () => void {
  const listener = (): void => {
    dispose();
    handler();
  };
  const dispose = (): void => {
    io.signals.off('SIGTERM', listener);
    io.signals.off('SIGINT', listener);
  };
  io.signals.once('SIGTERM', listener);
  io.signals.once('SIGINT', listener);
  return dispose;
}

/**
 * SIGHUP's default action ends the process at once (exit 129: no drain, no log line). Call
 * `onHangup` instead (a configuration reload, or a log line) and keep running. Returns a
 * function that removes the listener.
 */
export function keepRunningOnHangup(io: CommandIo, onHangup: () => void): () => void {
  const listener = (): void => onHangup();
  io.signals.on('SIGHUP', listener);
  return () => io.signals.off('SIGHUP', listener);
}
