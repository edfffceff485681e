/** A counting semaphore: at most `size` holders at once. */
export class Semaphore {
  private free: number;
  private readonly waiting: Array<() => void> = [];
  constructor(size: number) {
    this.free = size;
  }
  /** Resolve with a release function once a slot is free. */
  async acquire(): Promise<() => void> {
    if (this.free > 0) {
      this.free--;
    } else {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    };
  }
}

/** Run `fn` over `items` with at most `limit` at once, starting none once `stopped()`; returns how many were started. */
export async function mapLimit<T>(items: readonly T[], limit: number, fn: (t: T) => Promise<void>, stopped: () => boolean = () => false): Promise<number> {
  let i = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (i < items.length && !stopped()) await fn(items[i++]!);
  });
  await Promise.all(workers);
  return i;
}
