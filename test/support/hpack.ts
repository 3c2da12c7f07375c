/**
 * A small HPACK (RFC 7541) codec for the hostile-input tests' raw HTTP/2 client: the encoder
 * writes only literal fields without indexing and without Huffman (always valid); the decoder
 * handles every representation (static and dynamic table, size updates, Huffman strings),
 * since nghttp2 uses all of them.
 */

export type HeaderList = [name: string, value: string][];

function encodeInteger(value: number, prefixBits: number, firstByte: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [firstByte | value];
  const out = [firstByte | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

function encodeString(text: string): Buffer {
  const bytes = Buffer.from(text, 'latin1');
  return Buffer.concat([Buffer.from(encodeInteger(bytes.length, 7, 0)), bytes]);
}

/** A header block of literal fields without indexing, new names, no Huffman: always valid HPACK. */
export function encodeHeaders(headers: HeaderList): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of headers) parts.push(Buffer.from([0x00]), encodeString(name), encodeString(value));
  return Buffer.concat(parts);
}

const STATIC_TABLE: HeaderList = [
  [':authority', ''],
  [':method', 'GET'],
  [':method', 'POST'],
  [':path', '/'],
  [':path', '/index.html'],
  [':scheme', 'http'],
  [':scheme', 'https'],
  [':status', '200'],
  [':status', '204'],
  [':status', '206'],
  [':status', '304'],
  [':status', '400'],
  [':status', '404'],
  [':status', '500'],
  ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'],
  ['accept-language', ''],
  ['accept-ranges', ''],
  ['accept', ''],
  ['access-control-allow-origin', ''],
  ['age', ''],
  ['allow', ''],
  ['authorization', ''],
  ['cache-control', ''],
  ['content-disposition', ''],
  ['content-encoding', ''],
  ['content-language', ''],
  ['content-length', ''],
  ['content-location', ''],
  ['content-range', ''],
  ['content-type', ''],
  ['cookie', ''],
  ['date', ''],
  ['etag', ''],
  ['expect', ''],
  ['expires', ''],
  ['from', ''],
  ['host', ''],
  ['if-match', ''],
  ['if-modified-since', ''],
  ['if-none-match', ''],
  ['if-range', ''],
  ['if-unmodified-since', ''],
  ['last-modified', ''],
  ['link', ''],
  ['location', ''],
  ['max-forwards', ''],
  ['proxy-authenticate', ''],
  ['proxy-authorization', ''],
  ['range', ''],
  ['referer', ''],
  ['refresh', ''],
  ['retry-after', ''],
  ['server', ''],
  ['set-cookie', ''],
  ['strict-transport-security', ''],
  ['transfer-encoding', ''],
  ['user-agent', ''],
  ['vary', ''],
  ['via', ''],
  ['www-authenticate', ''],
];

/**
 * Code lengths of the HPACK Huffman code (RFC 7541 Appendix B), symbols 0..255 then EOS. The
 * code is canonical (codes of one length are consecutive, in symbol order), so the lengths
 * define it; `huffmanCode` rebuilds the codes and the unit test checks a few against the RFC.
 */
// prettier-ignore
const HUFFMAN_LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30,
];

/** [code, length] per symbol, rebuilt from the canonical lengths. */
export const huffmanCode: readonly (readonly [number, number])[] = (() => {
  const symbols = HUFFMAN_LENGTHS.map((length, symbol) => ({ length, symbol })).sort((a, b) => a.length - b.length || a.symbol - b.symbol);
  const codes = new Array<[number, number]>(HUFFMAN_LENGTHS.length);
  let code = 0;
  let length = symbols[0]!.length;
  for (const entry of symbols) {
    code *= 2 ** (entry.length - length);
    length = entry.length;
    codes[entry.symbol] = [code, length];
    code++;
  }
  return codes;
})();

interface HuffNode {
  symbol?: number;
  children: [HuffNode | undefined, HuffNode | undefined];
}

