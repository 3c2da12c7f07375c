import { describe, expect, it } from 'vitest';
import { GrpcStatus, decodeGrpcMessage, encodeGrpcMessage, parseStatus, statusName } from '../../../../src/protocol/grpc/status.js';

describe('grpc-message percent-encoding', () => {
  it('leaves printable ASCII (spaces and punctuation included) readable', () => {
    expect(encodeGrpcMessage('Server overloaded: worker at capacity')).toBe('Server overloaded: worker at capacity');
  });

  it('encodes %, control characters and UTF-8 bytes as the gRPC spec says', () => {
    expect(encodeGrpcMessage('100% done\n')).toBe('100%25 done%0A');
    expect(encodeGrpcMessage('nöt ☃')).toBe('n%C3%B6t %E2%98%83');
  });

  it('round-trips any text', () => {
    for (const text of ['', 'plain', 'mixed ünïcödé ✓ %41', '\u0000\u001f\u007f', '𝄞 astral']) {
      expect(decodeGrpcMessage(encodeGrpcMessage(text))).toBe(text);
    }
  });
});

describe('grpc-status', () => {
  it('parses codes and maps garbage to UNKNOWN', () => {
    expect(parseStatus('8')).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    expect(parseStatus('x')).toBe(GrpcStatus.UNKNOWN);
    expect(parseStatus(undefined)).toBe(GrpcStatus.UNKNOWN);
    expect(parseStatus('-1')).toBe(GrpcStatus.UNKNOWN);
  });

  it('names codes for metric labels, keeping unknown numbers', () => {
    expect(statusName(14)).toBe('UNAVAILABLE');
    expect(statusName(99)).toBe('99');
  });
});
