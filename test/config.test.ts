import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from '../src/config/duration.js';
import { ConfigErrors, formatConfigErrors } from '../src/config/errors.js';
import { loadConfig } from '../src/config/load.js';
import { parseConfig, type ParseResult } from '../src/config/parse.js';
import type { Config } from '../src/config/types.js';
import { SOURCES } from '../src/sources/registry.js';
import { CONFIG_SOURCES } from '../src/sources/registry.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/config/', import.meta.url));
const REPO = fileURLToPath(new URL('../', import.meta.url));
const SOURCE_NAMES = ['sites', 'health', 'usage', 'backups', 'rank'];
const BASE_DIR = '/srv/hostwatch';
const WEBHOOK_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const ENV = {
  HOSTWATCH_API_KEY: 'hc_live_from_env',
  WEBHOOK_SECRET,
  SLACK_WEBHOOK_URL: 'https://hooks.slack.com/services/T000/B000/XXXX',
  SMTP_PASS: 'smtp-pass-from-env',
  HOSTWATCH_TOKEN: 'token-from-env',
};

/** Parses a fixture the way loadConfig would, with the fixture's name as the file. */
function parseFixture(name: string, env: Record<string, string | undefined> = ENV): ParseResult {
  return parseConfig(readFileSync(join(FIXTURES, name), 'utf8'), name, env, { sourceNames: SOURCE_NAMES, baseDir: BASE_DIR });
}

function configOf(name: string, env?: Record<string, string | undefined>): Config {
  const result = parseFixture(name, env);
  if (!result.ok) throw new Error(`expected ${name} to be valid:\n${formatConfigErrors(result.errors)}`);
  return result.config;
}

function errorLinesOf(name: string, env?: Record<string, string | undefined>): string[] {
  const result = parseFixture(name, env);
  if (result.ok) throw new Error(`expected ${name} to be invalid`);
  return formatConfigErrors(result.errors).split('\n');
}

/** A config from inline text (for the valid variations the tests below need). */
function parseText(text: string, env: Record<string, string | undefined> = {}): ParseResult {
  return parseConfig(text, 'inline.yaml', env, { sourceNames: SOURCE_NAMES, baseDir: BASE_DIR });
}

const MINIMAL = 'api:\n  base_url: https://panel.example.com\n  key: hc_live_test\n';

describe('valid configs', () => {
  it('normalizes a full config: milliseconds, absolute paths, secrets from the environment', () => {
    expect(configOf('valid-full.yaml')).toEqual({
      file: join(process.cwd(), 'valid-full.yaml'),
      name: 'agency-prod',
      api: {
        base_url: 'https://panel.example.com',
        key: 'hc_live_from_env',
        timeout_ms: 45_000,
        max_requests_per_second: 2.5,
        max_concurrency: 8,
        retries: 5,
        max_pages: 200,
        max_reply_bytes: 16 * 1024 * 1024,
      },
      storage: { engine: 'sqlite', path: '/srv/hostwatch/state/hostwatch.db' },
      sites: [12, 40, 7],
      sites_max: 10_000,
      sources: {
        health: { enabled: true, every_ms: 120_000, priority: null, max_events: 100 },
        rank: { enabled: false, every_ms: null, priority: null, max_events: 100 },
        backups: { enabled: true, every_ms: null, priority: null, max_events: 100 },
      },
      rules: ['/srv/hostwatch/rules', '/etc/hostwatch/extra.yaml'],
      channels: [
        { name: 'hooks', type: 'webhook', url: 'https://example.net/hook', secret: WEBHOOK_SECRET, secrets: [WEBHOOK_SECRET], timeout_ms: 5_000, mode: 'structured', template: null },
        { name: 'ops', type: 'slack', url: 'https://hooks.slack.com/services/T000/B000/XXXX', timeout_ms: 10_000, digest: null, template: null },
        {
          name: 'oncall',
          type: 'email',
          to: ['ops@example.net', 'Night Desk <night@example.net>'],
          from: 'hostwatch@example.net',
          smtp: { host: 'smtp.example.net', port: 465, user: 'hostwatch', pass: 'smtp-pass-from-env', secure: true, require_tls: true },
          timeout_ms: 10_000,
          digest: null,
        },
        { name: 'console', type: 'console' },
      ],
      routes: [
        { match: "severity == 'critical'", channels: ['oncall', 'ops'], continue: false, group_by: [], group_wait_ms: 30_000, group_interval_ms: 300_000, send_resolved: true },
        { match: null, channels: ['hooks', 'console'], continue: false, group_by: [], group_wait_ms: 30_000, group_interval_ms: 300_000, send_resolved: true },
      ],
      maintenance: [],
      inhibit: [{ source: 'site.offline', target: null }],
      delivery: { retry_schedule_ms: [1_000, 90_000, 3_600_000], drain_timeout_ms: 60_000, concurrency: 16, disable_after_ms: 432_000_000 },
      server: { listen: '127.0.0.1:8080', token: 'token-from-env', not_ready_after_ms: 1_800_000, allowed_hosts: ['hostwatch.example.net', '.internal.example'] },
      silences: { max_duration_ms: 14 * 86_400_000 },
      degraded: { after_failures: 3, after_ms: 600_000 },
      log: { level: 'debug', pretty: true },
      history: { retention_ms: 90 * 86_400_000, prune_every_ms: 3_600_000 },
      site_labels: [],
      heartbeat: null,
      watchdog: null,
      incidents: { enabled: true, min_sites: { count: 5 }, window_ms: 900_000, wait_ms: 30_000, alerts: [] },
      cluster: { instance: null, lease_ms: 30_000 },
    } satisfies Config);
  });

  it('reads ${VAR} written unquoted inside a flow map, as in the PRODUCT.md example', () => {
    const config = configOf('valid-env-in-flow-map.yaml', { SLACK_WEBHOOK_URL: 'https://hooks.slack.com/services/T1/B2/C3' });
    expect(config.channels).toEqual([
      { name: 'ops', type: 'slack', url: 'https://hooks.slack.com/services/T1/B2/C3', timeout_ms: 10_000, digest: null, template: null },
    ]);
  });

  it('reports a "${" never closed inside a quoted value of a flow map as the value\'s problem, not as a YAML syntax error', () => {
    const r = parseText('api: {base_url: "https://panel.example.com", key: "${BASE"}\nstorage: { path: ./h.db }\n');
    expect(r.ok ? '' : formatConfigErrors(r.errors)).toBe('inline.yaml:1:51: api.key: has "${" without a closing "}"; write ${NAME}, ${NAME:-default}, or $${ for a literal "${"');
  });

  it('takes a variable\'s value literally, even when it holds YAML syntax', () => {
    const value = 'https://hooks.slack.com/services/T1/B2/C3?x=},b:{c#d';
    const config = configOf('valid-env-in-flow-map.yaml', { SLACK_WEBHOOK_URL: value });
    expect(config.channels[0]).toMatchObject({ url: value });
  });

  it('fills in every default for a config with only the required keys', () => {
    expect(configOf('valid-minimal.yaml', {})).toEqual({
      file: join(process.cwd(), 'valid-minimal.yaml'),
      name: 'hostwatch',
      api: {
        base_url: 'https://panel.example.com',
        key: 'hc_live_minimal',
        timeout_ms: 30_000,
        max_requests_per_second: 5,
        max_concurrency: 4,
        retries: 3,
        max_pages: 50,
        max_reply_bytes: 16 * 1024 * 1024,
      },
      storage: { engine: 'sqlite', path: '/srv/hostwatch/data/hostwatch.db' },
      sites: 'all',
      sites_max: 10_000,
      sources: {},
      rules: [],
      channels: [],
      routes: [],
      maintenance: [],
      inhibit: [{ source: 'site.offline', target: null }],
      delivery: {
        retry_schedule_ms: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 50_400_000, 72_000_000, 86_400_000],
        drain_timeout_ms: 30_000,
        concurrency: 8,
        disable_after_ms: 432_000_000,
      },
      server: { listen: null, token: null, not_ready_after_ms: 1_800_000, allowed_hosts: [] },
      silences: { max_duration_ms: 30 * 86_400_000 },
      degraded: { after_failures: 3, after_ms: 600_000 },
      log: { level: 'info', pretty: false },
      history: { retention_ms: 90 * 86_400_000, prune_every_ms: 3_600_000 },
      site_labels: [],
      heartbeat: null,
      watchdog: null,
      incidents: { enabled: true, min_sites: { count: 5 }, window_ms: 900_000, wait_ms: 30_000, alerts: [] },
      cluster: { instance: null, lease_ms: 30_000 },
    } satisfies Config);
  });

  it('reads an empty section, and an empty sites:, as its defaults', () => {
    const result = parseText(`${MINIMAL}server:\nlog:\nsites:\nsources:\n  rank:\n`);
    expect(result.ok && result.config.server).toEqual({ listen: null, token: null, not_ready_after_ms: 1_800_000, allowed_hosts: [] });
    // `sites:` left empty, like a section: every site (it was an error, "got null").
    expect(result.ok && [result.config.sites, result.config.sites_max]).toEqual(['all', 10_000]);
    expect(result.ok && result.config.log).toEqual({ level: 'info', pretty: false });
    expect(result.ok && result.config.sources).toEqual({ rank: { enabled: true, every_ms: null, priority: null, max_events: 100 } });
  });

  it('sets secure SMTP by default only on port 465', () => {
    const channel = (port: number) =>
      `${MINIMAL}channels:\n  - { name: mail, type: email, to: a@example.net, from: b@example.net, smtp: { host: smtp.example.net, port: ${port} } }\n`;
    const secureOf = (result: ParseResult) =>
      result.ok && result.config.channels[0]?.type === 'email' ? result.config.channels[0].smtp.secure : 'invalid';
    expect(secureOf(parseText(channel(465)))).toBe(true);
    expect(secureOf(parseText(channel(587)))).toBe(false);
  });

  it('requires STARTTLS by default only where a password would leave this machine: a login to another host; not on loopback, not without a login; smtp.require_tls decides when it is set', () => {
    const requireTlsOf = (smtp: string): boolean | string => {
      const result = parseText(`${MINIMAL}channels:\n  - { name: mail, type: email, to: a@example.net, from: b@example.net, smtp: ${smtp} }\n`);
      if (!result.ok) return result.errors.map((e) => `${e.path}: ${e.message}`).join('; ');
      const c = result.config.channels[0];
      return c?.type === 'email' ? c.smtp.require_tls : 'not email';
    };
    const cases: Array<[string, boolean | string]> = [
      ['{ host: smtp.example.net, user: u, pass: p }', true],
      ['{ host: smtp.example.net }', false],
      ['{ host: 127.0.0.1, user: u, pass: p }', false],
      ['{ host: localhost, user: u, pass: p }', false],
      ['{ host: smtp.example.net, user: u, pass: p, require_tls: false }', false],
      ['{ host: 127.0.0.1, require_tls: true }', true],
      ['{ host: smtp.example.net, require_tls: "yes" }', 'channels[0].smtp.require_tls: must be true or false (got "yes")'],
    ];
    expect(cases.map(([smtp]) => [smtp, requireTlsOf(smtp)])).toEqual(cases);
  });

  it('names a route\'s key written on a channel (group_wait, send_resolved, ...) as a route\'s, instead of only listing a channel\'s keys', () => {
    const result = parseText(`${MINIMAL}channels:\n  - { name: ops, type: slack, url: "https://hooks.slack.com/services/T0/B0/x", group_wait: 1m }\n`);
    expect(result.ok ? [] : formatConfigErrors(result.errors).split('\n')).toEqual([
      'inline.yaml:5:80: channels[0].group_wait: unknown key (group_wait is a route\'s key: set it in routes, on the route that names this channel; docs/routing.md); allowed: name, type, url, timeout, digest, template',
    ]);
  });

  it('names a webhook template header the transport owns (Host) or that is no header name, with what a name may be, and takes the rest', () => {
    const result = parseText(`${MINIMAL}channels:\n  - { name: h, type: webhook, url: "https://example.net/x", template: { body: "{}", headers: { Host: x, "Bad Name": y, X-Ok: "{{ type }}" } } }\n`);
    const rule = "must be an HTTP header name (letters, digits and !#$%&'*+.^_`|~-), not Host, Content-Length, Transfer-Encoding or Connection (the HTTP client sets those)";
    expect(result.ok ? [] : result.errors.map((e) => `${e.path}: ${e.message}`)).toEqual([
      `channels[0].template.headers.Host: ${rule} (got "x")`,
      `channels[0].template.headers["Bad Name"]: ${rule} (got "y")`,
    ]);
  });

  it('refuses a JSON webhook body that puts API text in quotes by hand: a quote in a review would break it or add fields; | json, or another content_type, is taken', () => {
    const body = (b: string, extra = ''): ParseResult =>
      parseText(`${MINIMAL}channels:\n  - name: h\n    type: webhook\n    url: "https://example.net/x"\n    template:\n      body: '${b}'\n${extra}`);
    const quoted = body('{"text": "{{ data.summary }}", "site": {{ data.site_id }}}');
    expect(quoted.ok ? [] : quoted.errors.map((e) => `${e.path}: ${e.message}`)).toEqual([
      'channels[0].template.body: is not JSON for an event whose text holds a quote, a backslash or a line break (API text can): put a value in with | json, like {{ data.summary | json }}, not in quotes "{{ data.summary }}"; or set content_type if the body is not JSON (got "{\\"text\\": \\"{{ data.summary }}\\", \\"site\\": {{ data.site_id }}}")',
    ]);
    // Names hostwatch gives (the severity, the rule) need no escaping.
    expect(body('{"text": {{ data.summary | json }}, "severity": "{{ data.severity }}", "rule": "{{ data.rule }}", "site": {{ data.site_id }}}').ok).toBe(true);
    expect(body('text={{ data.summary }}', '      content_type: text/plain\n').ok).toBe(true);
  });

  it('names a misspelt key at once even when its value is an unset ${VAR}, and leaves out that variable\'s error (the key is the problem)', () => {
    const result = parseText(`${MINIMAL}channels:\n  - { name: h, type: webhook, url: "https://example.net/x", secert: "\${WEBHOOK_SECRET}" }\n`, {});
    expect(result.ok ? [] : result.errors.map((e) => `${e.path}: ${e.message}`)).toEqual([
      'channels[0].secret: is required (a webhook without a template sends signed CloudEvents); must be a Standard Webhooks secret: "whsec_" followed by base64, like whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      'channels[0].secert: unknown key (did you mean secret?); allowed: name, type, url, secret, timeout, mode, template',
    ]);
  });

  it('keeps ":memory:" as the storage path instead of resolving it', () => {
    const result = parseText(`${MINIMAL}storage: { path: ":memory:" }\n`);
    expect(result.ok && result.config.storage).toEqual({ engine: 'sqlite', path: ':memory:' });
  });
});

