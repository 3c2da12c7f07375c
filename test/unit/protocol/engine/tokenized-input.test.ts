// The Generate request's `tokenized` field written by hand: the bytes protobuf decodes as input_ids, within a byte budget.
import { describe, expect, it } from 'vitest';
import { vllmEngineMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { decodeGenerateRequest } from '../../../../src/protocol/engine/generate-wire.js';
import { encodeTokenizedInput, TokenizedInputWriter } from '../../../../src/protocol/engine/tokenized-input.js';

interface Decoded {
  tokenized?: { original_text: string; input_ids: number[] };
}
const decode = (bytes: Uint8Array): Decoded => vllmEngineMessage<Decoded>('GenerateRequest').deserialize(Buffer.from(bytes));

/** Ids of every varint width, 1 to 5 bytes. */
const IDS = [0, 1, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152, 268_435_455, 268_435_456, 4_294_967_295];

describe('TokenizedInputWriter', () => {
  it('writes field 2 holding packed input_ids and no original_text, as protobuf decodes a GenerateRequest', () => {
    const bytes = encodeTokenizedInput(IDS, 1 << 20)!;
    expect(decode(bytes).tokenized).toEqual({ original_text: '', input_ids: IDS });
    expect(decodeGenerateRequest(bytes, 'vllm')?.promptTokens).toBe(IDS.length);
    expect(decodeGenerateRequest(bytes, 'sglang')?.promptTokens).toBe(IDS.length);
  });

  it('takes exactly the bytes protobufjs would write for the same ids', () => {
    const ids = Array.from({ length: 20_000 }, (_, i) => (i * 7919) % 40_000);
    const reference = vllmEngineMessage('GenerateRequest').serialize({ tokenized: { input_ids: ids } });
    expect(Buffer.from(encodeTokenizedInput(ids, 1 << 20)!)).toEqual(reference);
  });

  it('grows from a small first buffer without losing an id', () => {
    const writer = new TokenizedInputWriter(1 << 20, 1);
    const ids = Array.from({ length: 5000 }, (_, i) => i * 1000);
    for (const id of ids) expect(writer.push(id)).toBe(true);
    expect(writer.tokens).toBe(5000);
    expect(decode(writer.finish()).tokenized?.input_ids).toEqual(ids);
  });

  it('refuses the id that would take the field over its budget, and every one after', () => {
    const writer = new TokenizedInputWriter(100, 1000);
    let accepted = 0;
    while (writer.push(300)) accepted++;
    // Each 300 takes 2 bytes; the budget keeps room for the largest header (12 bytes).
    expect(accepted).toBe(44);
    expect(writer.overflowed).toBe(true);
    expect(writer.push(1)).toBe(false);
    expect(() => writer.finish()).toThrow(/budget/u);
    expect(encodeTokenizedInput([300, 300, 300], 17)).toBeUndefined();
    expect(encodeTokenizedInput([300, 300, 300], 18)).toBeDefined();
  });

  it('writes an empty field for no ids', () => {
    expect(decode(new TokenizedInputWriter(64, 0).finish()).tokenized?.input_ids).toEqual([]);
  });
});
