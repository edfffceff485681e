import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { tempDir } from './harness.js';
import { hostwatch } from './run-cli.js';

/** `hostwatch rules test TEST` in a fresh folder holding `files` (name → text), as a user runs it there. */
async function ruleTestIn(files: Record<string, string>, test: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const { dir, cleanup } = tempDir();
  try {
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    return await hostwatch(['rules', 'test', test], { cwd: dir });
  } finally {
    cleanup();
  }
}

describe('hostwatch rules test', () => {
  it('passes every test of the built-in rule packs (this is how CI runs them)', async () => {
    const files = readdirSync('rules/tests').filter((f) => f.endsWith('.test.yaml')).map((f) => join('rules/tests', f));
    expect(files.length).toBeGreaterThanOrEqual(5);
    const r = await hostwatch(['rules', 'test', ...files]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^\d+ passed, 0 failed$/m);
    expect(r.stdout).not.toContain('FAIL');
    // One CLI run over every pack: 13–22 s on a loaded 2-core machine, past the default 30 s there.
  }, 120_000);

  it('prints expected against actual for each failing step and exits 1', async () => {
    const r = await hostwatch(['rules', 'test', 'test/fixtures/rules/tests/failing.test.yaml']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe(
      [
        'FAIL test/fixtures/rules/tests/failing.test.yaml:3: site-offline says the wrong thing',
        '  step 1 at 0s (line 7):',
        '    expected:',
        '      - site.offline:firing "a.example is down"',
        '    actual:',
        '      - site.offline:firing sites/1/health "a.example is offline"',
        '  step 2 at 1m (line 9):',
        '    expected:',
        '      (no events)',
        '    actual:',
        '      - site.offline:resolved sites/1/health "a.example is back online"',
        'ok   test/fixtures/rules/tests/failing.test.yaml: the baseline makes no change event',
        '1 passed, 1 failed',
        '',
      ].join('\n'),
    );
  });

  it('refuses a malformed test file with file, line and key, exit 2', async () => {
    const { dir, cleanup } = tempDir();
    try {
      const file = join(dir, 'bad.test.yaml');
      writeFileSync(file, 'tests:\n  - name: x\n    source: healt\n    steps: []\n  - name: y\n    source: health\n    site: { id: 1 }\n    steps:\n      - patch: { a: 1 }\n');
      const r = await hostwatch(['rules', 'test', file], { cwd: dir });
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(
        `bad.test.yaml:3: tests[0].source: must be one of ${SOURCE_NAMES.join(', ')} (got "healt")\n` +
          'bad.test.yaml:9: tests[1].steps[0].patch: a patch needs a snapshot in an earlier step\n',
      );
    } finally {
      cleanup();
    }
  });

  it('names the lines of the test file for an error in the rules a test defines, not lines of a copy of them', async () => {
    const { dir, cleanup } = tempDir();
    try {
      const file = join(dir, 't8.test.yaml');
      writeFileSync(
        file,
        [
          'tests:',
          '  - name: typo in an override',
          '    source: health',
          '    site: { id: 1, domain: a.example }',
          '    steps:',
          '      - snapshot: { online: { status: online } }',
          '    rules:',
          '      - name: site-ofline',
          '        enabled: false',
          '      - name: my-rule',
          '        event: my.event',
          '        kind: alert',
          '        source: health',
          '        severity: warning',
          "        when: \"after.online.status ==\"",
          '        for: 5x',
          '        summary: x',
          '',
        ].join('\n'),
      );
      const r = await hostwatch(['rules', 'test', file], { cwd: dir });
      expect(r.code).toBe(2);
      const lines = r.stderr.split('\n').filter(Boolean).map((l) => l.replace(/: (rules\[\d\]\.\w+): .*$/, ': $1'));
      expect(lines).toEqual([
        't8.test.yaml (rules of test "typo in an override"):8: rules[0].name',
        't8.test.yaml (rules of test "typo in an override"):15: rules[1].when',
        't8.test.yaml (rules of test "typo in an override"):16: rules[1].for',
      ]);
    } finally {
      cleanup();
    }
  });

  it('uses the rule files a test file names, relative to it', async () => {
    const r = await ruleTestIn(
      {
        'mine.yaml': 'rules:\n  - name: slow-long\n    event: site.slow_long\n    kind: alert\n    source: health\n    for: 2m\n    when: "after.online.status == \'slow\'"\n    summary: "{{ domain }} slow for a while"\n',
        'mine.test.yaml': `rule_files: [mine.yaml]
tests:
  - name: slow-long waits two minutes
    source: health
    site: { id: 7, domain: g.example }
    steps:
      - snapshot: { site_id: 7, online: { status: slow, label: Slow }, integrity: { problems: 0 } }
        expect: [{ event: site.slow, status: firing }]
      - {}
      - expect: [{ event: site.slow_long, status: firing, summary: g.example slow for a while }]
`,
      },
      'mine.test.yaml',
    );
    expect(r.stdout).toBe('ok   mine.test.yaml: slow-long waits two minutes\n1 passed, 0 failed\n');
    expect(r.code).toBe(0);
    // One that is not there (relative to the test file) is named as the test file's key.
    const missing = await ruleTestIn({ 'mine.test.yaml': 'rule_files: [../my-rules.yaml]\ntests:\n  - name: x\n    source: health\n    site: { id: 1 }\n    steps: [{ snapshot: {} }]\n' }, 'mine.test.yaml');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^mine\.test\.yaml: rule_files\[0\]: \.\.\/my-rules\.yaml: no such file or folder\n/);
  });

  it('makes a dedup_key event once, as the daemon stores it once: the same key again makes nothing', async () => {
    const r = await ruleTestIn(
      {
        'once.yaml': 'rules:\n  - name: went-offline\n    event: site.went_offline\n    kind: change\n    source: health\n    when: "after.online.status == \'offline\'"\n    dedup_key: "after.online.label"\n',
        'once.test.yaml': `rule_files: [once.yaml]
tests:
  - name: the same outage reason is reported once, a new one again
    source: health
    site: { id: 3, domain: c.example }
    steps:
      - snapshot: { site_id: 3, online: { status: online, label: Online }, integrity: { problems: 0 } }
      - patch: { online: { status: offline, label: Timeout } }
        expect: [{ event: site.went_offline }, { event: site.offline, status: firing }]
      - patch: { online: { status: online, label: Online } }
        expect: [{ event: site.offline, status: resolved }]
      - patch: { online: { status: offline, label: Timeout } }
        expect: [{ event: site.offline, status: firing }]
      - patch: { online: { status: online, label: Online } }
        expect: [{ event: site.offline, status: resolved }]
      - patch: { online: { status: offline, label: Refused } }
        expect: [{ event: site.went_offline }, { event: site.offline, status: firing }]
`,
      },
      'once.test.yaml',
    );
    expect(r.stdout).toBe('ok   once.test.yaml: the same outage reason is reported once, a new one again\n1 passed, 0 failed\n');
    expect(r.code).toBe(0);
  });
});
