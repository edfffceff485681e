/**
 * The Timekeeper ticks every second; while the database is down each tick fails. Its log
 * says so once, not every second, and once more when a tick works again.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { Reevaluator } from '../src/pipeline/reevaluate.js';
import { Timekeeper } from '../src/scheduler/timekeeper.js';
import { LogCollector } from './harness.js';

describe('the timekeeper', () => {
  it('says once that its ticks fail while the database is down, and once that they work again', async () => {
    const logs = new LogCollector();
    let down = true;
    const reevaluator = {
      run: async () => {
        if (down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
        return { rules: [], entities: 0, events: 0, sources: new Set<string>() };
      },
    } as unknown as Reevaluator;
    const tk = new Timekeeper({ reevaluator, log: pino({ level: 'debug' }, logs) });
    for (let i = 0; i < 20; i++) await tk.tick();
    down = false;
    for (let i = 0; i < 3; i++) await tk.tick();
    const lines = logs.lines.map((l) => JSON.parse(l) as { level: number; msg: string; err?: string });
    const errors = lines.filter((l) => l.level >= 50);
    expect(errors).toEqual([expect.objectContaining({ msg: 'timekeeper tick failed; said once until a tick works again', err: 'Error: connect ECONNREFUSED 127.0.0.1:5432' })]);
    // The other 19 at debug (not shown at the default level), then one line for the recovery.
    expect(lines.filter((l) => l.level === 20)).toHaveLength(19);
    expect(lines.filter((l) => l.level === 30).map((l) => l.msg)).toEqual(['timekeeper ticks work again']);
    // Down again: said again.
    down = true;
    await tk.tick();
    await tk.tick();
    expect(logs.lines.map((l) => JSON.parse(l) as { level: number }).filter((l) => l.level >= 50)).toHaveLength(2);
  });
});
