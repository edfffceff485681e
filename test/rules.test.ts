import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compileDiffOptions } from '../src/diff/index.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { packageRoot } from '../src/paths.js';
import { planEvents, sourceRules, type PlanInput } from '../src/pipeline/plan.js';
import { check, freshAlert, stepAlert } from '../src/rules/evaluate.js';
import { loadRules, RuleErrors } from '../src/rules/parse.js';
import { healthSource, backupsSource } from '../src/sources/registry.js';
import type { AlertRow } from '../src/store/alerts-repo.js';

const BUILTIN = join(packageRoot(), 'rules');
const FIXTURES = join(packageRoot(), 'test/fixtures/rules');
const opts = { sourceNames: SOURCE_NAMES, cwd: packageRoot() };

function errorsOf(fixture: string): string[] {
  try {
    loadRules(BUILTIN, [join(FIXTURES, fixture)], opts);
  } catch (e) {
    if (e instanceof RuleErrors) return e.message.split('\n');
    throw e;
  }
  throw new Error(`${fixture} loaded without errors`);
}

describe('the built-in rule packs', () => {
  it('load, and cover every catalog event of the foundation sources (test/catalog.test.ts covers the rest)', () => {
    const rules = loadRules(BUILTIN, [], opts);
    expect(rules.map((r) => r.event).sort()).toEqual(
      expect.arrayContaining([
        'backup.completed',
        'backup.failed',
        'job.completed',
        'job.failed',
        'site.added',
        'site.frozen',
        'site.integrity_problems',
        'site.offline',
        'site.removed',
        'site.slow',
        'usage.disk_high',
        'usage.over_limit',
      ]),
    );
  });
});

