import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { compileRouter } from '../src/notify/routing.js';
import { packageRoot } from '../src/paths.js';
import { freshAlert, stepAlert } from '../src/rules/evaluate.js';
import { loadRules, parseRuleFile, RuleErrors } from '../src/rules/parse.js';
import { Replay } from '../src/rules/replay.js';
import type { CompiledRule, RuleError } from '../src/rules/types.js';
import { healthSource, sourceByName, usageSource } from '../src/sources/registry.js';
import { isCelError } from '@bufbuild/cel';
import { celTimestamp, compileCel } from '../src/cel.js';

const BUILTIN = join(packageRoot(), 'rules');
const opts = { sourceNames: SOURCE_NAMES, cwd: packageRoot() };
const MIN = 60_000;

/** The built-in rules plus the rules in `yaml` (a rule file's text). */
function rulesWith(yaml: string): CompiledRule[] {
  const byName = new Map(loadRules(BUILTIN, [], opts).map((r) => [r.name, r]));
  const errors: RuleError[] = [];
  parseRuleFile(yaml, 'inline.yaml', opts, byName, errors);
  if (errors.length) throw new RuleErrors(errors);
  return [...byName.values()];
}

/** A replay of rule `name` alone, as defined in `yaml` over the built-in rules. */
const replayOf = (name: string, yaml: string): Replay => new Replay(rulesWith(yaml).filter((x) => x.name === name));

const health = (status: string, label = status): unknown => ({ site_id: 1, online: { status, label }, integrity: { status: 'ok', problems: 0 } });
const usage = (percent: number): unknown => ({ site_id: 1, frozen: false, over: [], disk: { used_mib: percent * 10, limit_mib: 1000, percent, over: false } });

describe('the alert state machine', () => {
  const rule = rulesWith('rules:\n  - { name: site-offline, for: 5m, keep_firing_for: 2m }\n').find((r) => r.name === 'site-offline')!;

  it('waits `for` before firing, and a false reading in between restarts the wait', () => {
    let s = stepAlert(rule, true, null, 0);
    expect(s).toMatchObject({ emit: null, changed: true, state: { pending_since: 0 } });
    s = stepAlert(rule, false, s.state, 4 * MIN);
    expect(s).toMatchObject({ emit: null, changed: true, state: { pending_since: null } });
    s = stepAlert(rule, true, s.state, 5 * MIN);
    expect(s.state.pending_since).toBe(5 * MIN);
    expect(stepAlert(rule, true, s.state, 9 * MIN)).toMatchObject({ emit: null, changed: false });
    expect(stepAlert(rule, true, s.state, 10 * MIN)).toMatchObject({ emit: 'firing', state: { status: 'firing', seq: 1, since: 10 * MIN } });
  });

  it('keeps firing for `keep_firing_for` after the condition turns false', () => {
    const firing = { ...freshAlert(0), status: 'firing' as const, seq: 1 };
    const a = stepAlert(rule, false, firing, MIN);
    expect(a).toMatchObject({ emit: null, state: { clear_since: MIN } });
    expect(stepAlert(rule, true, a.state, 2 * MIN)).toMatchObject({ emit: null, changed: true, state: { clear_since: null } });
    expect(stepAlert(rule, false, a.state, 3 * MIN)).toMatchObject({ emit: 'resolved', state: { status: 'resolved', seq: 1 } });
  });

  it('resolves at once when the record is gone, whatever keep_firing_for says', () => {
    const firing = { ...freshAlert(0), status: 'firing' as const, seq: 1 };
    expect(stepAlert(rule, false, firing, MIN, true).emit).toBe('resolved');
  });
});

