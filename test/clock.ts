/** A clock tests move by hand: every part of the app reads time through `now`. */
export interface TestClock {
  now: () => number;
  t: number;
  advance(ms: number): void;
}

/** A clock starting at `startIso`. */
export function testClock(startIso = '2026-11-21T00:00:00Z'): TestClock {
  const c: TestClock = {
    t: Date.parse(startIso),
    now: () => c.t,
    advance(ms) {
      c.t += ms;
    },
  };
  return c;
}
