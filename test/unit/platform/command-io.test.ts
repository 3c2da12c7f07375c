/** What a command needs from its process: commander's usage errors exit 2, and the signal helpers add and remove their listeners. */
import { Command, CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import { USAGE_EXIT_CODE, applyUsageExit, keepRunningOnHangup, onFirstSignal, waitForSignal } from '../../../src/platform/command-io.js';
import { fakeIo } from '../../support/fake-io.js';

const program = (io: ReturnType<typeof fakeIo>): Command =>
  applyUsageExit(
    new Command('x').option('--n <n>', 'a number').action(() => {}),
    io,
  );

describe('applyUsageExit', () => {
  it('turns an unknown option into exit 2 on our stderr, and rethrows so parsing stops', async () => {
    const io = fakeIo();
    await expect(program(io).parseAsync(['--bogus'], { from: 'user' })).rejects.toBeInstanceOf(CommanderError);
    expect(io.exits).toEqual([USAGE_EXIT_CODE]);
    expect(USAGE_EXIT_CODE).toBe(2);
    expect(io.err.join('')).toContain("unknown option '--bogus'");
  });

  it('keeps --help at exit 0, written to our stdout', async () => {
    const io = fakeIo();
    await expect(program(io).parseAsync(['--help'], { from: 'user' })).rejects.toBeInstanceOf(CommanderError);
    expect(io.exits).toEqual([0]);
    expect(io.out.join('')).toContain('--n <n>');
  });
});

describe('signals', () => {
  it('waitForSignal resolves on the first of SIGTERM or SIGINT and removes both listeners', async () => {
    const io = fakeIo();
    const signal = waitForSignal(io);
    io.emitter.emit('SIGINT');
    await expect(signal).resolves.toBe('SIGINT');
    expect([io.emitter.listenerCount('SIGTERM'), io.emitter.listenerCount('SIGINT')]).toEqual([0, 0]);
  });

  it('onFirstSignal calls its handler once, and its disposer removes both listeners', () => {
    const io = fakeIo();
    let calls = 0;
    onFirstSignal(io, () => calls++);
    io.emitter.emit('SIGTERM');
    io.emitter.emit('SIGINT');
    expect(calls).toBe(1);
    const dispose = onFirstSignal(io, () => calls++);
    dispose();
    io.emitter.emit('SIGTERM');
    expect(calls).toBe(1);
    expect(io.emitter.listenerCount('SIGINT')).toBe(0);
  });

  it('keepRunningOnHangup calls its handler on every SIGHUP until removed', () => {
    const io = fakeIo();
    let hangups = 0;
    const stop = keepRunningOnHangup(io, () => hangups++);
    io.emitter.emit('SIGHUP');
    io.emitter.emit('SIGHUP');
    stop();
    expect(hangups).toBe(2);
    expect(io.emitter.listenerCount('SIGHUP')).toBe(0);
  });
});
