/**
 * Small seeded PRNG (mulberry32) and a 32-bit hash mixer. Not cryptographic: only there so
 * that token ids, early stops and load patterns repeat exactly for the same seed.
 */
export type Random = () => number;

/** Uniform in [0, 1), 2^32 period; the same seed always yields the same sequence. */
export function mulberry32(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Mixes two 32-bit values into one (murmur3 finaliser over a combination). */
export function mix32(a: number, b: number): number {
  let h = (a ^ Math.imul(b >>> 0, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Hash of a token sequence, so that equal prompts get equal outputs whatever the request id. */
export function hashTokens(tokens: ArrayLike<number>): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < tokens.length; i++) h = mix32(h, tokens[i]!);
  return mix32(h, tokens.length);
}