describe('storage: SQLite (path) or PostgreSQL (url)', () => {
  it('selects PostgreSQL with storage.url, with ${PGPASS} taken from the environment', () => {
    const result = parseText(`${MINIMAL}storage:\n  url: postgres://hostwatch:\${PGPASS}@db.example.net:5432/hostwatch\n`, { PGPASS: 's3cret-pw' });
    expect(result.ok && result.config.storage).toEqual({ engine: 'postgres', url: 'postgres://hostwatch:s3cret-pw@db.example.net:5432/hostwatch' });
  });

  it('refuses a ${PGPASS} whose value would change the URL (a password with / @ :), without showing any of it, and takes it percent-encoded', () => {
    const text = `${MINIMAL}storage:\n  url: postgres://hostwatch:\${PGPASS}@db.example.net:5432/hostwatch\n`;
    for (const password of ['Xy7q@Secr3t:9/zqP', 'k7Tq/QwRtZ+Lm9==', 'Gh2Jk#Mn4Pq?Rs8']) {
      const result = parseText(text, { PGPASS: password });
      expect(result.ok).toBe(false);
      const printed = result.ok ? '' : formatConfigErrors(result.errors);
      expect(printed).toMatch(/^inline\.yaml:5:8: storage\.url: the value of \$\{PGPASS\} changes the URL's host or database: a password \(or user\) in a URL must be percent-encoded/m);
      for (const part of password.split(/[@:/#?+=]/).filter((p) => p.length >= 4)) expect(printed).not.toContain(part);
    }
    // A host, a port or a database in a variable is what the file means, not a broken URL.
    const hosted = parseText(`${MINIMAL}storage:\n  url: postgres://hostwatch:\${PGPASS}@\${PGHOST}:\${PGPORT}/\${PGDB}\n`, { PGPASS: 'pw', PGHOST: 'db.example.net', PGPORT: '5433', PGDB: 'hw' });
    expect(hosted.ok && hosted.config.storage).toEqual({ engine: 'postgres', url: 'postgres://hostwatch:pw@db.example.net:5433/hw' });
    const host = parseText(`${MINIMAL}storage:\n  url: postgres://hostwatch:\${PGPASS}@\${PGHOST}:5432/hostwatch\n`, { PGPASS: 'pw', PGHOST: 'db.example.net' });
    expect(host.ok ? [] : formatConfigErrors(host.errors)).toEqual([]);
    const encoded = parseText(text, { PGPASS: encodeURIComponent('Xy@Secr3t:9/zq') });
    expect(encoded.ok && encoded.config.storage).toEqual({ engine: 'postgres', url: 'postgres://hostwatch:Xy%40Secr3t%3A9%2Fzq@db.example.net:5432/hostwatch' });
  });

  it('keeps SQLite, the embedded default, without a storage section', () => {
    const result = parseText(MINIMAL);
    expect(result.ok && result.config.storage).toEqual({ engine: 'sqlite', path: '/srv/hostwatch/data/hostwatch.db' });
  });

  it('refuses path and url together, naming the file, line and key', () => {
    const result = parseText(`${MINIMAL}storage:\n  path: ./data/h.db\n  url: postgres://u:pw@db/h\n`);
    expect(result.ok).toBe(false);
    const lines = formatConfigErrors(result.ok ? [] : result.errors).split('\n');
    expect(lines).toEqual([
      'inline.yaml:6:8: storage.url: cannot be combined with storage.path: give path (SQLite) or url (PostgreSQL), not both (got "[redacted]")',
    ]);
  });

  it('refuses a url that is not a PostgreSQL URL, without showing it (it carries a password)', () => {
    const result = parseText(`${MINIMAL}storage:\n  url: mysql://root:hunter22@db/h\n`);
    expect(result.ok).toBe(false);
    const text = formatConfigErrors(result.ok ? [] : result.errors);
    expect(text).toBe(
      'inline.yaml:5:8: storage.url: must be a PostgreSQL URL like postgres://hostwatch:${PGPASS}@db.example.net:5432/hostwatch (got "[redacted]")',
    );
    expect(text).not.toContain('hunter22');
  });
});

describe('config.example.yaml', () => {
  const example = readFileSync(join(REPO, 'config.example.yaml'), 'utf8');

  it('parses cleanly against the real source registry when its environment variables are set', () => {
    const sourceNames = SOURCES.map((source) => source.name);
    const result = parseConfig(example, 'config.example.yaml', ENV, { sourceNames, baseDir: REPO });
    expect(result.ok ? [] : formatConfigErrors(result.errors)).toEqual([]);
    expect(result.ok && result.config.channels.map((c) => c.name)).toEqual(['hooks', 'ops', 'oncall', 'console']);
  });

  it('has a commented block for every channel type, each of which hostwatch accepts once uncommented', () => {
    const lines = example.split('\n');
    const blocks: string[][] = [];
    for (const line of lines) {
      if (/^  # - name: /.test(line)) blocks.push([]);
      else if (!/^  #   /.test(line)) continue;
      blocks.at(-1)?.push(line.replace(/^  # /, '  '));
    }
    const env = { ...ENV, TEAMS_WORKFLOW_URL: 'https://prod.logic.azure.com/workflows/a?sig=s', DISCORD_WEBHOOK_URL: 'https://discord.com/api/webhooks/1/t', PAGERDUTY_ROUTING_KEY: '0123456789abcdef0123456789abcdef', OPSGENIE_API_KEY: 'k', TELEGRAM_BOT_TOKEN: '1:AAx', NTFY_TOKEN: 'tk_x' };
    const text = `api: { base_url: https://panel.example.com, key: k }\nchannels:\n${blocks.map((b) => b.join('\n')).join('\n')}\n`;
    const result = parseConfig(text, 'config.example.yaml (commented channels)', env, { sourceNames: SOURCES.map((s) => s.name), baseDir: REPO });
    expect(result.ok ? [] : formatConfigErrors(result.errors)).toEqual([]);
    const types = result.ok ? result.config.channels.map((c) => c.type) : [];
    expect(new Set(types)).toEqual(new Set(['teams', 'discord', 'pagerduty', 'opsgenie', 'telegram', 'ntfy', 'webhook']));
  });

  it('turns on, copied as it is, none of the features that are off by default: no file watch, maintenance window, site label, heartbeat or watchdog, and no source switched off', () => {
    const result = parseConfig(example, 'config.example.yaml', ENV, { sourceNames: SOURCES.map((x) => x.name), baseDir: REPO });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const c = result.config;
    expect({ maintenance: c.maintenance, site_labels: c.site_labels, heartbeat: c.heartbeat, watchdog: c.watchdog }).toEqual({ maintenance: [], site_labels: [], heartbeat: null, watchdog: null });
    expect(Object.entries(c.sources).filter(([, o]) => !o.enabled || o.paths !== undefined)).toEqual([]);
  });

  it('shows each feature that is off by default as a commented block that hostwatch accepts once its "# " is removed', () => {
    // A block: "# key:" (at the top, or "  # key:" inside sources) and the commented lines under it.
    const head = /^( *)# (maintenance|site_labels|heartbeat|watchdog|jobs|files):/;
    const out: string[] = [];
    let prefix: string | null = null;
    for (const line of example.split('\n')) {
      const m = head.exec(line);
      if (m) prefix = m[1]!;
      else if (prefix === null || !line.startsWith(`${prefix}#   `)) prefix = null;
      if (prefix !== null) out.push(prefix + line.slice(prefix.length + 2));
      // The active "key: []" that the block stands in for.
      else if (!/^(maintenance|site_labels): \[\]/.test(line)) out.push(line);
    }
    const env = { ...ENV, HEARTBEAT_URL: 'https://hc-ping.com/0f4c3e2a-1b2c-4d5e-8f90-123456789abc' };
    const result = parseConfig(out.join('\n'), 'config.example.yaml (uncommented)', env, { sourceNames: SOURCES.map((x) => x.name), baseDir: REPO });
    expect(result.ok ? [] : formatConfigErrors(result.errors)).toEqual([]);
    if (!result.ok) return;
    const c = result.config;
    expect({
      maintenance: c.maintenance.map((w) => w.name),
      site_labels: c.site_labels.length,
      heartbeat: c.heartbeat?.url,
      watchdog: c.watchdog,
      jobs: c.sources['jobs']?.enabled,
      files: c.sources['files']?.paths,
    }).toEqual({ maintenance: ['sunday-updates'], site_labels: 2, heartbeat: env.HEARTBEAT_URL, watchdog: { every_ms: 3_600_000 }, jobs: false, files: ['.htaccess', 'wp-config.php'] });
  });

  it('shows a PostgreSQL storage.url that hostwatch accepts once it replaces path', () => {
    const lines = example.split('\n');
    const url = lines.findIndex((l) => /^  # url: postgres:/.test(l));
    expect(url).toBeGreaterThan(0);
    const text = lines.filter((l) => !/^  path: /.test(l)).map((l) => (/^  # url: postgres:/.test(l) ? l.replace('# ', '') : l)).join('\n');
    const result = parseConfig(text, 'config.example.yaml (postgres)', { ...ENV, PGPASS: 'pw-from-env' }, { sourceNames: SOURCES.map((x) => x.name), baseDir: REPO });
    expect(result.ok ? result.config.storage : formatConfigErrors(result.errors)).toEqual({ engine: 'postgres', url: 'postgres://hostwatch:pw-from-env@db.example.net:5432/hostwatch' });
  });

  it('documents every key with a comment on its line or just above it', () => {
    const lines = example.split('\n');
    const undocumented = lines.filter((line, index) => {
      if (!/^\s*(- )?[a-z_]+:/.test(line) || line.includes('#')) return false;
      const above = lines[index - 1] ?? '';
      return !above.trim().startsWith('#');
    });
    expect(undocumented).toEqual([]);
  });
});

describe('invalid configs: every error names file, line, column, key path, value and what is allowed', () => {
  const cases: { name: string; fixture: string; env?: Record<string, string | undefined>; errors: string[] }[] = [
    {
      name: 'a bad duration says what a duration looks like',
      fixture: 'bad-duration.yaml',
      errors: ['bad-duration.yaml:4:12: api.timeout: must be a duration greater than 0, like 10s, 1m (got "soon")'],
    },
    {
      name: 'an unknown top-level key is an error that suggests the near miss',
      fixture: 'unknown-top-level-key.yaml',
      errors: [
        'unknown-top-level-key.yaml:4:1: chanels: unknown key (did you mean channels?); allowed: name, api, storage, sites, sources, rules, channels, routes, maintenance, inhibit, delivery, server, silences, degraded, log, history, site_labels, heartbeat, watchdog, incidents, cluster',
      ],
    },
    {
      name: 'a typo in a nested key does not pass silently',
      fixture: 'nested-key-typo.yaml',
      errors: [
        'nested-key-typo.yaml:4:3: api.timout: unknown key (did you mean timeout?); allowed: base_url, key, timeout, max_requests_per_second, max_concurrency, retries, max_pages, max_reply_bytes',
      ],
    },
    {
      name: 'a missing api.key points at the api map',
      fixture: 'missing-api-key.yaml',
      errors: ['missing-api-key.yaml:3:3: api.key: is required; must be a non-empty API key, usually key: ${HOSTWATCH_API_KEY}'],
    },
    {
      name: 'an unset environment variable is named with the key that uses it',
      fixture: 'unset-env-var.yaml',
      env: {},
      errors: [
        'unset-env-var.yaml:3:8: api.key: environment variable HOSTWATCH_API_KEY is not set; set it, or give a default with ${HOSTWATCH_API_KEY:-default}',
      ],
    },
    {
      name: 'a malformed ${...} reference is an error that shows the accepted forms',
      fixture: 'bad-env-reference.yaml',
      errors: [
        'bad-env-reference.yaml:3:8: api.key: has "${" that is not followed by a variable name (letters, digits, _); write ${NAME}, ${NAME:-default}, or $${ for a literal "${"',
      ],
    },
    {
      name: 'a webhook URL that is not http(s) is shown with the value',
      fixture: 'bad-url.yaml',
      errors: ['bad-url.yaml:8:10: channels[1].url: must be an http(s) URL like https://example.net/hook (got "ftp://x")'],
    },
    {
      name: 'a base_url ending in /api/v1 explains that the client appends it',
      fixture: 'base-url-api-v1.yaml',
      errors: [
        'base-url-api-v1.yaml:2:13: api.base_url: must not end with /api/v1: the client appends /api/v1 itself, so write the panel address alone, like https://panel.example.com (got "https://panel.example.com/api/v1/")',
      ],
    },
    {
      name: 'a duplicate channel name points at the second use',
      fixture: 'duplicate-channel-name.yaml',
      errors: ['duplicate-channel-name.yaml:10:11: channels[2].name: must be unique; channels[0] is already named ops (got "ops")'],
    },
    {
      name: 'a channel name with spaces or capitals is rejected',
      fixture: 'bad-channel-name.yaml',
      errors: ['bad-channel-name.yaml:5:13: channels[0].name: must be lowercase letters, digits, "_" or "-", like ops or oncall (got "Ops Team")'],
    },
    {
      name: 'a route naming an unknown channel lists the defined ones',
      fixture: 'route-unknown-channel.yaml',
      errors: ['route-unknown-channel.yaml:9:21: routes[0].channels[1]: must name a defined channel, one of ops, hooks (got "pager")'],
    },
    {
      name: 'an unknown source name lists the sources that exist',
      fixture: 'unknown-source.yaml',
      errors: [
        'unknown-source.yaml:6:3: sources.helth: unknown source (did you mean health?); allowed: sites, health, usage, backups, rank',
      ],
    },
    {
      name: 'a bad webhook secret says the format without printing the value',
      fixture: 'bad-webhook-secret.yaml',
      errors: [
        'bad-webhook-secret.yaml:8:13: channels[0].secret: must be a Standard Webhooks secret: "whsec_" followed by base64, like whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw (got "[redacted]")',
      ],
    },
    {
      name: 'a bad Slack URL is not printed either, since the URL is the credential',
      fixture: 'bad-slack-url.yaml',
      errors: [
        'bad-slack-url.yaml:7:10: channels[0].url: must be an http(s) URL like https://hooks.slack.com/services/... (got "[redacted]")',
      ],
    },
    {
      name: 'a webhook URL with credentials is refused, saying how to send them instead, and not printed (it holds a password)',
      fixture: 'webhook-url-credentials.yaml',
      errors: [
        'webhook-url-credentials.yaml:8:10: channels[0].url: must not carry credentials (user:password@): an HTTP client does not send them, so the receiver would refuse every event. Send them in a header of a webhook template instead, like template: { body: ..., headers: { Authorization: "Basic ${HOOK_AUTH}" } } (docs/channels.md#webhook) (got "[redacted]")',
      ],
    },
    {
      name: 'a site id that is not a positive integer is pointed at in the list',
      fixture: 'bad-sites.yaml',
      errors: ['bad-sites.yaml:4:13: sites[1]: must be a positive integer site id (got "abc")'],
    },
    {
      name: 'a site id listed twice points at the repeat',
      fixture: 'duplicate-site.yaml',
      errors: ['duplicate-site.yaml:7:5: sites[2]: must be unique; 12 is already listed at [0] (got 12)'],
    },
    {
      name: 'a YAML syntax error has its line',
      fixture: 'yaml-syntax-error.yaml',
      errors: ['yaml-syntax-error.yaml:6:1: YAML syntax error: Flow map in block collection must be sufficiently indented and end with a }'],
    },
    {
      name: 'a route match that is not CEL names the route and the CEL error',
      fixture: 'bad-route-match.yaml',
      errors: [
        `bad-route-match.yaml:7:12: routes[0].match: is not a valid CEL expression: <input>:1:10: found = but expecting end of input (got "severity = 'critical'")`,
      ],
    },
    {
      name: 'a key written twice is an error at the second one',
      fixture: 'duplicate-yaml-key.yaml',
      errors: ['duplicate-yaml-key.yaml:6:1: YAML error: the key "log" appears twice in one map; each key may appear only once'],
    },
    {
      name: 'a value of the wrong type names the type it must be',
      fixture: 'wrong-type.yaml',
      errors: [
        'wrong-type.yaml:4:12: api.retries: must be an integer from 0 to 10 (got "three")',
        'wrong-type.yaml:6:3: channels: must be a list of channels, each like { name: ops, type: slack, url: ... } (got a map)',
      ],
    },
    {
      name: 'an unknown channel type lists the types, and a missing one is required',
      fixture: 'unknown-channel-type.yaml',
      errors: [
        'unknown-channel-type.yaml:5:26: channels[0].type: must be one of webhook, slack, email, console, teams, discord, pagerduty, opsgenie, telegram, ntfy (got "sms")',
        'unknown-channel-type.yaml:6:5: channels[1].type: is required; must be one of webhook, slack, email, console, teams, discord, pagerduty, opsgenie, telegram, ntfy',
      ],
    },
    {
      name: 'a listen address without a host shows the host:port form',
      fixture: 'bad-listen.yaml',
      errors: [
        'bad-listen.yaml:5:11: server.listen: must be host:port like 127.0.0.1:8080 or [::1]:8080, with a port from 0 to 65535 (got 8080)',
      ],
    },
    {
      name: 'an unknown log level lists the levels',
      fixture: 'bad-log-level.yaml',
      errors: ['bad-log-level.yaml:5:10: log.level: must be one of trace, debug, info, warn, error, fatal (got "verbose")'],
    },
    {
      name: 'an SMTP user without a password asks for the password',
      fixture: 'smtp-user-without-pass.yaml',
      errors: ['smtp-user-without-pass.yaml:10:7: channels[0].smtp.pass: is required when user is set (an SMTP login needs both)'],
    },
    {
      name: 'an empty file asks for the api section',
      fixture: 'empty.yaml',
      errors: [
        'empty.yaml:1:1: api: is required; must be a map with keys base_url, key, timeout, max_requests_per_second, max_concurrency, retries, max_pages, max_reply_bytes',
      ],
    },
    {
      name: 'a file that is a list, not a map, lists the top-level keys',
      fixture: 'not-a-map.yaml',
      errors: [
        'not-a-map.yaml:1:1: the file must be a map with keys name, api, storage, sites, sources, rules, channels, routes, maintenance, inhibit, delivery, server, silences, degraded, log, history, site_labels, heartbeat, watchdog, incidents, cluster (got a list)',
      ],
    },
  ];

  for (const { name, fixture, env, errors } of cases) {
    it(name, () => {
      expect(errorLinesOf(fixture, env)).toEqual(errors);
    });
  }

  it('reports all three errors of a config with three problems at once, in file order', () => {
    expect(errorLinesOf('three-errors.yaml')).toEqual([
      'three-errors.yaml:2:13: api.base_url: must be an http(s) URL like https://panel.example.com (got "panel.example.com")',
      'three-errors.yaml:4:12: api.timeout: must be a duration greater than 0, like 10s, 1m; a number needs a unit: 30s or 30m, not 30 (got 30)',
      'three-errors.yaml:6:20: sources.health.every: must be a duration of at least 10s, like 10s or 1m (got "5s")',
    ]);
  });

  it('keeps the key path and value in the error object, with secrets redacted there too', () => {
    const result = parseFixture('bad-webhook-secret.yaml');
    expect(result.ok ? [] : result.errors).toEqual([
      {
        file: 'bad-webhook-secret.yaml',
        line: 8,
        column: 13,
        path: 'channels[0].secret',
        value: '[redacted]',
        message: expect.stringContaining('must be a Standard Webhooks secret') as unknown as string,
      },
    ]);
  });
});

describe('durations', () => {
  it('take 0 alone, without a unit, where 0 is allowed (YAML reads it as a number), and refuse it where a duration must be longer', () => {
    const text = [MINIMAL.trimEnd(), 'channels: [{ name: ops, type: console }]', 'routes: [{ channels: [ops], group_wait: 0 }]', 'delivery: { drain_timeout: 0 }', ''].join('\n');
    const r = parseText(text);
    expect(r.ok ? [] : formatConfigErrors(r.errors)).toEqual([]);
    expect(r.ok && [r.config.routes[0]!.group_wait_ms, r.config.delivery.drain_timeout_ms]).toEqual([0, 0]);
    const zero = parseText(MINIMAL.replace('key: hc_live_test', 'key: hc_live_test\n  timeout: 0'));
    expect(zero.ok ? '' : formatConfigErrors(zero.errors)).toBe('inline.yaml:4:12: api.timeout: must be a duration greater than 0, like 10s, 1m (got 0)');
  });

  it('refuse a duration too long to be meant, saying so rather than that it is no duration: a group_wait over a day, anything over ten years', () => {
    const text = [
      MINIMAL.trimEnd(),
      'channels: [{ name: ops, type: console }]',
      'routes: [{ channels: [ops], group_wait: 30d, group_interval: 999999999999999d }]',
      'silences: { max_duration: 100000d }',
      '',
    ].join('\n');
    const r = parseText(text);
    expect(r.ok ? [] : formatConfigErrors(r.errors).split('\n')).toEqual([
      'inline.yaml:5:41: routes[0].group_wait: is too long: at most 1d (got "30d")',
      'inline.yaml:5:62: routes[0].group_interval: is too long: at most 7d (got "999999999999999d")',
      'inline.yaml:6:27: silences.max_duration: is too long: at most 3650d (got "100000d")',
    ]);
    const fine = parseText(text.replace('group_wait: 30d', 'group_wait: 1d').replace('999999999999999d', '7d').replace('100000d', '3650d'));
    expect(fine.ok ? [] : formatConfigErrors(fine.errors)).toEqual([]);
  });

  it('refuse a watched file path outside the site folder (the API refuses it at every poll) or listed twice', () => {
    const all = (text: string) => parseConfig(text, 'inline.yaml', {}, { sourceNames: SOURCES.map((x) => x.name), baseDir: BASE_DIR });
    const r = all(`${MINIMAL}sources:\n  files:\n    paths: [/etc/passwd, ../x, .htaccess, .htaccess, a/../../b]\n    site_paths: { 12: [config/app.php, /x] }\n`);
    expect(r.ok ? [] : formatConfigErrors(r.errors).split('\n').map((l) => l.replace(/^inline\.yaml:\d+:\d+: /, '').replace(/ \(got .*$/, ''))).toEqual([
      'sources.files.paths[0]: must be a path inside the site folder, relative to it (no leading / and no ..), like wp-config.php or config/app.php',
      'sources.files.paths[1]: must be a path inside the site folder, relative to it (no leading / and no ..), like wp-config.php or config/app.php',
      'sources.files.paths[3]: lists .htaccess twice',
      'sources.files.paths[4]: must be a path inside the site folder, relative to it (no leading / and no ..), like wp-config.php or config/app.php',
      'sources.files.site_paths.12[1]: must be a path inside the site folder, relative to it (no leading / and no ..), like wp-config.php or config/app.php',
    ]);
    const fine = all(`${MINIMAL}sources:\n  files:\n    paths: [.htaccess, wp-config.php, ./config/app.php]\n`);
    expect(fine.ok ? [] : formatConfigErrors(fine.errors)).toEqual([]);
  });

  it('refuse a heartbeat URL with credentials (the pings would go without them) and take LOCALHOST as loopback', () => {
    const hb = parseText(`${MINIMAL}heartbeat: { url: "http://user:\${HB}@hc.example.com/ping" }\n`, { HB: 'hb-secret-1' });
    const printed = hb.ok ? '' : formatConfigErrors(hb.errors);
    expect(printed).toMatch(/^inline\.yaml:\d+:\d+: heartbeat\.url: must not carry credentials \(user:password@\): an HTTP client does not send them/);
    expect(printed).not.toContain('hb-secret-1');
    const upper = parseText(`${MINIMAL}server: { listen: "LOCALHOST:8080" }\n`);
    expect(upper.ok ? [] : formatConfigErrors(upper.errors)).toEqual([]);
  });

  it('refuse a timer longer than Node can hold (it would fire at once, a heartbeat pinging without pause) and a timeout over an hour; units out of order stay malformed, not too long', () => {
    const text = [
      MINIMAL.replace('key: hc_live_test', 'key: hc_live_test\n  timeout: 1h1h').trimEnd(),
      'heartbeat: { url: "https://hc.example.com/ping/x", every: 30d, timeout: 2h }',
      'history: { prune_every: 25d }',
      '',
    ].join('\n');
    const r = parseText(text);
    expect(r.ok ? [] : formatConfigErrors(r.errors).split('\n')).toEqual([
      'inline.yaml:4:12: api.timeout: must be a duration greater than 0, like 10s, 1m (got "1h1h")',
      'inline.yaml:5:59: heartbeat.every: is too long: at most 24d (got "30d")',
      'inline.yaml:5:73: heartbeat.timeout: is too long: at most 1h (got "2h")',
      'inline.yaml:6:25: history.prune_every: is too long: at most 24d (got "25d")',
    ]);
  });

  it('say that a bare number needs a unit, written as a number or given by a variable', () => {
    const bare = parseText(MINIMAL.replace('key: hc_live_test', 'key: hc_live_test\n  timeout: ${T}'), { T: '45' });
    expect(bare.ok ? '' : formatConfigErrors(bare.errors)).toBe(
      'inline.yaml:4:12: api.timeout: must be a duration greater than 0, like 10s, 1m; a number needs a unit: 45s or 45m, not 45 (got "${T}"; a variable\'s value is not shown)',
    );
    // A negative number gets no unit advice: no unit makes it a duration.
    const negative = parseText(MINIMAL.replace('key: hc_live_test', 'key: hc_live_test\n  timeout: -5'));
    expect(negative.ok ? '' : formatConfigErrors(negative.errors)).toBe('inline.yaml:4:12: api.timeout: must be a duration greater than 0, like 10s, 1m (got -5)');
  });
});

describe('event matches', () => {
  it('name a variable events do not have at its line, with the near miss: in a route, a maintenance window and an inhibit target', () => {
    const text = [
      MINIMAL.trimEnd(),
      'channels: [{ name: ops, type: console }]',
      'routes: [{ match: "severty == \'critical\'", channels: [ops] }]',
      'maintenance: [{ name: nightly, schedule: "0 2 * * *", duration: 1h, match: "site_id == 1 && lables.team == \'a\'" }]',
      'inhibit: [{ source: site.offline, target: "nam != \'site.slow\'" }]',
      '',
    ].join('\n');
    const r = parseText(text);
    expect(r.ok ? [] : formatConfigErrors(r.errors).split('\n').map((l) => l.replace(/ \(got .*$/, ''))).toEqual([
      'inline.yaml:5:19: routes[0].match: uses unknown variable "severty" (did you mean severity?); a route match can use type, name, severity, status, subject, site_id, domain, rule, labels',
      'inline.yaml:6:76: maintenance[0].match: uses unknown variable "lables" (did you mean labels?); a maintenance match can use type, name, severity, status, subject, site_id, domain, rule, labels',
      'inline.yaml:7:43: inhibit[0].target: uses unknown variable "nam" (did you mean name?); an inhibit target can use type, name, severity, status, subject, site_id, domain, rule, labels',
    ]);
    // Spelt right, the same file is fine.
    const fixed = parseText(text.replace('severty', 'severity').replace('lables', 'labels').replace('nam !=', 'name !='));
    expect(fixed.ok ? [] : formatConfigErrors(fixed.errors)).toEqual([]);
  });

  it('refuse a match that gives something other than true or false (it would take nothing): in a route, a maintenance window, an inhibit target and a site label', () => {
    const text = [
      MINIMAL.trimEnd(),
      'channels: [{ name: ops, type: console }]',
      'routes: [{ match: "1 + 1", channels: [ops] }, { match: severity, channels: [ops] }, { match: labels, channels: [ops] }, { match: "[site_id]", channels: [ops] }]',
      'maintenance: [{ name: nightly, schedule: "0 2 * * *", duration: 1h, match: name }]',
      'inhibit: [{ source: site.offline, target: "site_id" }]',
      'site_labels: [{ match: domain, labels: { team: a } }]',
      '',
    ].join('\n');
    const r = parseText(text);
    expect(r.ok ? [] : formatConfigErrors(r.errors).split('\n').map((l) => l.replace(/ \(got .*$/, ''))).toEqual([
      'inline.yaml:5:19: routes[0].match: must be true or false for an event (like "site_id == 12"), but it gives a number',
      'inline.yaml:5:56: routes[1].match: must be true or false for an event (like "site_id == 12"), but it gives a string',
      'inline.yaml:5:94: routes[2].match: must be true or false for an event (like "site_id == 12"), but it gives a map',
      'inline.yaml:5:130: routes[3].match: must be true or false for an event (like "site_id == 12"), but it gives a list',
      'inline.yaml:6:76: maintenance[0].match: must be true or false for an event (like "site_id == 12"), but it gives a string',
      'inline.yaml:7:43: inhibit[0].target: must be true or false for an event (like "site_id == 12"), but it gives a number',
      'inline.yaml:8:24: site_labels[0].match: must be true or false for a site (like "domain.endsWith(\'.shop\')"), but it gives a string',
    ]);
    // A match that is true or false, or that errors on the sample only (a label it lacks), is fine.
    const fine = parseText(
      text
        .replace('"1 + 1"', '"site_id > 1"')
        .replace('match: severity,', "match: \"labels.client == 'acme'\",")
        .replace('match: labels,', 'match: "size(labels) > 0",')
        .replace('"[site_id]"', '"site_id in [1, 2]"')
        .replace('match: name }', "match: \"name == 'site.offline'\" }")
        .replace('target: "site_id"', 'target: "site_id != 3"')
        .replace('match: domain,', "match: \"domain.endsWith('.shop')\","),
    );
    expect(fine.ok ? [] : formatConfigErrors(fine.errors)).toEqual([]);
  });

  it('name a function CEL does not have at its line, with the near miss (the match would fail for every event and take none)', () => {
    const text = [
      MINIMAL.trimEnd(),
      'channels: [{ name: ops, type: console }]',
      'routes: [{ match: "domain.endswith(\'.shop\')", channels: [ops] }]',
      'inhibit: [{ source: site.offline, target: "frobnicate(name)" }]',
      '',
    ].join('\n');
    const r = parseText(text);
    expect(r.ok ? [] : formatConfigErrors(r.errors).split('\n').map((l) => l.replace(/ \(got .*$/, ''))).toEqual([
      'inline.yaml:5:19: routes[0].match: calls unknown function "endswith" (did you mean endsWith?)',
      'inline.yaml:6:43: inhibit[0].target: calls unknown function "frobnicate"',
    ]);
  });

  it('name a severity or status that no event has at its line, with the near miss, instead of a route that never takes an event', () => {
    const text = [
      MINIMAL.trimEnd(),
      'channels: [{ name: ops, type: console }, { name: pager, type: console }]',
      'routes: [{ match: "severity == \'critcal\'", channels: [pager] }, { match: "\'firing\' == status && severity in [\'warning\', \'Info\']", channels: [ops] }]',
      'inhibit: [{ source: site.offline, target: "status != \'resolve\'" }]',
      '',
    ].join('\n');
    const r = parseText(text);
    expect(r.ok ? [] : formatConfigErrors(r.errors).split('\n').map((l) => l.replace(/ \(got .*$/, ''))).toEqual([
      'inline.yaml:5:19: routes[0].match: compares severity with "critcal", which no event has (did you mean critical?); severity is one of critical, warning, info',
      'inline.yaml:5:74: routes[1].match: compares severity with "Info", which no event has (did you mean info?); severity is one of critical, warning, info',
      'inline.yaml:6:43: inhibit[0].target: compares status with "resolve", which no event has (did you mean resolved?); status is one of firing, resolved',
    ]);
    // A comprehension's own variable is not the event's, and a label's value is anyone's.
    const fine = parseText(
      text
        .replace('critcal', 'critical')
        .replace("'Info'", "'info'")
        .replace("status != 'resolve'", "[1].exists(severity, severity == 'x') && labels.severity == 'critcal'"),
    );
    expect(fine.ok ? [] : formatConfigErrors(fine.errors)).toEqual([]);
  });

  it('can use exactly the variables a route match sees of an event (and a silence match too)', async () => {
    const { MATCH_VARIABLES } = await import('../src/notify/match-variables.js');
    const { SILENCE_VARIABLES } = await import('../src/notify/silences.js');
    expect(SILENCE_VARIABLES).toEqual(MATCH_VARIABLES);
  });

  it('learn what a match gives from a sample bound exactly as routing binds a real event', async () => {
    const { SAMPLE_EVENT_BINDINGS } = await import('../src/notify/match-variables.js');
    const { routeBindings } = await import('../src/notify/routing.js');
    const event = {
      specversion: '1.0',
      id: 'x',
      source: 'hostwatch://x',
      type: 'hostwatch.site.offline',
      subject: 'sites/1/health',
      time: new Date(0).toISOString(),
      datacontenttype: 'application/json',
      data: { name: 'site.offline', severity: 'critical', status: 'firing', summary: 's', site_id: 1, domain: 'example.com', rule: 'site-offline', observed_at: new Date(0).toISOString() },
    } as unknown as Parameters<typeof routeBindings>[0];
    expect(SAMPLE_EVENT_BINDINGS).toEqual(routeBindings(event));
  });
});

describe('secrets', () => {
  it('may be unset for commands that use none (secretsOptional): every secret of every channel type gets a placeholder of its form', () => {
    const text = [
      'api: { base_url: https://panel.example.com, key: "${API_KEY}" }',
      'server: { listen: 127.0.0.1:8080, token: "${TOKEN}" }',
      'channels:',
      '  - { name: hooks, type: webhook, url: https://example.net/hook, secret: ["${HOOK_SECRET}", "${OLD_SECRET}"] }',
      '  - { name: ops, type: slack, url: "${SLACK_URL}" }',
      '  - { name: mail, type: email, to: a@example.net, from: b@example.net, smtp: { host: h, user: u, pass: "${SMTP_PASS}" } }',
      '  - { name: team, type: teams, url: "${TEAMS_URL}" }',
      '  - { name: disc, type: discord, url: "${DISCORD_URL}" }',
      '  - { name: pager, type: pagerduty, routing_key: "${PD_KEY}" }',
      '  - { name: genie, type: opsgenie, api_key: "${OG_KEY}" }',
      '  - { name: tg, type: telegram, bot_token: "${TG_TOKEN}", chat_id: 42 }',
      '  - { name: nt, type: ntfy, url: "${NTFY_URL}", token: "${NTFY_TOKEN}" }',
      'storage: { path: "${DB_PATH}" }',
      '',
    ].join('\n');
    const strict = parseText(text, { DB_PATH: '/tmp/x.db' });
    expect(strict.ok ? [] : strict.errors.map((e) => e.path)).toHaveLength(13);
    const relaxed = parseConfig(text, 'inline.yaml', { DB_PATH: '/tmp/x.db' }, { sourceNames: SOURCE_NAMES, baseDir: BASE_DIR, secretsOptional: true });
    expect(relaxed.ok ? [] : formatConfigErrors(relaxed.errors)).toEqual([]);
    // A variable that is not a secret stays required.
    const noDb = parseConfig(text, 'inline.yaml', {}, { sourceNames: SOURCE_NAMES, baseDir: BASE_DIR, secretsOptional: true });
    expect(noDb.ok ? [] : noDb.errors.map((e) => e.path)).toEqual(['storage.path']);
  });

  it('let a read-only command (cluster status) run without the daemon\'s own name: an unset ${HOSTWATCH_INSTANCE} stays an error for the daemon only', () => {
    const text = ['api: { base_url: https://panel.example.com, key: k }', 'storage: { url: "postgres://hw:${PGPASS}@db.example.net/hw" }', 'cluster: { instance: "${HOSTWATCH_INSTANCE}", lease: 30s }', ''].join('\n');
    const daemon = parseText(text, { PGPASS: 'pw' });
    expect(daemon.ok ? '' : formatConfigErrors(daemon.errors)).toContain('cluster.instance: environment variable HOSTWATCH_INSTANCE is not set');
    const readOnly = parseConfig(text, 'inline.yaml', { PGPASS: 'pw' }, { sourceNames: SOURCE_NAMES, baseDir: BASE_DIR, secretsOptional: true });
    expect(readOnly.ok ? [] : formatConfigErrors(readOnly.errors)).toEqual([]);
    // Set, it is read as written.
    const named = parseConfig(text, 'inline.yaml', { PGPASS: 'pw', HOSTWATCH_INSTANCE: 'web-2' }, { sourceNames: SOURCE_NAMES, baseDir: BASE_DIR, secretsOptional: true });
    expect(named.ok && named.config.cluster?.instance).toBe('web-2');
  });

  it('never prints a bad secret value: not in the formatted errors, the error objects or the thrown error', async () => {
    const secrets = {
      WEBHOOK_SECRET: 'whsec_not base64 hunter2',
      SLACK_URL: 'hooks.slack.com/services/T0/B0/hunter3',
    };
    // The key, the SMTP password and the token are written as numbers: the one way to make them invalid.
    const text = [
      'api:',
      '  base_url: https://panel.example.com',
      '  key: 11111111',
      'channels:',
      '  - { name: hooks, type: webhook, url: https://example.net/hook, secret: "${WEBHOOK_SECRET}" }',
      '  - { name: ops, type: slack, url: "${SLACK_URL}" }',
      '  - { name: mail, type: email, to: a@example.net, from: b@example.net, smtp: { host: h, user: u, pass: 44444444 } }',
      'server: { token: 55555555 }',
      '',
    ].join('\n');
    const result = parseText(text, secrets);
    const errors = result.ok ? [] : result.errors;
    expect(errors.map((e) => e.path)).toEqual([
      'api.key',
      'channels[0].secret',
      'channels[1].url',
      'channels[2].smtp.pass',
      'server.token',
    ]);
    expect(errors.map((e) => e.value)).toEqual(Array(5).fill('[redacted]'));
    const everything = [formatConfigErrors(errors), JSON.stringify(errors), new ConfigErrors(errors).message].join('\n');
    for (const value of ['11111111', 'hunter2', 'hunter3', '44444444', '55555555']) expect(everything).not.toContain(value);
    expect(formatConfigErrors(errors)).toContain('channels[0].secret: must be a Standard Webhooks secret');
    expect(formatConfigErrors(errors)).toContain('(got "[redacted]")');
  });

  it('never prints a variable\'s value, even in a key that holds no secret: two swapped variables name themselves instead', () => {
    const text = [
      'api:',
      '  base_url: ${HOSTWATCH_API_KEY}',
      '  key: ${HOSTWATCH_URL}',
      '  timeout: "${TIMEOUT:-soon}"',
      'channels:',
      '  - { name: mail, type: email, to: a@example.net, from: "Ops <${SMTP_PASS}>", smtp: { host: h, user: u, pass: "${SMTP_FROM}" } }',
      '',
    ].join('\n');
    const env = { HOSTWATCH_API_KEY: 'hwk_live_7f3a9c2e11', HOSTWATCH_URL: 'https://panel.agency.test', SMTP_PASS: 'S3cr3t!pw', SMTP_FROM: 'hw@example.net' };
    const result = parseText(text, env);
    const errors = result.ok ? [] : result.errors;
    expect(formatConfigErrors(errors).split('\n')).toEqual([
      'inline.yaml:2:13: api.base_url: must be an http(s) URL like https://panel.example.com (got "${HOSTWATCH_API_KEY}"; a variable\'s value is not shown)',
      expect.stringMatching(/^inline\.yaml:4:12: api\.timeout: must be a duration .*\(got "\$\{TIMEOUT:-soon\}"; a variable's value is not shown\)$/),
      'inline.yaml:6:57: channels[0].from: must be an e-mail address like ops@example.net or "Ops <ops@example.net>" (got "Ops <${SMTP_PASS}>"; a variable\'s value is not shown)',
    ]);
    const everything = [formatConfigErrors(errors), JSON.stringify(errors), new ConfigErrors(errors).message].join('\n');
    for (const value of Object.values(env)) expect(everything).not.toContain(value);
  });

  it('refuses credentials in api.base_url without showing them, and a query or fragment that every request path would land after', () => {
    const r = parseText('api:\n  base_url: "https://ops:hunter6@panel.example.com"\n  key: k\n');
    expect(r.ok ? '' : formatConfigErrors(r.errors)).toBe(
      'inline.yaml:2:13: api.base_url: must not carry credentials (user:password@): the panel takes the API key alone, in api.key (got "[redacted]")',
    );
    for (const url of ['https://panel.example.com?x=1', 'https://panel.example.com/#top']) {
      const q = parseText(`api:\n  base_url: "${url}"\n  key: k\n`);
      expect(q.ok ? '' : formatConfigErrors(q.errors)).toContain('api.base_url: must not have a query (?…) or a fragment (#…)');
    }
  });

  it('never prints the password of a webhook URL that carries credentials, written or from the environment; a user alone is refused too', () => {
    const text = [
      MINIMAL.trimEnd(),
      'channels:',
      `  - { name: a, type: webhook, secret: ${WEBHOOK_SECRET}, url: "https://ops:\${HOOK_PASS}@example.net/hook" }`,
      `  - { name: b, type: webhook, secret: ${WEBHOOK_SECRET}, url: "http://ops:s3cr%40t-written@127.0.0.1:9000/hook" }`,
      `  - { name: c, type: webhook, secret: ${WEBHOOK_SECRET}, url: "https://ops@example.net/hook" }`,
      '',
    ].join('\n');
    const result = parseText(text, { HOOK_PASS: 'hunter5-from-env' });
    const errors = result.ok ? [] : result.errors;
    expect(errors.map((e) => [e.path, e.line, e.value])).toEqual([
      ['channels[0].url', 5, '[redacted]'],
      ['channels[1].url', 6, '[redacted]'],
      ['channels[2].url', 7, '[redacted]'],
    ]);
    for (const e of errors) expect(e.message).toMatch(/^must not carry credentials .* Send them in a header of a webhook template instead/);
    const everything = [formatConfigErrors(errors), JSON.stringify(errors), new ConfigErrors(errors).message].join('\n');
    for (const value of ['hunter5', 's3cr', 'ops:', 'ops@']) expect(everything).not.toContain(value);
  });

  it('still shows an empty secret as empty, since that leaks nothing and is the usual mistake', () => {
    const result = parseText('api:\n  base_url: https://panel.example.com\n  key: "${HOSTWATCH_API_KEY}"\n', { HOSTWATCH_API_KEY: '' });
    expect(result.ok ? [] : formatConfigErrors(result.errors)).toBe(
      'inline.yaml:3:8: api.key: must be a non-empty API key, usually key: ${HOSTWATCH_API_KEY} (got "")',
    );
    // An empty list of webhook secrets too: "an empty list", not "[redacted]".
    const none = parseText(`${MINIMAL}channels:\n  - { name: h, type: webhook, url: "https://example.net/x", secret: [] }\n`);
    expect(none.ok ? '' : formatConfigErrors(none.errors)).toMatch(/channels\[0\]\.secret: .* \(got an empty list\)$/);
  });
});

describe('server.allowed_hosts and silences.max_duration', () => {
  it('names the entry and what is allowed when a host carries a port or a scheme, and a silence cap below a minute', () => {
    const result = parseText(`${MINIMAL}server:\n  allowed_hosts: [ok.example.net, "hostwatch.example.net:8080", "https://x.example"]\nsilences:\n  max_duration: 10s\n`);
    expect(result.ok ? [] : formatConfigErrors(result.errors).split('\n')).toEqual([
      'inline.yaml:5:35: server.allowed_hosts[1]: must be a host name like hostwatch.example.net, a leading dot for every name under a domain (.example.net), or * for any name (got "hostwatch.example.net:8080")',
      'inline.yaml:5:65: server.allowed_hosts[2]: must be a host name like hostwatch.example.net, a leading dot for every name under a domain (.example.net), or * for any name (got "https://x.example")',
      'inline.yaml:7:17: silences.max_duration: must be a duration of at least 1m, like 1m or 6m (got "10s")',
    ]);
  });
});

describe('environment substitution', () => {
  const withKey = (value: string) => `api:\n  base_url: https://panel.example.com\n  key: "${value}"\n`;
  const keyOf = (result: ParseResult) => (result.ok ? result.config.api.key : formatConfigErrors(result.errors));

  it('uses the default of ${VAR:-default} when VAR is unset or empty', () => {
    expect(keyOf(parseText(withKey('${KEY:-hc_default}'), {}))).toBe('hc_default');
    expect(keyOf(parseText(withKey('${KEY:-hc_default}'), { KEY: '' }))).toBe('hc_default');
  });

  it('prefers a set variable over the default', () => {
    expect(keyOf(parseText(withKey('${KEY:-hc_default}'), { KEY: 'hc_set' }))).toBe('hc_set');
  });

  it('replaces several references inside one value', () => {
    expect(keyOf(parseText(withKey('hc_${A}_${B:-b}'), { A: 'a' }))).toBe('hc_a_b');
  });

  it('reads $${ as a literal ${ and leaves a lone $ alone', () => {
    expect(keyOf(parseText(withKey('pa$$${NOT_A_VAR}$'), {}))).toBe('pa$${NOT_A_VAR}$');
  });

  it('accepts numbers and booleans from the environment for numeric and boolean keys', () => {
    const text = `${MINIMAL}  retries: \${RETRIES}\nlog:\n  pretty: \${PRETTY:-true}\n`;
    const result = parseText(text, { RETRIES: '7' });
    expect(result.ok && [result.config.api.retries, result.config.log.pretty]).toEqual([7, true]);
    // The spellings YAML reads as booleans, also from a variable; nothing else.
    for (const [written, value] of [['True', true], ['FALSE', false]] as const) {
      const r = parseText(text, { RETRIES: '7', PRETTY: written });
      expect(r.ok && r.config.log.pretty).toBe(value);
    }
    const yes = parseText(text, { RETRIES: '7', PRETTY: 'yes' });
    expect(yes.ok ? '' : formatConfigErrors(yes.errors)).toContain('log.pretty: must be true or false');
  });

  it('does not substitute inside keys or comments', () => {
    const result = parseText(`${MINIMAL}# \${IN_A_COMMENT}\n`, {});
    expect(result.ok).toBe(true);
  });
});

describe('loadConfig', () => {
  it('reads the file and resolves relative paths against its folder', async () => {
    const file = join(FIXTURES, 'valid-minimal.yaml');
    const config = await loadConfig(relative(process.cwd(), file), {}, { sourceNames: SOURCE_NAMES });
    expect(config.file).toBe(file);
    expect(config.storage).toEqual({ engine: 'sqlite', path: join(FIXTURES, 'data', 'hostwatch.db') });
  });

  it('throws ConfigErrors with code config_invalid and the file as it was given', async () => {
    const file = relative(process.cwd(), join(FIXTURES, 'bad-duration.yaml'));
    const error: unknown = await loadConfig(file, {}, { sourceNames: SOURCE_NAMES }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigErrors);
    expect((error as ConfigErrors).code).toBe('config_invalid');
    expect((error as ConfigErrors).format()).toBe(
      `${file}:4:12: api.timeout: must be a duration greater than 0, like 10s, 1m (got "soon")`,
    );
  });

  it('reports a missing file as one ConfigError without a line', async () => {
    const error: unknown = await loadConfig('no/such/hostwatch.yaml', {}, { sourceNames: SOURCE_NAMES }).catch((e: unknown) => e);
    expect((error as ConfigErrors).errors).toEqual([
      {
        file: 'no/such/hostwatch.yaml',
        line: null,
        column: null,
        path: '',
        message: 'cannot read the config file: it does not exist (pass an existing YAML file with -c)',
      },
    ]);
    expect((error as ConfigErrors).format()).toBe(
      'no/such/hostwatch.yaml: cannot read the config file: it does not exist (pass an existing YAML file with -c)',
    );
  });
});

describe('durations', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['5m', 300_000],
    ['6h', 21_600_000],
    ['2d', 172_800_000],
    ['1h30m', 5_400_000],
    ['1m30s500ms', 90_500],
    ['0s', 0],
    ['0', 0],
  ])('reads %s as %i milliseconds', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', 'soon', '30', '-5s', '1.5h', '30m1h', '1m1m', '5 m', '10S', ' 5m'])('rejects %j', (text) => {
    expect(parseDuration(text)).toBeNull();
  });

  it('formats milliseconds the way they are written, largest unit first', () => {
    expect([0, 500, 30_000, 5_400_000, 90_500, 172_800_000].map(formatDuration)).toEqual(['0s', '500ms', '30s', '1h30m', '1m30s500ms', '2d']);
  });

  it('formats what it parses back to the same text', () => {
    for (const text of ['5s', '5m', '30m', '2h', '14h', '1d12h', '750ms']) expect(formatDuration(parseDuration(text) ?? -1)).toBe(text);
  });
});

describe('YAML features', () => {
  it('expands anchors and aliases', () => {
    const text = `${MINIMAL}channels:\n  - &base { name: a, type: console }\nroutes:\n  - channels: [a]\n  - channels: [*missing]\n`;
    const result = parseText(text);
    expect(result.ok ? [] : formatConfigErrors(result.errors)).toBe(
      'inline.yaml:8:16: routes[1].channels[0]: uses *missing, but no &missing anchor is defined before it',
    );
    const ok = parseText(`${MINIMAL}  retries: &n 2\n  max_concurrency: *n\n`);
    expect(ok.ok && [ok.config.api.retries, ok.config.api.max_concurrency]).toEqual([2, 2]);
  });

  it('stops expanding aliases after 1000, so a small file cannot grow huge', () => {
    const lines = ['x0: &x0 [a, a, a, a, a, a, a, a, a, a]'];
    for (let i = 1; i < 9; i++) lines.push(`x${i}: &x${i} [${Array(10).fill(`*x${i - 1}`).join(', ')}]`);
    const result = parseText(`${MINIMAL}${lines.join('\n')}\n`);
    const messages = result.ok ? [] : result.errors.map((e) => e.message);
    expect(messages).toContain('uses more than 1000 aliases (*name); write the values out');
  });
});

describe('the request budget keys', () => {
  const withSources = (sources: string, api = ''): ParseResult =>
    parseConfig(`api:\n  base_url: https://panel.example.com\n  key: hc_live_test\n${api}sources:\n${sources}`, 'budget.yaml', {}, { ...CONFIG_SOURCES, baseDir: BASE_DIR });
  const errors = (r: ParseResult): string[] => (r.ok ? [] : formatConfigErrors(r.errors).split('\n'));

  it('reads api.max_reply_bytes as a size (binary multiples) or a number of bytes', () => {
    const size = (v: string): number | string => {
      const r = withSources('  health: {}\n', `  max_reply_bytes: ${v}\n`);
      return r.ok ? r.config.api.max_reply_bytes : errors(r).join('\n');
    };
    expect(size('16MB')).toBe(16 * 1024 * 1024);
    expect(size('512 kb')).toBe(512 * 1024);
    expect(size('1GB')).toBe(1024 ** 3);
    expect(size('200000')).toBe(200_000);
    expect(size('1KB')).toBe('budget.yaml:4:20: api.max_reply_bytes: must be a size like 16MB, 512KB or 1GB (or a number of bytes), from 64KB to 1GB (got "1KB")');
    expect(size('lots')).toBe('budget.yaml:4:20: api.max_reply_bytes: must be a size like 16MB, 512KB or 1GB (or a number of bytes), from 64KB to 1GB (got "lots")');
  });

  it('takes a priority per scheduled source, and names what is allowed otherwise', () => {
    const r = withSources('  backups: { priority: critical }\n  seo_metrics: { priority: low }\n');
    expect(r.ok && r.config.sources['backups']!.priority).toBe('critical');
    expect(errors(withSources('  backups: { priority: urgent }\n'))).toEqual([
      'budget.yaml:5:24: sources.backups.priority: must be one of critical, high, normal, low (critical keeps its interval when the request budget is short; low stretches first) (got "urgent")',
    ]);
  });

  it('refuses a priority on a detail or a view and an interval on a view (naming the source whose cycles read it), and a priority on the site list or switching it off', () => {
    expect(errors(withSources('  cron_runs: { priority: high }\n  dns_publishing: { priority: low }\n  sites: { priority: low }\n'))).toEqual([
      'budget.yaml:5:26: sources.cron_runs.priority: cannot be set here: cron_runs is read in the cycles of cron_list; set sources.cron_list.priority (got "high")',
      'budget.yaml:6:31: sources.dns_publishing.priority: cannot be set here: dns_publishing is read in the cycles of dns; set sources.dns.priority (got "low")',
      'budget.yaml:7:22: sources.sites.priority: cannot be set: the site list is always critical (every per-site source depends on it) (got "low")',
    ]);
    // Nor can a view's interval, nor can the site list be switched off: both were ignored.
    expect(errors(withSources('  dns_publishing: { every: 1h }\n  sites: { enabled: false }\n'))).toEqual([
      'budget.yaml:5:28: sources.dns_publishing.every: cannot be set here: dns_publishing is read in the cycles of dns; set sources.dns.every (got "1h")',
      'budget.yaml:6:21: sources.sites.enabled: cannot be false: every per-site source needs the site list; to watch fewer sites, list them in sites: [12, 40] (got false)',
    ]);
    // A detail's every is its slow schedule: taken.
    expect(errors(withSources('  sites: { enabled: true }\n  cron_runs: { every: 2h }\n'))).toEqual([]);
  });
});