describe('hysteresis', () => {
  it('fires at >= 90 and resolves only below 85 with resolve_when', () => {
    const rules = rulesWith('rules:\n  - { name: usage-disk-high, params: { resolve_below: 85 } }\n');
    const r = new Replay(rules);
    const seen: string[] = [];
    [80, 90, 88, 89.5, 86, 84.9, 89, 90].forEach((p, i) => {
      for (const e of r.observe(usageSource, 'sites/1/usage', 1, i * MIN, usage(p)).events) seen.push(`${p}:${e.data.status}`);
    });
    expect(seen).toEqual(['90:firing', '84.9:resolved', '90:firing']);
  });

  it('without resolve_below the same input flaps, which is what hysteresis is for', () => {
    const r = new Replay(loadRules(BUILTIN, [], opts));
    const seen: string[] = [];
    [80, 90, 88, 90, 89].forEach((p, i) => {
      for (const e of r.observe(usageSource, 'sites/1/usage', 1, i * MIN, usage(p)).events) seen.push(`${p}:${e.data.status}`);
    });
    expect(seen).toEqual(['90:firing', '88:resolved', '90:firing', '89:resolved']);
  });
});

describe('rate of change', () => {
  it('compares with the last reading (before) by N or N%', () => {
    const r = replayOf('disk-jump', `rules:
  - name: disk-jump
    event: usage.disk_jump
    kind: change
    source: usage
    params: { points: 5.0, percent: 10.0 }
    when: "before != null && (after.disk.percent - before.disk.percent >= params.points || (after.disk.percent - before.disk.percent) * 100.0 / before.disk.percent >= params.percent)"
    summary: "disk {{ before.disk.percent }}% -> {{ after.disk.percent }}%"
`);
    const out = [10, 12, 13.5, 20, 22, 23].flatMap((p, i) => r.observe(usageSource, 'sites/1/usage', 1, i * MIN, usage(p)).events.map((e) => e.data.summary));
    // 10→12 is +20% (≥10%), 12→13.5 is +12.5%, 13.5→20 is +6.5 points, 20→22 is +10%, 22→23 is +4.5%.
    expect(out).toEqual(['disk 10% -> 12%', 'disk 12% -> 13.5%', 'disk 13.5% -> 20%', 'disk 20% -> 22%']);
  });

  it('compares over a window with `past`, the reading as it was that long ago', () => {
    const r = replayOf('disk-growth', `rules:
  - name: disk-growth
    event: usage.disk_growth
    kind: alert
    source: usage
    window: 1h
    when: "past != null && after.disk.percent - past.disk.percent >= 10.0"
    summary: "{{ domain }} disk grew from {{ past.disk.percent }}% to {{ after.disk.percent }}% in an hour"
`);
    r.knowSites([{ id: 1, domain: 'a.example' }]);
    const steps: Array<[number, number]> = [[0, 50], [20, 53], [40, 56], [60, 59], [80, 63], [100, 64], [160, 64]];
    const got = steps.flatMap(([m, p]) => r.observe(usageSource, 'sites/1/usage', 1, m * MIN, usage(p)).events.map((e) => `${m}m ${e.data.status} ${e.data.summary}`));
    // At 60m the reading of 0m (50%) is an hour old: +9, no. At 80m it is 53% (20m): +10, fires.
    // At 100m the reading an hour before is 56% (40m): +8, resolves. 160m: +0 again, nothing.
    expect(got).toEqual(['80m firing a.example disk grew from 53% to 63% in an hour', '100m resolved a.example disk grew from 56% to 64% in an hour']);
  });
});

describe('one-shot events with a dedup_key', () => {
  const WENT_OFFLINE = `rules:
  - name: went-offline
    event: site.went_offline
    kind: change
    source: health
    when: "before != null && after.online.status == 'offline' && before.online.status != 'offline'"
    dedup_key: "after.online.label"
    summary: "{{ domain }} went offline: {{ after.online.label }}"
`;

  it('are made once per key value: the same value again gets the same id, which the replay (like the event store) keeps once', () => {
    const r = replayOf('went-offline', WENT_OFFLINE);
    const ids = (['online', 'offline:Timeout', 'online', 'offline:DNS', 'online', 'offline:Timeout'] as const).map((s, i) => {
      const [status, label] = s.split(':');
      return r.observe(healthSource, 'sites/1/health', 1, i * MIN, health(status!, label ?? status)).events.map((e) => e.id);
    });
    expect(ids[1]).toHaveLength(1);
    expect(ids[3]).toHaveLength(1);
    expect(ids[3]).not.toEqual(ids[1]);
    // Timeout again: the same id as step 1's, which the event store keeps once, so it is sent once.
    expect(ids[5]).toEqual([]);
    // A replay that has not made step 1's event makes it with that same id.
    const fresh = replayOf('went-offline', WENT_OFFLINE);
    fresh.observe(healthSource, 'sites/1/health', 1, 0, health('online', 'online'));
    expect(fresh.observe(healthSource, 'sites/1/health', 1, MIN, health('offline', 'Timeout')).events.map((e) => e.id)).toEqual(ids[1]);
  });
});

