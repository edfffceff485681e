/**
 * Seeded randomness for the simulator. The world must be reproducible from its seed
 * (tests compare two runs), so nothing in src/simulator calls Math.random.
 */

/** mulberry32: a tiny, fast 32-bit PRNG; good enough for drift, and identical on every platform. */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Convenience draws over one mulberry32 stream, so every caller shares the same sequence. */
export class Random {
  private readonly next: () => number;

  constructor(seed: number) {
    this.next = mulberry32(seed);
  }

  /** A float in [0, 1). */
  float(): number {
    return this.next();
  }

  /** An integer in [min, max], both ends included. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** One element of a non-empty array. */
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)] as T;
  }

  /** One key of a weight table, chosen in proportion to its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const keys = Object.keys(weights) as K[];
    let total = 0;
    for (const k of keys) total += weights[k];
    let roll = this.next() * total;
    for (const k of keys) {
      roll -= weights[k];
      if (roll < 0) return k;
    }
    return keys[keys.length - 1] as K;
  }
}
