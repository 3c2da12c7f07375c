/**
 * A tiny VllmEngine server that answers the first `rejectFirst` Generate calls with
 * RESOURCE_EXHAUSTED (Trailers-Only, with an optional grpc-retry-pushback-ms trailer) and
 * completes the rest with `tokens` tokens; it records when each call arrived.
 */
import * as grpc from '@grpc/grpc-js';
import { VllmEngineClient } from './vllm-client.js';

export interface PushbackServer {
  address: string;
  arrivals: number[];
  close(): Promise<void>;
}

export async function startPushbackServer(rejectFirst: number, pushbackMs: string | undefined, tokens = 3): Promise<PushbackServer> {
  const server = new grpc.Server();
  const arrivals: number[] = [];
  server.addService(VllmEngineClient.service, {
    Generate: (call: grpc.ServerWritableStream<{ request_id: string }, unknown>) => {
      arrivals.push(performance.now());
      if (arrivals.length <= rejectFirst) {
        const metadata = new grpc.Metadata();
        if (pushbackMs !== undefined) metadata.set('grpc-retry-pushback-ms', pushbackMs);
        call.emit('error', { code: grpc.status.RESOURCE_EXHAUSTED, details: 'Server overloaded: worker at capacity', metadata });
        return;
      }
      const ids = Array.from({ length: tokens }, (_, i) => i + 1);
      for (const [i, id] of ids.entries()) call.write({ chunk: { token_ids: [id], prompt_tokens: 1, completion_tokens: i + 1 } });
      call.write({ complete: { output_ids: ids, finish_reason: 'length', prompt_tokens: 1, completion_tokens: tokens } });
      call.end();
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return {
    address: `127.0.0.1:${port}`,
    arrivals,
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
  };
}
