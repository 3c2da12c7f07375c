/**
 * KV block allocator. Only counts blocks: the simulation never needs block identities, and
 * a counter makes "used <= total" trivially exact. Sequences record how many they hold.
 */
export class KvBlockAllocator {
  private used = 0;

  constructor(
    readonly totalBlocks: number,
    readonly blockSize: number,
  ) {}

  get usedBlocks(): number {
    return this.used;
  }

  get freeBlocks(): number {
    return this.totalBlocks - this.used;
  }

  /** Blocks needed to hold `tokens` tokens of KV. */
  blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSize);
  }

  /** Takes `count` blocks if that many are free; all or nothing. */
  tryAllocate(count: number): boolean {
    if (count < 0 || count > this.freeBlocks) return false;
    this.used += count;
    return true;
  }

  free(count: number): void {
    if (count < 0 || count > this.used) throw new RangeError(`freeing ${count} blocks with ${this.used} in use`);
    this.used -= count;
  }
}
