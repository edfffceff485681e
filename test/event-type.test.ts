/**
 * resolveEventType: the one way a type filter (`/api/events?type=`, the stream, `hostwatch
 * events --type`) becomes a CloudEvents type, resolved against the names hostwatch knows.
 */
import { describe, expect, it } from 'vitest';
import { CATALOG, knownEventNames } from '../src/events/catalog.js';
import { resolveEventType } from '../src/events/envelope.js';
import { OPERATOR_EVENT_NAMES } from '../src/events/operator.js';

describe('resolveEventType', () => {
  const known = knownEventNames([{ event: 'hostwatch.custom_check' }, { event: 'shop.order_failed' }]);

  it('takes every catalog and operator event by its name and by its type, names starting with hostwatch. included', () => {
    const names = [...CATALOG, ...OPERATOR_EVENT_NAMES];
    // The names the prefix alone would misread: their type is `hostwatch.hostwatch.…`.
    expect(names.filter((n) => n.startsWith('hostwatch.'))).toContain('hostwatch.watchdog');
    for (const name of names) {
      expect(resolveEventType(name, known), name).toEqual({ ok: true, type: `hostwatch.${name}` });
      expect(resolveEventType(`hostwatch.${name}`, known), name).toEqual({ ok: true, type: `hostwatch.${name}` });
    }
    expect(resolveEventType('hostwatch.watchdog', known)).toEqual({ ok: true, type: 'hostwatch.hostwatch.watchdog' });
  });

  it('takes the events of the rules, one named hostwatch.… included', () => {
    expect(resolveEventType('hostwatch.custom_check', known)).toEqual({ ok: true, type: 'hostwatch.hostwatch.custom_check' });
    expect(resolveEventType('hostwatch.hostwatch.custom_check', known)).toEqual({ ok: true, type: 'hostwatch.hostwatch.custom_check' });
    expect(resolveEventType('shop.order_failed', known)).toEqual({ ok: true, type: 'hostwatch.shop.order_failed' });
  });

  it('names the nearest known event for a misspelt name or type, and refuses text that is no event type', () => {
    expect(resolveEventType('site.offlin', known)).toEqual({
      ok: false,
      problem: 'unknown',
      near: 'site.offline',
      message: 'no event is named site.offlin; did you mean site.offline? (docs/events.md lists them)',
    });
    expect(resolveEventType('hostwatch.site.offlin', known)).toMatchObject({ ok: false, problem: 'unknown', near: 'site.offline' });
    expect(resolveEventType('hostwatch.watchdg', known)).toMatchObject({ ok: false, problem: 'unknown', near: 'hostwatch.watchdog' });
    expect(resolveEventType('nothing.like_this_at_all', known)).toMatchObject({ ok: false, problem: 'unknown', near: null });
    expect(resolveEventType('watchdog', known)).toMatchObject({ ok: false, problem: 'shape' });
    expect(resolveEventType('Site Offline', known)).toMatchObject({ ok: false, problem: 'shape' });
  });
});