describe('a rule file with an error is refused with file, line and reason', () => {
  const cases: Array<[string, string[]]> = [
    ['bad-cel.yaml', ['test/fixtures/rules/bad-cel.yaml:6: rules[0].when: CEL error: <input>:1:21: found = but expecting end of input']],
    [
      // Planned as written, these fail at every evaluation: the rule would never fire.
      'unknown-variable.yaml',
      [
        'test/fixtures/rules/unknown-variable.yaml:6: rules[0].when: uses unknown variable "aftr" (did you mean after?); a rule\'s expressions can use before, after, past, changes, site, now, params, subject',
        'test/fixtures/rules/unknown-variable.yaml:7: rules[0].resolve_when: uses unknown variable "item"; a rule\'s expressions can use before, after, past, changes, site, now, params, subject (item only in absent.match and absent.time)',
      ],
    ],
    [
      'unknown-function.yaml',
      [
        'test/fixtures/rules/unknown-function.yaml:6: rules[0].when: calls unknown function "startswith" (did you mean startsWith?)',
        'test/fixtures/rules/unknown-function.yaml:6: rules[0].when: calls unknown function "frobnicate"',
      ],
    ],
    [
      // duration(params.x) cannot read these: the rule would never fire.
      'bad-duration-param.yaml',
      [
        'test/fixtures/rules/bad-duration-param.yaml:3: rules[0].params.after: must be a duration like the default ("3h"): 30s, 90m, 26h or 14d (got "5x")',
        'test/fixtures/rules/bad-duration-param.yaml:8: rules[1].params.ahead: must be a duration like 30s, 90m, 26h or 14d, as duration(params.ahead) reads it (got "30x")',
      ],
    ],
    ['unknown-source.yaml', [`test/fixtures/rules/unknown-source.yaml:5: rules[0].source: must be one of ${SOURCE_NAMES.join(', ')} (got "healt")`]],
    ['bad-kind.yaml', ['test/fixtures/rules/bad-kind.yaml:4: rules[0].kind: must be one of change, alert (got "level")']],
    ['bad-template.yaml', ['test/fixtures/rules/bad-template.yaml:7: rules[0].summary: template error: undefined filter: nosuchfilter, line:1, col:1']],
    ['duplicate-name.yaml', ['test/fixtures/rules/duplicate-name.yaml:2: rules[0].name: duplicate rule name; "site-offline" is already defined at rules/health.yaml:7']],
    [
      // Not a whole rule: an override that tries to change what an override cannot (not a "duplicate").
      'override-summary.yaml',
      [
        'test/fixtures/rules/override-summary.yaml:3: rules[0].summary: an override of site-offline (defined at rules/health.yaml:7) cannot change summary; it may set params, enabled, mode, labels, for, keep_firing_for, repeat, every. For another summary, write a rule of your own under a new name and switch this one off (enabled: false)',
      ],
    ],
    [
      'override-typo.yaml',
      ['test/fixtures/rules/override-typo.yaml:3: rules[0].paramz: unknown key of an override of site-offline (did you mean params?); allowed: params, enabled, mode, labels, for, keep_firing_for, repeat, every'],
    ],
    ['unknown-key.yaml', ['test/fixtures/rules/unknown-key.yaml:7: rules[0].severty: unknown key (did you mean severity?); allowed: name, event, kind, source, severity, when, summary, params, enabled, description, mode, labels, for, keep_firing_for, repeat, resolve_when, dedup_key, window, every, absent']],
    [
      'bad-override.yaml',
      [
        'test/fixtures/rules/bad-override.yaml:4: rules[0].params.threshold: must be a number like the default (90)',
        'test/fixtures/rules/bad-override.yaml:5: rules[0].params.treshold: unknown parameter of rule usage-disk-high (did you mean threshold?); allowed: threshold, resolve_below',
      ],
    ],
    ['bad-severity.yaml', ['test/fixtures/rules/bad-severity.yaml:6: rules[0].severity: must be one of info, warning, critical (got "urgent")']],
    ['not-a-rule-file.yaml', ['test/fixtures/rules/not-a-rule-file.yaml:1: (file): a rule file is a map with a "rules" list']],
    ['missing-when.yaml', ['test/fixtures/rules/missing-when.yaml:2: rules[0].when: must be a CEL expression (a non-empty string)']],
    ['bad-for.yaml', ['test/fixtures/rules/bad-for.yaml:6: rules[0].for: must be a duration like 30s, 10m, 4h or 1h30m (got "soon")']],
    ['for-on-change.yaml', ['test/fixtures/rules/for-on-change.yaml:7: rules[0].for: only for kind: alert rules']],
    ['bad-resolve-when.yaml', ['test/fixtures/rules/bad-resolve-when.yaml:7: rules[0].resolve_when: CEL error: <input>:1:20: found < but expecting end of input']],
    ['bad-description.yaml', ['test/fixtures/rules/bad-description.yaml:7: rules[0].description: template error: tag {% if status %} not closed, line:1, col:1']],
    ['bad-mode.yaml', ['test/fixtures/rules/bad-mode.yaml:6: rules[0].mode: must be one of live, shadow (got "silent")']],
    ['bad-label-value.yaml', ['test/fixtures/rules/bad-label-value.yaml:9: rules[0].labels.priority: must be a string (got 1)']],
    ['bad-label-name.yaml', ['test/fixtures/rules/bad-label-name.yaml:8: rules[0].labels.Team-Name: a label name is lower-case letters, digits and underscores']],
    ['dedup-on-alert.yaml', ['test/fixtures/rules/dedup-on-alert.yaml:7: rules[0].dedup_key: only for kind: change rules']],
    ['bad-dedup-key.yaml', ['test/fixtures/rules/bad-dedup-key.yaml:7: rules[0].dedup_key: CEL error: <input>:1:6: found . but expecting end of input']],
    ['repeat-zero.yaml', ['test/fixtures/rules/repeat-zero.yaml:7: rules[0].repeat: must be longer than 0 (leave it out to never repeat)']],
    ['bad-window.yaml', ['test/fixtures/rules/bad-window.yaml:6: rules[0].window: must be a duration like 30s, 10m, 4h or 1h30m (got "a-day")']],
    ['override-timing-on-change.yaml', ['test/fixtures/rules/override-timing-on-change.yaml:3: rules[0].for: only for kind: alert rules (backup-failed is a change rule)']],
    [
      // A bad name does not hide the entry's other problems: every error at once, in file order.
      'bad-name-and-more.yaml',
      [
        'test/fixtures/rules/bad-name-and-more.yaml:2: rules[0].name: must be lower-case letters, digits and dashes (got "R_Five")',
        'test/fixtures/rules/bad-name-and-more.yaml:2: rules[0].when: must be a CEL expression (a non-empty string)',
        'test/fixtures/rules/bad-name-and-more.yaml:4: rules[0].kind: must be one of change, alert (got "sometimes")',
        'test/fixtures/rules/bad-name-and-more.yaml:6: rules[0].severity: must be one of info, warning, critical (got "urgent")',
        'test/fixtures/rules/bad-name-and-more.yaml:7: rules[0].whenn: unknown key (did you mean when?); allowed: name, event, kind, source, severity, when, summary, params, enabled, description, mode, labels, for, keep_firing_for, repeat, resolve_when, dedup_key, window, every, absent',
      ],
    ],
    [
      'misspelt-override.yaml',
      ['test/fixtures/rules/misspelt-override.yaml:3: rules[0].name: no rule is named site-ofline (did you mean site-offline?): an entry with only enabled changes an existing rule; a new rule needs event, kind, source and when'],
    ],
    ['bad-override-mode.yaml', ['test/fixtures/rules/bad-override-mode.yaml:3: rules[0].mode: must be one of live, shadow (got "dry-run")']],
    ['every-without-clock.yaml', ['test/fixtures/rules/every-without-clock.yaml:7: rules[0].every: only for rules that read the clock (now) or absence rules: other alerts are evaluated at each poll']],
    ['every-too-short.yaml', ['test/fixtures/rules/every-too-short.yaml:7: rules[0].every: must be at least 1m (got "30s")']],
    [
      'bad-absent.yaml',
      [
        'test/fixtures/rules/bad-absent.yaml:6: rules[0].absent.time: is required: a CEL expression over each record (item)',
        'test/fixtures/rules/bad-absent.yaml:7: rules[0].absent.match: CEL error: <input>:1:12: found = but expecting end of input',
        'test/fixtures/rules/bad-absent.yaml:8: rules[0].absent.for: must be a duration like 30s, 10m, 4h or 1h30m (got "soon")',
        'test/fixtures/rules/bad-absent.yaml:9: rules[0].absent.since: unknown key; allowed: match, time, for, in',
      ],
    ],
    ['absent-on-change.yaml', ['test/fixtures/rules/absent-on-change.yaml:6: rules[0].absent: only for kind: alert rules']],
    ['override-every-not-clock.yaml', ['test/fixtures/rules/override-every-not-clock.yaml:3: rules[0].every: only for rules that read the clock (now) or absence rules (site-offline is evaluated at each poll)']],
  ];
  for (const [fixture, expected] of cases) {
    it(fixture, () => {
      expect(errorsOf(fixture)).toEqual(expected);
    });
  }

  it('yaml-syntax.yaml (a YAML error names the line)', () => {
    const errs = errorsOf('yaml-syntax.yaml');
    expect(errs).toHaveLength(1);
    expect(errs[0]).toBe('test/fixtures/rules/yaml-syntax.yaml:4: (yaml): Missing closing "quote');
  });
});