describe('labels, descriptions and shadow marks', () => {
  it('put labels and the description in the event data, and routes match on labels', () => {
    const rules = rulesWith('rules:\n  - { name: site-offline, labels: { team: web } }\n');
    const r = new Replay(rules);
    r.knowSites([{ id: 1, domain: 'a.example' }]);
    const [e] = r.observe(healthSource, 'sites/1/health', 1, 0, health('offline', 'Offline')).events;
    expect(e!.data['labels']).toEqual({ category: 'availability', team: 'web' });
    expect(e!.data['description']).toBe('The health check of a.example (site 1) reports it offline (Offline). Visitors cannot reach the site.');
    const router = compileRouter(
      [
        { match: "labels.team == 'web'", channels: ['web'], continue: false, group_by: [], group_wait_ms: 0, group_interval_ms: 0, send_resolved: true },
        { match: null, channels: ['ops'], continue: false, group_by: [], group_wait_ms: 0, group_interval_ms: 0, send_resolved: true },
      ],
      [{ name: 'web', type: 'console' }, { name: 'ops', type: 'console' }],
    );
    expect(router(e!)).toEqual(['web']);
  });

  it('mark events of a shadow rule with data.shadow', () => {
    const r = new Replay(rulesWith('rules:\n  - { name: site-offline, mode: shadow }\n'));
    const [e] = r.observe(healthSource, 'sites/1/health', 1, 0, health('offline')).events;
    expect(e!.data['shadow']).toBe(true);
  });

  it('render templates strictly: a field the data lacks falls back to the plain summary, and is reported', () => {
    const r = replayOf('typo', `rules:
  - name: typo
    event: site.typo
    kind: alert
    source: health
    when: "true"
    summary: "{{ after.onlin.status }} is here"
    description: "{{ after.online.nope }}"
`);
    const out = r.observe(healthSource, 'sites/1/health', 1, 0, health('online'));
    expect(out.events[0]!.data.summary).toBe('site.typo on sites/1/health');
    expect(out.events[0]!.data['description']).toBeUndefined();
    expect(out.problems).toEqual([
      'rule typo: summary template: undefined variable: after.onlin, line:1, col:4',
      'rule typo: description template: undefined variable: after.online.nope, line:1, col:4',
    ]);
  });

  it('refuse, when loading, a template variable no template has, naming the near miss (check reports it before run)', () => {
    expect(() =>
      replayOf('typo', `rules:
  - name: typo
    event: site.typo
    kind: alert
    source: health
    when: "true"
    summary: "{{ domian }} is {{ after.online.status }}"
    description: "{% for c in changes %}{{ c.path }}{% endfor %} {{ stauts }}"
`),
    ).toThrow(
      'rules[0].summary: unknown template variable "domian" (did you mean domain?); a template sees event, subject, site_id, domain, before, after, past, changes, params, labels, status',
    );
  });
});

