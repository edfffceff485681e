import { afterEach, describe, expect, it } from 'vitest';
import { isLoopback, parseListen, startServer } from '../src/server/server.js';
import { startWorld, type World } from './harness.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

describe('the health endpoints', () => {
  it('answer /livez, and /readyz turns 503 when the database is unavailable', async () => {
    world = await startWorld({ config: { server: { listen: '127.0.0.1:0' } } });
    const app = world.app();
    await app.start();
    const live = await fetch(`${app.serverUrl}/livez`);
    expect(live.status).toBe(200);
    const ready = await fetch(`${app.serverUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', database: true, scheduler: true });
    app.store.sqlite.close();
    const notReady = await fetch(`${app.serverUrl}/readyz`);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toMatchObject({ status: 'not ready', database: false });
    expect((await fetch(`${app.serverUrl}/livez`)).status).toBe(200);
  });

  it('report not ready once the scheduler has stopped', async () => {
    let stopped = false;
    const srv = await startServer('127.0.0.1:0', null, { databaseReady: () => true, schedulerRunning: () => !stopped });
    expect((await fetch(`${srv.url}/readyz`)).status).toBe(200);
    stopped = true;
    expect((await fetch(`${srv.url}/readyz`)).status).toBe(503);
    await srv.close();
  });
});

describe('the server', () => {
  it('refuses to listen beyond loopback without a token', async () => {
    await expect(startServer('0.0.0.0:0', null, { databaseReady: () => true, schedulerRunning: () => true })).rejects.toThrow(
      'server.listen: 0.0.0.0:0 is reachable from other machines; set server.token (a bearer token) or listen on 127.0.0.1',
    );
  });

  it('knows loopback addresses from others', () => {
    expect(['127.0.0.1', '127.3.4.5', '::1', 'localhost'].map(isLoopback)).toEqual([true, true, true, true]);
    expect(['0.0.0.0', '10.0.0.1', '::', 'example.com'].map(isLoopback)).toEqual([false, false, false, false]);
    expect(parseListen('[::1]:8080')).toEqual({ host: '::1', port: 8080 });
  });
});