const HUFFMAN_TREE: HuffNode = (() => {
  const root: HuffNode = { children: [undefined, undefined] };
  huffmanCode.forEach(([code, length], symbol) => {
    let node = root;
    for (let bit = length - 1; bit >= 0; bit--) {
      const b = Math.floor(code / 2 ** bit) % 2;
      node = node.children[b] ??= { children: [undefined, undefined] };
    }
    node.symbol = symbol;
  });
  return root;
})();

export function huffmanDecode(bytes: Uint8Array): Buffer {
  const out: number[] = [];
  let node = HUFFMAN_TREE;
  let depth = 0;
  for (const byte of bytes) {
    for (let bit = 7; bit >= 0; bit--) {
      const next = node.children[(byte >> bit) & 1];
      if (!next) throw new Error('invalid Huffman code');
      if (next.symbol !== undefined) {
        if (next.symbol === 256) throw new Error('EOS in Huffman string');
        out.push(next.symbol);
        node = HUFFMAN_TREE;
        depth = 0;
      } else {
        node = next;
        depth++;
      }
    }
  }
  if (depth > 7) throw new Error('Huffman padding longer than 7 bits');
  return Buffer.from(out);
}

/** For tests of the decoder: Huffman-encodes bytes, padding with EOS bits. */
export function huffmanEncode(bytes: Uint8Array): Buffer {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const byte of bytes) {
    const [code, length] = huffmanCode[byte]!;
    for (let bit = length - 1; bit >= 0; bit--) {
      acc = (acc << 1) | (Math.floor(code / 2 ** bit) % 2);
      if (++bits === 8) {
        out.push(acc);
        acc = 0;
        bits = 0;
      }
    }
  }
  if (bits) out.push((acc << (8 - bits)) | ((1 << (8 - bits)) - 1));
  return Buffer.from(out);
}

/** One HPACK decoding context (one per connection direction). */
export class HpackDecoder {
  private dynamic: HeaderList = [];
  private size = 0;

  constructor(private maxSize = 4096) {}

  decode(block: Uint8Array): HeaderList {
    const buf = Buffer.from(block);
    const headers: HeaderList = [];
    let pos = 0;
    const integer = (prefixBits: number): number => {
      const max = (1 << prefixBits) - 1;
      let value = buf[pos++]! & max;
      if (value < max) return value;
      let shift = 0;
      for (;;) {
        if (pos >= buf.length) throw new Error('truncated HPACK integer');
        const b = buf[pos++]!;
        value += (b & 0x7f) * 2 ** shift;
        shift += 7;
        if (!(b & 0x80)) return value;
        if (shift > 35) throw new Error('HPACK integer too long');
      }
    };
    const string = (): string => {
      const huffman = (buf[pos]! & 0x80) !== 0;
      const length = integer(7);
      if (pos + length > buf.length) throw new Error('truncated HPACK string');
      const raw = buf.subarray(pos, pos + length);
      pos += length;
      return (huffman ? huffmanDecode(raw) : Buffer.from(raw)).toString('latin1');
    };
    const entry = (index: number): [string, string] => {
      if (index >= 1 && index <= STATIC_TABLE.length) return STATIC_TABLE[index - 1]!;
      const found = this.dynamic[index - STATIC_TABLE.length - 1];
      if (!found) throw new Error(`HPACK index ${index} out of range`);
      return found;
    };
    while (pos < buf.length) {
      const b = buf[pos]!;
      if (b & 0x80) {
        headers.push([...entry(integer(7))]);
      } else if (b & 0x40) {
        const index = integer(6);
        const field: [string, string] = [index ? entry(index)[0] : string(), ''];
        field[1] = string();
        headers.push(field);
        this.add(field);
      } else if (b & 0x20) {
        this.maxSize = integer(5);
        this.evict();
      } else {
        const index = integer(4); // without indexing (0000) or never indexed (0001)
        const name = index ? entry(index)[0] : string();
        headers.push([name, string()]);
      }
    }
    return headers;
  }

  private add(field: [string, string]): void {
    this.dynamic.unshift(field);
    this.size += field[0].length + field[1].length + 32;
    this.evict();
  }

  private evict(): void {
    while (this.size > this.maxSize && this.dynamic.length) {
      const [name, value] = this.dynamic.pop()!;
      this.size -= name.length + value.length + 32;
    }
  }
}
