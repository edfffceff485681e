/**
 * EntityTable: what the poller and the fetcher keep per entity (heads, validators), in
 * rows per site shared by every source and by name for records and the account's entities.
 */
import { describe, expect, it } from 'vitest';
import { EntityTable } from '../src/sources/entity-table.js';
import { cronRunsSource } from '../src/sources/families/cron.js';
import { entityOf, healthSource, sitesSource, usageSource } from '../src/sources/registry.js';

const site = (id: number) => ({ id, domain: `site-${id}.example.com` });
const health = (id: number) => entityOf(healthSource, site(id));
const usage = (id: number) => entityOf(usageSource, site(id));
const runs = (id: number, job: string) => entityOf(cronRunsSource, site(id), job);
const account = entityOf(sitesSource, null);

describe('EntityTable', () => {
  it('keeps one value per entity, apart for each source, each site, each record and the account', () => {
    const t = new EntityTable<string>();
    t.set(health(1), 'h1');
    t.set(health(2), 'h2');
    t.set(usage(1), 'u1');
    t.set(runs(1, '7'), 'r1/7');
    t.set(runs(1, '8'), 'r1/8');
    t.set(account, 'sites');
    expect([t.get(health(1)), t.get(health(2)), t.get(usage(1)), t.get(usage(2))]).toEqual(['h1', 'h2', 'u1', undefined]);
    expect([t.get(runs(1, '7')), t.get(runs(1, '8')), t.get(runs(2, '7')), t.get(account)]).toEqual(['r1/7', 'r1/8', undefined, 'sites']);
    t.set(health(1), 'h1 again');
    t.delete(health(2));
    t.delete(runs(1, '8'));
    expect([t.get(health(1)), t.get(health(2)), t.get(runs(1, '8'))]).toEqual(['h1 again', undefined, undefined]);
  });

  it('forgets every value of the sites that left, records included, and nothing of the others', () => {
    const t = new EntityTable<string>();
    for (const id of [1, 2, 3]) {
      t.set(health(id), `h${id}`);
      t.set(usage(id), `u${id}`);
      t.set(runs(id, '7'), `r${id}`);
    }
    t.forgetSites([2, 3]);
    expect([1, 2, 3].map((id) => [t.get(health(id)), t.get(usage(id)), t.get(runs(id, '7'))])).toEqual([
      ['h1', 'u1', 'r1'],
      [undefined, undefined, undefined],
      [undefined, undefined, undefined],
    ]);
  });

  it('gives the row of a forgotten site to a new site, which starts with no values', () => {
    const t = new EntityTable<string>();
    t.set(health(1), 'h1');
    t.set(usage(1), 'u1');
    t.set(health(2), 'h2');
    t.forgetSites([1]);
    t.set(health(3), 'h3');
    expect([t.get(health(3)), t.get(usage(3)), t.get(health(1)), t.get(usage(1)), t.get(health(2))]).toEqual(['h3', undefined, undefined, undefined, 'h2']);
  });

  it('forgets only the sources named for those sites, and every value of a source forgotten whole', () => {
    const t = new EntityTable<string>();
    for (const id of [1, 2]) {
      t.set(health(id), `h${id}`);
      t.set(usage(id), `u${id}`);
      t.set(runs(id, '7'), `r${id}`);
    }
    t.forgetSites([1], new Set([healthSource.name, cronRunsSource.name]));
    expect([t.get(health(1)), t.get(usage(1)), t.get(runs(1, '7')), t.get(health(2)), t.get(runs(2, '7'))]).toEqual([undefined, 'u1', undefined, 'h2', 'r2']);
    // The site keeps its row: its other sources' values are still there after more sites come.
    t.set(health(3), 'h3');
    t.set(health(1), 'h1 back');
    expect([t.get(health(1)), t.get(usage(1)), t.get(health(3))]).toEqual(['h1 back', 'u1', 'h3']);
    t.forgetSource(usageSource.name);
    expect([t.get(usage(1)), t.get(usage(2)), t.get(health(2))]).toEqual([undefined, undefined, 'h2']);
  });
});
