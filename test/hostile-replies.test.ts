/**
 * Hostile replies: a reply the pipeline cannot process is a failed poll like any other
 * (the previous snapshot stays, no change events, source.degraded counts it), never a
 * "cycle failed" that leaves the source looking healthy.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { names, rows, startWorld, type World } from './harness.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

describe('a reply nested 100,000 levels deep', () => {
  it('is a failed poll: the source state records it, the snapshot stays, and source.degraded fires after the configured failures', async () => {
    world = await startWorld({ sim: { sites: 1 }, config: { sources: { health: { every: '5m' } }, degraded: { after_failures: 2 } } });
    const app = await world.app();
    await app.runOnce();
    const before = rows<{ hash: string }>(world, "SELECT hash FROM snapshots WHERE source = 'health'");
    expect(before).toHaveLength(1);
    world.sim.faults.add({ path: '^/sites/\\d+/health$', kind: 'nested', depth: 100_000 });
    await app.runOnce();
    await app.runOnce();
    const state = rows<{ consecutive_failures: number; last_error_code: string; last_error: string }>(
      world,
      "SELECT consecutive_failures, last_error_code, last_error FROM poll_state WHERE source = 'health' AND entity != ''",
    );
    expect(state).toEqual([{ consecutive_failures: 2, last_error_code: 'bad_response', last_error: expect.stringMatching(/nested|deep|stack/i) }]);
    expect(rows(world, "SELECT hash FROM snapshots WHERE source = 'health'")).toEqual(before);
    expect(names(world.events).filter((n) => n.startsWith('source.'))).toEqual(['source.degraded:firing']);
    expect(world.logs.text).not.toContain('cycle failed');
    world.sim.faults.clear();
    await app.runOnce();
    expect(names(world.events).filter((n) => n.startsWith('source.'))).toEqual(['source.degraded:firing', 'source.degraded:resolved']);
  });
});

describe('a site list nested too deeply', () => {
  it('fails the sites poll and keeps the previous list: no site.removed, and per-site sources still poll the known sites', async () => {
    world = await startWorld({ sim: { sites: 2 } });
    const app = await world.app();
    await app.runOnce();
    const known = rows<{ site_id: number }>(world, "SELECT site_id FROM snapshots WHERE source = 'health' ORDER BY site_id").map((r) => r.site_id);
    expect(known).toHaveLength(2);
    world.sim.faults.add({ path: '^/sites$', kind: 'nested', depth: 100_000 });
    world.sim.clearRequests();
    await app.runOnce();
    expect(names(world.events)).not.toContain('site.removed');
    const sites = rows<{ consecutive_failures: number; last_error_code: string }>(world, "SELECT consecutive_failures, last_error_code FROM poll_state WHERE source = 'sites' AND entity != ''");
    expect(sites).toEqual([{ consecutive_failures: 1, last_error_code: 'bad_response' }]);
    // Both known sites' health was asked for and answered, and neither poll failed.
    const health = world.sim.requests.filter((r) => /^\/api\/v1\/sites\/\d+\/health$/.test(r.path));
    expect(health.map((r) => r.path).sort()).toEqual(known.map((id) => `/api/v1/sites/${id}/health`));
    expect(health.every((r) => r.status === 200 || r.status === 304)).toBe(true);
    expect(rows(world, "SELECT entity FROM poll_state WHERE source = 'health' AND consecutive_failures > 0")).toEqual([]);
  });
});

describe('a reply whose state field has the wrong kind', () => {
  const health = (status: string) => `{"data":{"site_id":1,"online":{"status":${status},"label":"Offline"},"integrity":{"status":"ok","problems":0,"findings":[]}}}`;

  it('is bad data when it is a number: the poll fails naming the field, and a firing site.offline stays firing', async () => {
    world = await startWorld({ sim: { sites: 1 }, config: { sources: { health: { every: '5m' } } } });
    const app = await world.app();
    world.sim.world.setHealth(1, { status: 'offline' });
    await app.runOnce();
    expect(names(world.events)).toEqual(['site.offline:firing']);
    const before = rows<{ hash: string }>(world, "SELECT hash FROM snapshots WHERE source = 'health'");
    world.sim.faults.add({ path: '^/sites/1/health$', kind: 'body', body: health('0') });
    await app.runOnce();
    const state = rows<{ last_error_code: string; last_error: string }>(world, "SELECT last_error_code, last_error FROM poll_state WHERE source = 'health' AND entity != ''");
    expect(state).toEqual([{ last_error_code: 'bad_response', last_error: '/sites/1/health: "online.status" is number, not a string' }]);
    // No "back online" for a reply that does not say so; the snapshot is the last good one.
    expect(names(world.events)).toEqual(['site.offline:firing']);
    expect(rows(world, "SELECT hash FROM snapshots WHERE source = 'health'")).toEqual(before);
    // A failure of another kind than the last one is a warning again (not only the first of a streak).
    world.sim.faults.clear();
    world.sim.faults.add({ path: '^/sites/1/health$', kind: 'body', body: health('true') });
    await app.runOnce();
    const warned = world.logs.lines.map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level === 40 && l.msg.startsWith('poll failed')).map((l) => l.msg);
    expect(warned).toEqual(['poll failed: /sites/1/health: "online.status" is number, not a string', 'poll failed: /sites/1/health: "online.status" is boolean, not a string']);
  });

  it('reads as missing when it is null (not measured, not set): stored without it, and a firing site.offline stays firing until a status says otherwise', async () => {
    world = await startWorld({ sim: { sites: 1 }, config: { sources: { health: { every: '5m' } } } });
    const app = await world.app();
    world.sim.world.setHealth(1, { status: 'offline' });
    await app.runOnce();
    world.sim.faults.add({ path: '^/sites/1/health$', kind: 'body', body: health('null') });
    await app.runOnce();
    // A successful poll: nothing failed, and the rule that reads the field says it is missing.
    expect(rows(world, "SELECT entity FROM poll_state WHERE source = 'health' AND consecutive_failures > 0")).toEqual([]);
    expect(JSON.parse(rows<{ body: string }>(world, "SELECT body FROM snapshots WHERE source = 'health'")[0]!.body).online).toEqual({ label: 'Offline' });
    expect(names(world.events)).toEqual(['site.offline:firing']);
    expect(world.logs.text).toMatch(/site-offline.*sites\/1\/health/);
    world.sim.faults.clear();
    world.sim.world.setHealth(1, { status: 'online' });
    await app.runOnce();
    expect(names(world.events)).toEqual(['site.offline:firing', 'site.offline:resolved']);
  });
});

describe('a site list with an id that is not a positive integer', () => {
  it('fails the sites poll naming the item, keeps the previous list, and requests no path made of it', async () => {
    world = await startWorld({ sim: { sites: 1 } });
    const app = await world.app();
    await app.runOnce();
    for (const id of ['-7', '1.5', '"../../cron-jobs?"', '0']) {
      world.sim.faults.clear();
      world.sim.faults.add({ path: '^/sites$', kind: 'body', body: `{"data":[{"id":1,"domain":"site-1.example.com","state":"live"},{"id":${id},"domain":"x.example"}],"has_more":false}` });
      world.sim.clearRequests();
      await app.runOnce();
      const state = rows<{ last_error: string }>(world, "SELECT last_error FROM poll_state WHERE source = 'sites' AND entity != ''");
      expect(state).toEqual([{ last_error: `/sites: item 1: "id" ${id} is not a positive integer` }]);
      // Only site 1's paths: none made of the bad id.
      expect(world.sim.requests.filter((r) => r.path.startsWith('/api/v1/sites/') && !r.path.startsWith('/api/v1/sites/1/')).map((r) => r.path)).toEqual([]);
      expect(world.sim.requests.some((r) => r.path.startsWith('/api/v1/sites/1/'))).toBe(true);
    }
    expect(names(world.events).filter((n) => n.startsWith('site.'))).toEqual([]);
  });
});

describe('a site list that comes back empty while sites are known', () => {
  it('is refused once, keeping every site and its firing alert; the next poll that says the same is taken, also by a daemon started since', async () => {
    world = await startWorld({ sim: { sites: 2 } });
    const app = await world.app();
    world.sim.world.setHealth(1, { status: 'offline' });
    await app.runOnce();
    expect(names(world.events)).toEqual(['site.offline:firing']);
    const empty = { path: '^/sites$', kind: 'body', body: '{"data":[],"has_more":false}' } as const;
    world.sim.faults.add(empty);
    await app.runOnce();
    expect(names(world.events)).toEqual(['site.offline:firing']);
    expect(rows(world, "SELECT last_error FROM poll_state WHERE source = 'sites' AND entity != ''")).toEqual([
      { last_error: '/sites: the site list came back empty although 2 sites were known; the previous list is kept until the next poll of the site list says the same' },
    ]);
    // A list with sites in between: the next empty one is refused again.
    world.sim.faults.clear();
    await app.runOnce();
    world.sim.faults.add(empty);
    await app.runOnce();
    expect(names(world.events)).toEqual(['site.offline:firing']);
    // Said twice in a row: every site is gone, also when the second poll is another process's
    // (`poll --once` from cron, a restart, another cluster member): the refusal is stored.
    await app.stop();
    const next = await world.app();
    await next.runOnce();
    expect(names(world.events).filter((n) => n === 'site.removed')).toHaveLength(2);
  });
});

describe('a backup list that comes back empty while backups are held', () => {
  it('is refused once, so the backups are not announced again as new when the list is back; the next poll that says the same is taken', async () => {
    world = await startWorld({ sim: { sites: 1 } });
    const app = await world.app();
    await app.runOnce();
    const held = world.sim.world.getBackups(1)!.length;
    expect(held).toBeGreaterThan(1);
    const stored = (): unknown[] => JSON.parse(rows<{ body: string }>(world!, "SELECT body FROM snapshots WHERE source = 'backups'")[0]!.body) as unknown[];
    const empty = { path: '^/sites/1/backups$', kind: 'body', body: '{"data":[],"next_cursor":null,"has_more":false}' } as const;
    world.sim.faults.add(empty);
    await app.runOnce();
    expect(rows(world, "SELECT last_error FROM poll_state WHERE source = 'backups' AND entity != ''")).toEqual([
      { last_error: `/sites/1/backups: the list came back empty although it held ${held} records; the previous list is kept until the next poll says the same` },
    ]);
    expect(stored()).toHaveLength(held);
    // The list is back: nothing was removed, so nothing is new (it announced every backup as completed).
    world.sim.faults.clear();
    await app.runOnce();
    expect(names(world.events).filter((n) => n.startsWith('backup.'))).toEqual([]);
    // Said twice in a row, it is taken.
    world.sim.faults.add(empty);
    await app.runOnce();
    await app.runOnce();
    expect(stored()).toEqual([]);
    expect(rows(world, "SELECT consecutive_failures FROM poll_state WHERE source = 'backups' AND entity != ''")).toEqual([{ consecutive_failures: 0 }]);
  });
});