describe('time in CEL: now and its helpers', () => {
  const run = (expr: string, now = '2026-11-21T14:00:00Z', bindings: Record<string, unknown> = {}): unknown => {
    const out = compileCel(expr)({ now: celTimestamp(Date.parse(now)), ...bindings });
    return isCelError(out) ? `error: ${out.message}` : out;
  };

  it('compares now with API timestamps and dates; duration() takes days; glob() matches domains', () => {
    expect(run("now - timestamp('2026-11-20T10:00:00Z') > duration('26h')")).toBe(true);
    expect(run("now - timestamp('2026-11-20T13:00:00Z') > duration('1d1h')")).toBe(false);
    expect(run("date('2026-12-05') - now <= duration('14d')")).toBe(true);
    expect(run("date('2026-12-06') - now <= duration('14d')")).toBe(false);
    expect(run("duration('1.5h') == duration('90m') && duration('-1h') < duration('0')")).toBe(true);
    expect(run("glob('Shop.ACME.com', '*.acme.com') && !glob('acme.com', '*.acme.com') && glob('a1.x', 'a?.x')")).toBe(true);
  });

  it('a null or malformed time is an error (unknown), never a silent false or zero', () => {
    expect(run('now - timestamp(t) > duration(\'1h\')', undefined, { t: null })).toMatch(/^error: /);
    expect(run("date('2026-02-31') < now")).toBe('error: date() needs YYYY-MM-DD or an RFC 3339 time (got "2026-02-31")');
    expect(run("duration('soon')")).toBe('error: invalid duration "soon" (like 30s, 90m, 26h or 14d)');
  });

  it('a rule reads the clock only if an expression names now; only such rules (and absence rules) take every', () => {
    const rules = rulesWith(`rules:
  - { name: clock-a, event: x.a, kind: alert, source: backups, when: "now > timestamp(after.created_at)", every: 5m }
  - { name: plain-b, event: x.b, kind: alert, source: backups, when: "after.state == 'nowhere'" }
  - { name: absent-c, event: x.c, kind: alert, source: backups, absent: { match: "true", time: item.created_at, for: 1h } }
`);
    const by = (n: string): CompiledRule => rules.find((r) => r.name === n)!;
    expect([by('clock-a').clock, by('clock-a').everyMs]).toEqual([true, 5 * MIN]);
    expect([by('plain-b').clock, by('plain-b').everyMs]).toEqual([false, MIN]);
    expect([by('absent-c').clock, by('absent-c').when]).toEqual([true, 'true']);
  });
});

describe('absence rules', () => {
  const yaml = `rules:
  - name: no-restore-point
    event: hourly.no_point
    kind: alert
    source: hourly_backups
    when: "after.active == true"
    absent: { in: "after.backups", match: "item.database == true", time: "item.taken_at", for: 2h }
    summary: "{% if status == 'resolved' %}ok{% else %}none since {{ absence.last | default: 'ever' }} ({{ absence.matches }} matching){% endif %}"
`;
  const hourly = (points: Array<{ taken_at: string; database: boolean }>, active = true): unknown => ({ active, backups: points });

  it('look in a list the `in` expression names, hold only while the when guard does, and resolve when a match appears', () => {
    const replay = replayOf('no-restore-point', yaml);
    const src = sourceByName('hourly_backups')!;
    const t0 = Date.parse('2026-11-21T10:00:00Z');
    const at = (h: number): number => t0 + h * 60 * MIN;
    const step = (h: number, v: unknown): string[] => replay.observe(src, 'sites/1/hourly_backups', 1, at(h), v).events.map((e) => `${e.data.status} ${e.data.summary}`);
    const tick = (h: number): string[] => (replay.tick(src, 'sites/1/hourly_backups', 1, at(h))?.events ?? []).map((e) => `${e.data.status} ${e.data.summary}`);
    const points = [{ taken_at: '2026-11-21T09:30:00Z', database: true }, { taken_at: '2026-11-21T10:30:00Z', database: false }];
    expect(step(0, hourly(points))).toEqual([]);
    expect(tick(1)).toEqual([]);
    expect(tick(1.6)).toEqual(['firing none since 2026-11-21T09:30:00.000Z (1 matching)']);
    // Hourly backups switched off: the guard is false, so it resolves.
    expect(step(2, hourly(points, false))).toEqual(['resolved ok']);
    expect(step(3, hourly([...points, { taken_at: '2026-11-21T12:59:00Z', database: true }]))).toEqual([]);
  });

  it('a matching record without a readable time makes it unknown: nothing fires', () => {
    const replay = replayOf('no-restore-point', yaml);
    const src = sourceByName('hourly_backups')!;
    const plan = replay.observe(src, 'sites/1/hourly_backups', 1, Date.parse('2026-11-22T00:00:00Z'), hourly([{ taken_at: 'yesterday', database: true } as never]));
    expect(plan.events).toEqual([]);
    expect(plan.problems).toEqual(['rule no-restore-point on sites/1/hourly_backups: absent.time: a matching record has no readable time (item.taken_at)']);
  });
});
