import { defineConfig } from 'vitest/config';

/**
 * `npm run chaos`: the chaos suite (chaos/*.chaos.ts), not part of `npm test`. One scenario
 * at a time (they measure the daemon, so they must not compete for the two cores), each
 * bounded by its own counts (chaos/figures.ts) and by the timeout below.
 */
export default defineConfig({
  test: {
    include: ['chaos/**/*.chaos.ts'],
    globalSetup: ['chaos/global-setup.ts'],
    testTimeout: 300_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 1,
    fileParallelism: false,
  },
});
