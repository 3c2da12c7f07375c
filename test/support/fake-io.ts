/** In-process CommandIo: captures output, records exit codes, delivers fake signals. */
import { EventEmitter } from 'node:events';
import type { LoadCommandIo } from '../../src/tools/load/command.js';

export interface FakeIo extends LoadCommandIo {
  out: string[];
  err: string[];
  progressOut: string[];
  exits: number[];
  emitter: EventEmitter;
}

export function fakeIo(tty = false): FakeIo {
  const out: string[] = [];
  const err: string[] = [];
  const progressOut: string[] = [];
  const exits: number[] = [];
  const emitter = new EventEmitter();
  return {
    out,
    err,
    progressOut,
    exits,
    emitter,
    stdout: { write: (s: string) => out.push(s) },
    stderr: { write: (s: string) => err.push(s) },
    env: {},
    progress: { write: (s: string) => progressOut.push(s), isTTY: tty },
    exit: (code: number) => {
      exits.push(code);
    },
    signals: emitter,
  };
}
