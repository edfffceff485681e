import { inject } from 'vitest';
import { createDatabase } from '../bench/postgres-server.js';
import type { StorageConfig } from '../src/config/types.js';
import { tempDir } from './harness.js';

/** The two storage engines; tests that must hold on both run once per engine. */
export const ENGINES = ['sqlite', 'postgres'] as const;
export type Engine = (typeof ENGINES)[number];

/**
 * A fresh, empty database of an engine: a SQLite file in a new temporary folder, or a new
 * PostgreSQL database (CREATE DATABASE) on the test server (see global-setup.ts). `cleanup`
 * removes it again.
 */
export async function freshStorage(engine: Engine): Promise<{ storage: StorageConfig; cleanup: () => Promise<void> }> {
  if (engine === 'sqlite') {
    const tmp = tempDir();
    return { storage: { engine, path: `${tmp.dir}/hostwatch.db` }, cleanup: async () => tmp.cleanup() };
  }
  const db = await createDatabase(inject('pgUrl'));
  return { storage: { engine, url: db.url }, cleanup: db.drop };
}
