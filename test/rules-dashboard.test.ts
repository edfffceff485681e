import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser } from './browser.js';
import { startWorld, type World } from './harness.js';

let browser: Browser;
let world: World | undefined;
beforeAll(async () => {
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await world?.close();
});

describe('the dashboard and shadow rules', () => {
  it('shows a shadow rule\'s event in the live list with a shadow badge, and a live one without', async () => {
    world = await startWorld({ config: { server: { listen: '127.0.0.1:0' } } });
    const rules = join(world.dir, 'shadow.yaml');
    writeFileSync(rules, 'rules:\n  - { name: site-offline, mode: shadow }\n');
    const app = await world.app({ rules: [rules] });
    await app.start();
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(e.message));
    await page.goto(`${app.serverUrl!}/`);
    await page.locator('#status.live').waitFor();
    world.sim.world.setHealth(1, { status: 'offline' });
    world.sim.world.setHealth(2, { status: 'slow' });
    await app.runOnce();
    const offline = page.locator('#events tbody tr', { hasText: 'site.offline' }).first();
    await offline.locator('.badge.shadow').waitFor();
    const slow = page.locator('#events tbody tr', { hasText: 'site.slow' }).first();
    await slow.waitFor();
    expect(await slow.locator('.badge.shadow').count()).toBe(0);
    expect(problems).toEqual([]);
    await page.close();
  }, 60_000);
});
