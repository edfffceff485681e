import { createServer, type AddressInfo, type Socket } from 'node:net';
import { inject } from 'vitest';
import { relayConnection } from '../bench/common.js';
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

/** A loopback TCP relay in front of a PostgreSQL server: `cut()` makes the server unreachable, as an outage would. */
export interface Relay {
  /** The port that reaches the server while the relay is up. */
  port: number;
  /** Close every connection through it and refuse new ones (ECONNREFUSED). */
  cut(): Promise<void>;
  /** Take connections again, on the same port. */
  restore(): Promise<void>;
}

/** A relay to the PostgreSQL server of `url` (its host and port), removed at `cleanup`. */
export async function relayTo(url: string): Promise<Relay & { cleanup: () => Promise<void> }> {
  const target = new URL(url);
  const sockets = new Set<Socket>();
  const server = createServer((down) => void relayConnection(down, target.hostname, Number(target.port || 5432), sockets));
  const listen = (port: number): Promise<void> => new Promise((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
  await listen(0);
  const port = (server.address() as AddressInfo).port;
  const cut = (): Promise<void> =>
    new Promise((resolve) => {
      if (!server.listening) return resolve();
      server.close(() => resolve());
      for (const s of sockets) s.destroy();
    });
  return { port, cut, restore: () => listen(port), cleanup: cut };
}
