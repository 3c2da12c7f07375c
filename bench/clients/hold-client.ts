/**
 * Held-stream client for the memory scenario: opens calls that the upstream answers with
 * headers and then holds, in steps (e.g. 1,000 then 10,000 open at once). After each step it
 * prints {"held":n,...} and waits for a line on stdin before the next; after the last it
 * closes everything and exits.
 */
import type { ClientHttp2Session, ClientHttp2Stream } from 'node:http2';
import { createInterface } from 'node:readline';
import { frameMessage } from '../../src/protocol/grpc/framing.js';
import { emit, exitAfter, grpcHeaders, openSessions, readParams } from './common.js';

interface Params {
  port: number;
  steps: number[];
  perSession: number;
  stepTimeoutMs: number;
}

const p = readParams<Params>();
exitAfter(p.steps.length * (p.stepTimeoutMs + 30_000));
const body = frameMessage(Buffer.alloc(16));
const headers = grpcHeaders('/bench.Bench/Hold');
const sessions: ClientHttp2Session[] = [];
const streams: ClientHttp2Stream[] = [];
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

async function openUpTo(total: number): Promise<{ held: number; failed: number }> {
  let answered = 0;
  let failed = 0;
  const target = total - streams.length;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, p.stepTimeoutMs);
    const settle = (): void => {
      if (answered + failed >= target) {
        clearTimeout(timer);
        resolve();
      }
    };
    while (streams.length < total) {
      if (streams.length >= sessions.length * p.perSession) sessions.push(...openSessions(p.port, 1));
      const req = sessions[sessions.length - 1]!.request(headers);
      streams.push(req);
      let seen = false;
      req.on('response', (h) => {
        seen = true;
        if (Number(h[':status']) === 200 && h['grpc-status'] === undefined) answered++;
        else failed++;
        settle();
      });
      req.on('error', () => {});
      req.on('close', () => {
        if (!seen) {
          seen = true;
          failed++;
          settle();
        }
      });
      req.on('data', () => {});
      req.write(body);
    }
  });
  return { held: answered, failed };
}

let heldTotal = 0;
for (const step of p.steps) {
  const { held, failed } = await openUpTo(step);
  heldTotal += held;
  emit({ step, held: heldTotal, failed, sessions: sessions.length });
  await lines.next();
}
for (const s of sessions) s.destroy();
process.exit(0);
