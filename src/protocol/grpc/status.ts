/**
 * gRPC status codes (https://github.com/grpc/grpc/blob/master/doc/statuscodes.md).
 * Always use these names; a bare number on the wire is produced only by `String(code)`. The
 * table is whole on purpose, used members or not.
 *
 * @public
 */
export enum GrpcStatus {
  OK = 0,
  CANCELLED = 1,
  UNKNOWN = 2,
  INVALID_ARGUMENT = 3,
  DEADLINE_EXCEEDED = 4,
  NOT_FOUND = 5,
  ALREADY_EXISTS = 6,
  PERMISSION_DENIED = 7,
  RESOURCE_EXHAUSTED = 8,
  FAILED_PRECONDITION = 9,
  ABORTED = 10,
  OUT_OF_RANGE = 11,
  UNIMPLEMENTED = 12,
  INTERNAL = 13,
  UNAVAILABLE = 14,
  DATA_LOSS = 15,
  UNAUTHENTICATED = 16,
}

/** Name of a status code as it appears in metrics labels ("RESOURCE_EXHAUSTED"); unknown codes keep their number. */
export function statusName(code: number): string {
  return GrpcStatus[code] ?? String(code);
}

/** A status code from elsewhere (grpc-js's own enum, a number off the wire) under these names; unknown codes keep their number. */
export function asGrpcStatus(code: number): GrpcStatus {
  return code;
}

/** Parses a `grpc-status` header value; anything that is not a small non-negative integer is UNKNOWN. */
export function parseStatus(value: string | string[] | undefined): GrpcStatus {
  if (typeof value !== 'string') return GrpcStatus.UNKNOWN;
  const code = Number(value);
  return Number.isInteger(code) && code >= 0 && code <= 0xffff ? code : GrpcStatus.UNKNOWN;
}

/**
 * Percent-encodes a `grpc-message` as the gRPC HTTP/2 spec requires: UTF-8 bytes outside
 * printable ASCII 0x20-0x7E, and '%' itself, become %XX. Not encodeURIComponent, which also
 * escapes spaces and punctuation that the spec leaves readable.
 */
export function encodeGrpcMessage(message: string): string {
  let plain = true;
  for (let i = 0; i < message.length; i++) {
    const c = message.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) {
      plain = false;
      break;
    }
  }
  if (plain) return message;
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : '%' + byte.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

/** Reverses {@link encodeGrpcMessage}; malformed escapes are kept as written, like grpc-js does. */
export function decodeGrpcMessage(encoded: string): string {
  if (!encoded.includes('%')) return encoded;
  const bytes: number[] = [];
  for (let i = 0; i < encoded.length; i++) {
    const c = encoded.charCodeAt(i);
    if (c === 0x25 && /^[0-9A-Fa-f]{2}$/.test(encoded.slice(i + 1, i + 3))) {
      bytes.push(parseInt(encoded.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(encoded[i]!, 'utf8'));
    }
  }
  return Buffer.from(bytes).toString('utf8');
}
