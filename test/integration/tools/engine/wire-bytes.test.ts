// The engine's GenerateResponse bytes checked by hand, without our .proto: a request encoded
// byte by byte, the responses taken raw (identity serializers) and read as protobuf fields.
// Today's vLLM layout: GenerateResponse { oneof { chunk = 1; complete = 2 } }, nothing else.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulatedEngine, type RunningEngine } from '../../../../src/tools/engine/index.js';

const GENERATE = '/vllm.grpc.engine.VllmEngine/Generate';

let engine: RunningEngine;
let client: grpc.Client;

beforeAll(async () => {
  engine = await startSimulatedEngine({ decodeStepMs: 1 });
  client = new grpc.Client(engine.address, grpc.credentials.createInsecure());
});

afterAll(async () => {
  client?.close();
  await engine?.close();
});

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}

const lengthDelimited = (field: number, bytes: readonly number[]): number[] => [(field << 3) | 2, ...varint(bytes.length), ...bytes];

/** GenerateRequest: request_id 1, tokenized 2 { input_ids 2 (packed) }, sampling_params 4 { max_tokens 8 }, stream 5. */
function generateRequest(requestId: string, inputIds: readonly number[], maxTokens: number, stream: boolean): Buffer {
  return Buffer.from([
    ...lengthDelimited(1, [...Buffer.from(requestId)]),
    ...lengthDelimited(2, lengthDelimited(2, inputIds.flatMap(varint))),
    ...lengthDelimited(4, [8 << 3, ...varint(maxTokens)]),
    ...(stream ? [(5 << 3) | 0, 1] : []),
  ]);
}

interface Field {
  readonly field: number;
  readonly wireType: number;
  /** The varint, or the bytes of a length-delimited field. */
  readonly value: number | Buffer;
}

/** Every top-level field of a protobuf message (varint and length-delimited only; anything else fails the test). */
function fields(message: Buffer): Field[] {
  const out: Field[] = [];
  let at = 0;
  const readVarint = (): number => {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      if (at >= message.length || shift > 28) throw new Error(`bad varint at ${at}`);
      const byte = message[at++]!;
      value += (byte & 0x7f) * 2 ** shift;
      if ((byte & 0x80) === 0) return value;
    }
  };
  while (at < message.length) {
    const tag = readVarint();
    const wireType = tag & 7;
    if (wireType === 0) {
      out.push({ field: tag >>> 3, wireType, value: readVarint() });
    } else if (wireType === 2) {
      const length = readVarint();
      if (at + length > message.length) throw new Error(`field ${tag >>> 3} runs past the message end`);
      out.push({ field: tag >>> 3, wireType, value: message.subarray(at, at + length) });
      at += length;
    } else {
      throw new Error(`unexpected wire type ${wireType} (tag ${tag})`);
    }
  }
  return out;
}

/** A packed repeated varint field (token_ids, output_ids). */
function decodePacked(bytes: Buffer): number[] {
  const out: number[] = [];
  let value = 0;
  let shift = 0;
  for (const byte of bytes) {
    value += (byte & 0x7f) * 2 ** shift;
    if (byte & 0x80) shift += 7;
    else {
      out.push(value);
      value = 0;
      shift = 0;
    }
  }
  return out;
}

function rawGenerate(request: Buffer): Promise<{ messages: Buffer[]; status: grpc.StatusObject }> {
  const identity = (b: Buffer): Buffer => b;
  const call = client.makeServerStreamRequest(GENERATE, identity, identity, request, new grpc.Metadata(), {});
  const messages: Buffer[] = [];
  call.on('data', (m: Buffer) => messages.push(m));
  call.on('error', () => {});
  return new Promise((resolve) => call.on('status', (status) => resolve({ messages, status })));
}

describe('GenerateResponse bytes', () => {
  it('is one field: a chunk (field 1, first byte 0x0a) per token, then a complete (field 2, first byte 0x12) repeating the last chunk', async () => {
    const { messages, status } = await rawGenerate(generateRequest('raw-1', [5, 6, 7], 3, true));
    expect(status.code).toBe(grpc.status.OK);
    expect(messages).toHaveLength(4);
    const chunks = messages.slice(0, 3);
    const complete = messages[3]!;
    const streamed: number[] = [];
    chunks.forEach((chunk) => {
      expect(chunk[0]).toBe(0x0a);
      const top = fields(chunk);
      expect(top).toHaveLength(1);
      expect(top[0]).toMatchObject({ field: 1, wireType: 2 });
      // GenerateStreamChunk: token_ids 1 (packed), prompt_tokens 2, completion_tokens 3.
      const inner = fields(top[0]!.value as Buffer);
      const ids = decodePacked(inner.find((f) => f.field === 1)!.value as Buffer);
      expect(ids).toHaveLength(1);
      streamed.push(...ids);
      expect(inner.find((f) => f.field === 2)?.value).toBe(3);
      expect(inner.find((f) => f.field === 3)?.value).toBe(1); // vLLM's DELTA output: this chunk's own count
    });
    expect(complete[0]).toBe(0x12);
    const top = fields(complete);
    expect(top).toHaveLength(1);
    expect(top[0]).toMatchObject({ field: 2, wireType: 2 });
    // GenerateComplete: output_ids 1 (packed), finish_reason 2, prompt_tokens 3, completion_tokens 4.
    const inner = fields(top[0]!.value as Buffer);
    // Streamed: the complete repeats the last chunk, as vLLM's servicer does.
    expect(decodePacked(inner.find((f) => f.field === 1)!.value as Buffer)).toEqual(streamed.slice(-1));
    expect((inner.find((f) => f.field === 2)!.value as Buffer).toString()).toBe('length');
    expect(inner.find((f) => f.field === 3)?.value).toBe(3);
    expect(inner.find((f) => f.field === 4)?.value).toBe(1);
  });

  it('is a complete alone (first byte 0x12) when stream is false', async () => {
    const { messages, status } = await rawGenerate(generateRequest('raw-2', [9, 10], 2, false));
    expect(status.code).toBe(grpc.status.OK);
    expect(messages).toHaveLength(1);
    expect(messages[0]![0]).toBe(0x12);
    expect(fields(messages[0]!).map((f) => f.field)).toEqual([2]);
  });
});