describe('a user rule file', () => {
  it('can switch a built-in rule off by name', () => {
    const rules = loadRules(BUILTIN, [join(FIXTURES, 'disable-builtin.yaml')], opts);
    expect(rules.find((r) => r.name === 'site-slow')!.enabled).toBe(false);
    expect(rules.find((r) => r.name === 'site-offline')!.enabled).toBe(true);
  });
});

describe('alert decisions', () => {
  it('fire when true and not firing, resolve when false and firing, and do nothing else', () => {
    const rule = loadRules(BUILTIN, [], opts).find((r) => r.name === 'site-offline')!;
    const at = (status: 'firing' | 'resolved' | null) => ({ ...freshAlert(0), status, seq: status ? 1 : 0 });
    expect(stepAlert(rule, true, null, 1).emit).toBe('firing');
    expect(stepAlert(rule, true, at('resolved'), 1).emit).toBe('firing');
    expect(stepAlert(rule, true, at('firing'), 1)).toMatchObject({ emit: null, changed: false });
    expect(stepAlert(rule, false, at('firing'), 1).emit).toBe('resolved');
    expect(stepAlert(rule, false, null, 1)).toMatchObject({ emit: null, changed: false });
  });

  it('treat a condition that cannot be evaluated as unknown, never as false', () => {
    const rules = loadRules(BUILTIN, [], opts);
    const disk = rules.find((r) => r.name === 'usage-disk-high')!;
    const verdict = check(disk, { subject: 's', site: null, before: null, after: { disk: { percent: null } }, changes: [], now: 0 });
    expect(verdict).toEqual({ unknown: expect.stringContaining('no matching overload') });
    expect(stepAlert(disk, null, { ...freshAlert(0), status: 'firing', seq: 1 }, 1)).toMatchObject({ emit: null, changed: false });
  });
});

