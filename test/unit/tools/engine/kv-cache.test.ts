// The simulated engine's KV block counter: blocks per token count, all-or-nothing allocation,
// and frees that can never take the count below zero; used <= total through any sequence.
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { KvBlockAllocator } from '../../../../src/tools/engine/kv-cache.js';

describe('KvBlockAllocator.blocksFor', () => {
  it('rounds a partial block up', () => {
    const kv = new KvBlockAllocator(100, 16);
    expect(kv.blocksFor(0)).toBe(0);
    expect(kv.blocksFor(1)).toBe(1);
    expect(kv.blocksFor(16)).toBe(1);
    expect(kv.blocksFor(17)).toBe(2);
    expect(kv.blocksFor(160)).toBe(10);
    expect(new KvBlockAllocator(10, 1).blocksFor(7)).toBe(7);
  });
});

describe('KvBlockAllocator.tryAllocate', () => {
  it('starts empty and takes blocks up to exactly the total', () => {
    const kv = new KvBlockAllocator(10, 16);
    expect([kv.usedBlocks, kv.freeBlocks, kv.totalBlocks, kv.blockSize]).toEqual([0, 10, 10, 16]);
    expect(kv.tryAllocate(4)).toBe(true);
    expect(kv.tryAllocate(6)).toBe(true);
    expect([kv.usedBlocks, kv.freeBlocks]).toEqual([10, 0]);
  });

  it('takes nothing when fewer blocks are free than asked for', () => {
    const kv = new KvBlockAllocator(10, 16);
    kv.tryAllocate(7);
    expect(kv.tryAllocate(4)).toBe(false);
    expect(kv.usedBlocks).toBe(7);
    expect(kv.tryAllocate(3)).toBe(true);
  });

  it("refuses a negative count, which would free blocks behind the caller's back", () => {
    const kv = new KvBlockAllocator(10, 16);
    kv.tryAllocate(5);
    expect(kv.tryAllocate(-1)).toBe(false);
    expect(kv.usedBlocks).toBe(5);
  });

  it('grants zero blocks even when full', () => {
    const kv = new KvBlockAllocator(1, 16);
    kv.tryAllocate(1);
    expect(kv.tryAllocate(0)).toBe(true);
    expect(kv.usedBlocks).toBe(1);
  });
});

describe('KvBlockAllocator.free', () => {
  it('returns blocks to the pool', () => {
    const kv = new KvBlockAllocator(10, 16);
    kv.tryAllocate(8);
    kv.free(3);
    expect([kv.usedBlocks, kv.freeBlocks]).toEqual([5, 5]);
    kv.free(5);
    expect(kv.usedBlocks).toBe(0);
  });

  it('throws a RangeError naming both counts when freeing more than is in use, and changes nothing', () => {
    const kv = new KvBlockAllocator(10, 16);
    kv.tryAllocate(2);
    expect(() => kv.free(3)).toThrow(new RangeError('freeing 3 blocks with 2 in use'));
    expect(() => kv.free(-1)).toThrow(RangeError);
    expect(kv.usedBlocks).toBe(2);
  });

  it('keeps 0 <= used <= total through a long random sequence, matching a reference count', () => {
    const kv = new KvBlockAllocator(50, 16);
    const random = mulberry32(3);
    let reference = 0;
    for (let step = 0; step < 2000; step++) {
      const count = Math.floor(random() * 20) - 2;
      if (random() < 0.5) {
        const ok = kv.tryAllocate(count);
        expect(ok).toBe(count >= 0 && reference + count <= 50);
        if (ok) reference += count;
      } else if (count >= 0 && count <= reference) {
        kv.free(count);
        reference -= count;
      } else {
        expect(() => kv.free(count)).toThrow(RangeError);
      }
      expect(kv.usedBlocks).toBe(reference);
      expect(kv.freeBlocks).toBe(50 - reference);
    }
  });
});