describe('the planner', () => {
  const rules = loadRules(BUILTIN, [], opts);
  const base = (over: Partial<PlanInput>): PlanInput => ({
    instance: 't',
    source: healthSource,
    entity: 'sites/1/health',
    entitySite: { id: 1, domain: 'a.example' },
    siteLookup: () => null,
    before: null,
    after: null,
    baseline: false,
    alertsOnly: false,
    version: 2,
    rules: sourceRules(rules, 'health'),
    recordDiff: compileDiffOptions({ volatile: healthSource.volatile }),
    alertState: () => undefined,
    firingForSite: () => [],
    ruleByName: (n) => rules.find((r) => r.name === n),
    now: new Date('2026-11-21T14:00:00Z'),
    ...over,
  });
  const health = (status: string, problems = 0): unknown => ({
    site_id: 1,
    online: { status, label: status },
    integrity: { checked: '2026-11-21 13:00 UTC', status: 'ok', findings: [], problems },
  });

  it('gives the same event id for the same input every time', () => {
    const a = planEvents(base({ before: health('online'), after: health('offline') }));
    const b = planEvents(base({ before: health('online'), after: health('offline') }));
    expect(a.events.map((e) => e.id)).toEqual(b.events.map((e) => e.id));
    expect(a.events[0]).toEqual({
      specversion: '1.0',
      id: a.events[0]!.id,
      source: 'hostwatch://t',
      type: 'hostwatch.site.offline',
      subject: 'sites/1/health',
      time: '2026-11-21T14:00:00.000Z',
      datacontenttype: 'application/json',
      data: {
        name: 'site.offline',
        severity: 'critical',
        status: 'firing',
        // The firing's own id: its resolution carries the same alert_id.
        alert_id: a.events[0]!.id,
        summary: 'a.example is offline',
        site_id: 1,
        domain: 'a.example',
        changes: [
          { path: 'online.status', before: 'online', after: 'offline' },
          { path: 'online.label', before: 'online', after: 'offline' },
        ],
        rule: 'site-offline',
        observed_at: '2026-11-21T14:00:00.000Z',
        labels: { category: 'availability' },
        description: 'The health check of a.example (site 1) reports it offline (offline). Visitors cannot reach the site.',
      },
    });
  });

  it('ignores a volatile field: a new integrity `checked` time alone plans nothing', () => {
    const after = health('online') as { integrity: { checked: string } };
    after.integrity.checked = '2026-11-21 14:00 UTC';
    const firing: AlertRow | undefined = undefined;
    const out = planEvents(base({ before: health('online'), after, alertState: () => firing }));
    expect(out.events).toEqual([]);
  });

  it('emits no change event on a baseline of a list, but does on a new record later', () => {
    const b = backupsSource;
    const changeRules = rules.filter((r) => r.kind === 'change' && r.source === 'backups');
    const list = [{ id: 5, state: 'Error' }];
    const common = { source: b, entity: 'sites/1/backups', rules: { change: changeRules, alert: [], entity: [], timed: false }, recordDiff: compileDiffOptions({}) };
    expect(planEvents(base({ ...common, before: null, after: list, baseline: true })).events).toEqual([]);
    const later = planEvents(base({ ...common, before: [], after: list }));
    expect(later.events.map((e) => [e.data.name, e.subject])).toEqual([['backup.failed', 'sites/1/backups/5']]);
  });
});
