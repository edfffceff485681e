/**
 * Config text -> normalized Config, or every error found. Pure: the caller supplies the text,
 * the environment and the source names; nothing here reads files or the environment (only a
 * relative `file` name is made absolute against the current directory, for Config.file).
 *
 * Steps: YAML -> plain data with positions and `${VAR}` resolved (yaml-tree.ts) -> schema of
 * the written shape (schema.ts) -> checks across keys -> defaults and milliseconds (Config).
 */
import { dirname, isAbsolute, resolve } from 'node:path';
import { parseCel, unknownFunctionsIn } from '../cel.js';
import { closest } from '../closest.js';
import { SAMPLE_SITE_BINDINGS, SITE_LABEL_VARIABLES, unknownSiteLabelVariables } from '../labels.js';
import { MATCH_VARIABLES, matchValueMessage, nonBooleanMatch, nonBooleanMessage, SAMPLE_EVENT_BINDINGS, unknownMatchValues, unknownMatchVariables } from '../notify/match-variables.js';
import { checkTemplate, jsonBodyProblem } from '../notify/templates.js';
import type { z } from 'zod';
import { substituteEnv, type Env } from './env.js';
import { formatPath, REDACTED, type ConfigError } from './errors.js';
import {
  buildConfigSchema,
  channelNameProblem,
  isChannelType,
  isSecretPath,
  parseDigest,
  isLoopback,
  ROUTE_KEYS,
  listenHost,
  REQUIRED,
  unsetPlaceholder,
  UNKNOWN_KEY,
  UNKNOWN_SOURCE,
  type CheckedConfig,
} from './schema.js';
import type { ChannelConfig, Config } from './types.js';
import { readYamlTree, type KeyPath, type YamlTree } from './yaml-tree.js';

export type ParseResult = { ok: true; config: Config } | { ok: false; errors: ConfigError[] };

export interface ParseOptions {
  /** Names of the sources that exist; `sources:` may only name these. */
  sourceNames: readonly string[];
  /**
   * Sources the scheduler does not run itself (details and views), by the source whose
   * cycle reads them: `priority` belongs to that one.
   */
  readBy?: Readonly<Record<string, string>>;
  /** The views among them: read at their origin's interval, so an `every` of theirs is refused. */
  views?: readonly string[];
  /** Folder that relative paths (storage.path, rules) resolve against; default: the config file's folder. */
  baseDir?: string;
  /**
   * For commands that call neither the API nor a channel (events, explain, deliveries,
   * silences, backtest, cluster status): a secret or `cluster.instance` whose environment
   * variable is unset gets a placeholder instead of being an error (unsetPlaceholder), so
   * these commands run without values they do not use.
   */
  secretsOptional?: boolean;
  /**
   * With secretsOptional, for a command that neither serves nor asks the daemon's server
   * (all of the above; not `health`): an unset variable in `server.listen` gets a
   * placeholder too.
   */
  serverUnused?: boolean;
  /**
   * Why the SQLite file storage.path names (resolved) could not be opened or created, or null
   * (`check` passes storagePathProblem, which only looks). Its answer is an error at
   * storage.path's line, reported with the file's other errors.
   */
  storagePath?: (path: string) => string | null;
  /**
   * Why a `rules` entry (resolved) cannot be read, or null: the commands pass one that looks
   * at the file system, so a missing rule file is an error at its line, with the file's others.
   */
  rulePath?: (path: string) => string | null;
}

/** Every default, in one place (docs/configuration.md lists the same values). */
export const DEFAULTS = {
  name: 'hostwatch',
  api: { timeout_ms: 30_000, max_requests_per_second: 5, max_concurrency: 4, retries: 3, max_pages: 50, max_reply_bytes: 16 * 1024 * 1024 }, // A30 in docs/api-assumptions.md
  storage: { path: './data/hostwatch.db' },
  channelTimeoutMs: 10_000,
  smtpPort: 587,
  /** The providers' public API addresses; `api_url:` overrides them (a proxy, a test). */
  providers: {
    pagerduty: 'https://events.pagerduty.com',
    opsgenie: { us: 'https://api.opsgenie.com', eu: 'https://api.eu.opsgenie.com' },
    telegram: 'https://api.telegram.org',
  },
  webhookContentType: 'application/json',
  delivery: {
    // The Standard Webhooks retry schedule, without its immediate first attempt.
    retry_schedule_ms: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 50_400_000, 72_000_000, 86_400_000],
    drain_timeout_ms: 30_000,
    concurrency: 8,
    // Standard Webhooks / Svix disable an endpoint after 5 days of failures.
    disable_after_ms: 5 * 86_400_000,
  },
  route: { group_wait_ms: 30_000, group_interval_ms: 5 * 60_000 },
  /** Without an `inhibit` key: site.offline holds back its site's other alerts (changes pass). */
  inhibit: [{ source: 'site.offline', target: null }],
  log: { level: 'info', pretty: false },
  /** The most sites a site list may hold: far above any real agency, far below a hostile reply. */
  sitesMax: 10_000,
  /** The most events one poll of a source emits; past it, one summary event (docs/events.md). */
  maxEventsPerPoll: 100,
  /** /readyz turns 503 after this long without a successful poll. */
  notReadyAfterMs: 30 * 60_000,
  /** The longest silence the API and the CLI accept: a forgotten (or forged) silence ends. */
  silenceMaxMs: 30 * 86_400_000,
  /** source.degraded: this many failed polls in a row, or two or more over this long. */
  degraded: { after_failures: 3, after_ms: 10 * 60_000 },
  history: { retention_ms: 90 * 86_400_000, prune_every_ms: 3_600_000 },
  heartbeat: { every_ms: 5 * 60_000, timeout_ms: 10_000 },
  watchdog: { every_ms: 60 * 60_000 },
  incidents: { min_sites: 5, window_ms: 15 * 60_000, wait_ms: 30_000 },
  cluster: { lease_ms: 30_000 },
} as const;

/**
 * Parses and validates config text; returns the normalized Config or all errors, in file order.
 * `file` names the file in errors as given; Config.file is it made absolute (names like
 * "<demo>" are kept as they are).
 */
export function parseConfig(text: string, file: string, env: Env, opts: ParseOptions): ParseResult {
  const tree = readYamlTree(text, file, env, opts.secretsOptional ? { placeholder: (path) => unsetPlaceholder(path, { serverUnused: opts.serverUnused }) } : {});
  if (tree.syntaxFailed) return { ok: false, errors: tree.errors };

  const data = tree.data ?? {};
  const checked = buildConfigSchema(opts.sourceNames).safeParse(data);
  const errors = [
    ...tree.errors,
    // Before the schema's "must be a PostgreSQL URL": one error per key, and this one says why.
    ...storageUrlCheck(data, tree, file, env),
    ...(checked.success ? [] : issuesToErrors(checked.error.issues, [], data, tree, file)),
    ...crossCheck(data, tree, file, opts.readBy ?? {}, opts.views ?? []),
    ...storageCheck(data, tree, file, opts),
    ...rulesCheck(data, tree, file, opts),
  ];
  if (errors.length > 0 || !checked.success) return { ok: false, errors: tidy(errors, tree) };

  return { ok: true, config: normalize(checked.data, absoluteOf(file), baseDirOf(file, opts)) };
}

function absoluteOf(file: string): string {
  return isAbsolute(file) || file.startsWith('<') ? file : resolve(file);
}

/** A path of the config (storage.path, rules) as used: relative to `baseDir`; `:memory:` stays. */
function resolveIn(baseDir: string, path: string): string {
  return path === ':memory:' ? path : resolve(baseDir, path);
}

/** The folder relative paths resolve against (ParseOptions.baseDir). */
function baseDirOf(file: string, opts: ParseOptions): string {
  return opts.baseDir ?? dirname(absoluteOf(file));
}

/** The SQLite path's problem (ParseOptions.storagePath), at storage.path's line, or at none when the default path is used. */
function storageCheck(data: unknown, tree: YamlTree, file: string, opts: ParseOptions): ConfigError[] {
  if (!opts.storagePath) return [];
  const storage = (data as { storage?: unknown } | null)?.storage;
  const written = storage !== null && typeof storage === 'object' ? (storage as Record<string, unknown>) : {};
  if ('url' in written) return [];
  const path = written['path'] ?? DEFAULTS.storage.path;
  if (typeof path !== 'string' || path === '') return [];
  const problem = opts.storagePath(resolveIn(baseDirOf(file, opts), path));
  if (problem === null) return [];
  if (!('path' in written)) return [{ file, line: null, column: null, path: 'storage.path', message: `${problem} (the default path)` }];
  const position = tree.valueAt(['storage', 'path']);
  return [{ file, line: position.line, column: position.column, path: 'storage.path', message: problem }];
}

/** Each `rules` entry that cannot be read (ParseOptions.rulePath), at its line. */
function rulesCheck(data: unknown, tree: YamlTree, file: string, opts: ParseOptions): ConfigError[] {
  const rules = (data as { rules?: unknown } | null)?.rules;
  if (!opts.rulePath || !Array.isArray(rules)) return [];
  return rules.flatMap((entry: unknown, index) => {
    if (typeof entry !== 'string' || entry.trim() === '') return [];
    const problem = opts.rulePath!(resolveIn(baseDirOf(file, opts), entry));
    if (problem === null) return [];
    const position = tree.valueAt(['rules', index]);
    return [{ file, line: position.line, column: position.column, path: `rules[${index}]`, message: problem }];
  });
}

// ---- zod issues -> ConfigErrors -----------------------------------------------------------

function issuesToErrors(
  issues: readonly z.core.$ZodIssue[],
  base: KeyPath,
  data: unknown,
  tree: YamlTree,
  file: string,
): ConfigError[] {
  const out: ConfigError[] = [];
  for (const issue of issues) {
    const path = [...base, ...(issue.path as (string | number)[])];
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) out.push(unknownKeyError(issue.message, [...path, key], tree, file));
      continue;
    }
    // A bad name of a map of the user's own names (labels): the name is what is wrong, not its value.
    if (issue.code === 'invalid_key') {
      const position = tree.keyAt(path);
      out.push({ file, line: position.line, column: position.column, path: formatPath(path), message: `${issue.message} (got the name ${JSON.stringify(String(path.at(-1)))})` });
      continue;
    }
    // A union that failed in every branch: if one branch got past the outer shape (a list
    // with one bad item), its inner errors are the useful ones; else the union's own message.
    if (issue.code === 'invalid_union' && issue.errors.length > 0) {
      const inner = issue.errors.find((branch) => branch.length > 0 && branch.every((i) => i.path.length > 0));
      if (inner !== undefined) {
        out.push(...issuesToErrors(inner, path, data, tree, file));
        continue;
      }
    }
    out.push(valueError(path, issue.message, data, tree, file));
  }
  return out;
}

/** An error about the value at `path`, with "(got ...)", or "is required" when it is missing. */
function valueError(path: KeyPath, message: string, data: unknown, tree: YamlTree, file: string): ConfigError {
  const value = valueAtPath(data, path);
  const position = tree.valueAt(path);
  const base = { file, line: position.line, column: position.column, path: formatPath(path) };
  if (value === undefined) {
    return { ...base, message: message.startsWith(REQUIRED) ? message : `${REQUIRED}; ${message}` };
  }
  if (message.startsWith(REQUIRED)) return { ...base, message };
  // An empty value (or an empty list of secrets) reveals nothing, and is the usual mistake.
  const secret = isSecretPath(path, data) && value !== null && value !== '' && !(Array.isArray(value) && value.length === 0);
  const shown = secret ? REDACTED : value;
  // A value from the environment is named by its variable, never shown: a secret written
  // into the wrong key (base_url: ${HOSTWATCH_API_KEY}) must not be printed.
  const written = secret || value === '' ? undefined : tree.writtenAt(path);
  if (written !== undefined) return { ...base, value: REDACTED, message: `${message} (got ${JSON.stringify(written)}; a variable's value is not shown)` };
  return { ...base, value: shown, message: `${message} (got ${showValue(shown)})` };
}

function unknownKeyError(message: string, path: KeyPath, tree: YamlTree, file: string): ConfigError {
  const key = String(path[path.length - 1]);
  const allowedText = message.slice(message.indexOf('allowed: ') + 'allowed: '.length);
  const allowed = allowedText === '(none)' ? [] : allowedText.split(', ');
  const suggestion = closest(key, allowed);
  const kind = message.startsWith(UNKNOWN_SOURCE) ? UNKNOWN_SOURCE : UNKNOWN_KEY;
  const onChannel = path.length === 3 && path[0] === 'channels' && ROUTE_KEYS.has(key);
  const hint = onChannel
    ? ` (${key} is a route's key: set it in routes, on the route that names this channel; docs/routing.md)`
    : suggestion === null
      ? ''
      : ` (did you mean ${suggestion}?)`;
  const position = tree.keyAt(path);
  return { file, line: position.line, column: position.column, path: formatPath(path), message: `${kind}${hint}; allowed: ${allowedText}` };
}

/** How a value is shown after "got": text quoted, lists and maps by kind (they can be large). */
function showValue(value: unknown): string {
  if (Array.isArray(value)) return value.length === 0 ? 'an empty list' : 'a list';
  if (value !== null && typeof value === 'object') return 'a map';
  if (typeof value === 'string') {
    const shown = value.length > 80 ? `${value.slice(0, 77)}...` : value;
    return JSON.stringify(shown);
  }
  return String(value);
}

function valueAtPath(data: unknown, path: KeyPath): unknown {
  let current = data;
  for (const segment of path) {
    if (current === null || typeof current !== 'object') return undefined;
    if (!Object.prototype.hasOwnProperty.call(current, segment)) return undefined;
    current = (current as Record<string | number, unknown>)[segment];
  }
  return current;
}

/**
 * Drops errors about values whose `${VAR}` failed (already reported), keeps one error per
 * path, and sorts by position so the list reads top to bottom like the file.
 */
function tidy(errors: readonly ConfigError[], tree: YamlTree): ConfigError[] {
  const seen = new Set<string>();
  const under = (path: string, p: string): boolean => path === p || path.startsWith(`${p}.`) || path.startsWith(`${p}[`);
  const underUnresolved = (path: string) => [...tree.unresolved].some((p) => under(path, p));
  // A key that does not exist is the problem whatever its value: its error stands even where
  // the value names an unset ${VAR}, and that variable's error goes (`secert: ${SECRET}`
  // says "did you mean secret?" at once, not "SECRET is not set" first).
  const unknownKey = (error: ConfigError): boolean =>
    !tree.errors.includes(error) && (error.message.startsWith(UNKNOWN_KEY) || error.message.startsWith(UNKNOWN_SOURCE));
  const unknownPaths = errors.filter(unknownKey).map((e) => e.path);
  const kept = errors.filter((error) => {
    const fromTree = tree.errors.includes(error);
    if (fromTree && tree.unresolved.has(error.path) && unknownPaths.some((p) => under(error.path, p))) return false;
    if (!fromTree && !unknownKey(error) && underUnresolved(error.path)) return false;
    // One error per path, except that one value may have several failed ${VAR}s.
    const key = fromTree ? `${error.path}\n${error.message}` : error.path;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  return kept.sort((a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0));
}

// ---- checks across keys -------------------------------------------------------------------

/** The one source that takes `paths` (the opt-in file watch). */
const PATHS_SOURCE = 'files';
/** The site list, whose priority is fixed. */
const SITE_LIST = 'sites';

/**
 * storage names one engine, channel names are unique and routes name defined channels. These run on the written data
 * even when other keys are invalid, so one run reports everything.
 */
function crossCheck(data: unknown, tree: YamlTree, file: string, readBy: Readonly<Record<string, string>>, views: readonly string[]): ConfigError[] {
  const errors: ConfigError[] = [];
  const record = (data !== null && typeof data === 'object' ? data : {}) as Record<string, unknown>;
  const channels = record['channels'] ?? [];
  const routes = record['routes'] ?? [];
  const storage = record['storage'];
  if (storage !== null && typeof storage === 'object' && 'path' in storage && 'url' in storage) {
    // Either engine, never both: which one would hold the events is not a guess to make.
    errors.push(valueError(['storage', 'url'], 'cannot be combined with storage.path: give path (SQLite) or url (PostgreSQL), not both', data, tree, file));
  }
  const cluster = record['cluster'];
  const postgres = storage !== null && typeof storage === 'object' && 'url' in storage;
  if (cluster !== null && cluster !== undefined && !postgres) {
    // A cluster shares one database between processes: a SQLite file is one daemon's.
    errors.push(
      valueError(
        ['cluster'],
        'needs PostgreSQL (storage.url): a cluster shares one database between instances, and a SQLite file (storage.path) is used by one daemon at a time. Remove cluster:, or set storage.url (docs/cluster.md)',
        data,
        tree,
        file,
      ),
    );
  }
  const sources = record['sources'];
  if (sources !== null && typeof sources === 'object') {
    for (const [name, override] of Object.entries(sources as Record<string, unknown>)) {
      const owner = readBy[name];
      const has = (key: string): boolean => override !== null && typeof override === 'object' && key in override;
      // A detail or a view is read in its owner's cycles: its own priority would be ignored,
      // and a view's interval too (a detail's `every` is its slow schedule).
      for (const key of views.includes(name) ? ['priority', 'every'] : ['priority']) {
        if (owner !== undefined && has(key)) {
          errors.push(valueError(['sources', name, key], `cannot be set here: ${name} is read in the cycles of ${owner}; set sources.${owner}.${key}`, data, tree, file));
        }
      }
      if (name === SITE_LIST && has('priority')) {
        errors.push(valueError(['sources', name, 'priority'], 'cannot be set: the site list is always critical (every per-site source depends on it)', data, tree, file));
      }
      if (name === SITE_LIST && has('enabled') && (override as Record<string, unknown>)['enabled'] === false) {
        errors.push(
          valueError(['sources', name, 'enabled'], 'cannot be false: every per-site source needs the site list; to watch fewer sites, list them in sites: [12, 40]', data, tree, file),
        );
      }
      // `paths` only means something to the file watch; elsewhere it would be silently ignored.
      if (name === PATHS_SOURCE || override === null || typeof override !== 'object') continue;
      for (const key of ['paths', 'site_paths']) {
        if (key in override) errors.push(valueError(['sources', name, key], `is only for the ${PATHS_SOURCE} source`, data, tree, file));
      }
    }
  }
  errors.push(...serverCheck(record['server'], data, tree, file));
  if (!Array.isArray(channels)) return errors;

  channels.forEach((channel: unknown, index) => {
    for (const [path, text] of templatesOf(channel)) {
      const problems = checkTemplate(text);
      for (const problem of problems) errors.push(valueError(['channels', index, ...path], problem, data, tree, file));
      const json = problems.length === 0 && jsonBodyOf(channel, path) ? jsonBodyProblem(text) : null;
      if (json !== null) errors.push(valueError(['channels', index, ...path], json, data, tree, file));
    }
  });

  // A channel of an unknown type gets one error from the schema, on its type; its name is
  // checked here, so one run reports both.
  channels.forEach((channel: unknown, index) => {
    if (channel === null || typeof channel !== 'object' || isChannelType((channel as { type?: unknown }).type)) return;
    const problem = channelNameProblem((channel as { name?: unknown }).name);
    if (problem) errors.push(valueError(['channels', index, 'name'], problem, data, tree, file));
  });

  const names = new Map<string, number>();
  channels.forEach((channel: unknown, index) => {
    const name = (channel as { name?: unknown } | null)?.name;
    if (typeof name !== 'string') return;
    const earlier = names.get(name);
    if (earlier === undefined) names.set(name, index);
    else errors.push(valueError(['channels', index, 'name'], `must be unique; channels[${earlier}] is already named ${name}`, data, tree, file));
  });

  // Every CEL expression of the file is parsed here, so `check` names its file and line.
  const checkCel = (path: (string | number)[], expr: unknown): void => {
    if (typeof expr !== 'string' || expr.trim() === '') return;
    try {
      parseCel(expr);
    } catch (e) {
      errors.push(valueError(path, `is not a valid CEL expression: ${(e as Error).message}`, data, tree, file));
    }
  };
  for (const [key, field] of [['maintenance', 'match'], ['inhibit', 'target'], ['site_labels', 'match']] as const) {
    const list = record[key];
    if (!Array.isArray(list)) continue;
    list.forEach((item: unknown, index) => checkCel([key, index, field], (item as Record<string, unknown> | null)?.[field]));
  }
  // A match over a variable its events or sites do not have (`severty`) would match nothing,
  // silently: a critical route that never takes an event, a label never given.
  const matchVariables = [
    ['site_labels', 'match', 'a site label match', SITE_LABEL_VARIABLES, unknownSiteLabelVariables],
    ['routes', 'match', 'a route match', MATCH_VARIABLES, unknownMatchVariables],
    ['maintenance', 'match', 'a maintenance match', MATCH_VARIABLES, unknownMatchVariables],
    ['inhibit', 'target', 'an inhibit target', MATCH_VARIABLES, unknownMatchVariables],
  ] as const;
  for (const [key, field, what, known, unknownOf] of matchVariables) {
    const list = record[key];
    if (!Array.isArray(list)) continue;
    list.forEach((item: unknown, index) => {
      const match = (item as Record<string, unknown> | null)?.[field];
      if (typeof match !== 'string' || match.trim() === '') return;
      let unknown: string[];
      try {
        unknown = unknownOf(match);
      } catch {
        return; // the syntax error is reported above (checkCel)
      }
      const functions = unknownFunctionsIn(parseCel(match).expr);
      for (const f of functions) errors.push(valueError([key, index, field], `calls unknown function "${f.name}"${f.near ? ` (did you mean ${f.near}?)` : ''}`, data, tree, file));
      if (functions.length > 0) return;
      if (unknown.length === 0) {
        const gives = nonBooleanMatch(match, known === MATCH_VARIABLES ? SAMPLE_EVENT_BINDINGS : SAMPLE_SITE_BINDINGS);
        if (gives !== null) errors.push(valueError([key, index, field], known === MATCH_VARIABLES ? nonBooleanMessage(gives) : nonBooleanMessage(gives, 'a site', "domain.endsWith('.shop')"), data, tree, file));
        else if (known === MATCH_VARIABLES) errors.push(...unknownMatchValues(match).map((u) => valueError([key, index, field], matchValueMessage(u), data, tree, file)));
        return;
      }
      const near = unknown.map((n) => closest(n, known)).find((n) => n !== null);
      errors.push(
        valueError(
          [key, index, field],
          `uses unknown variable ${unknown.map((n) => `"${n}"`).join(', ')}${near ? ` (did you mean ${near}?)` : ''}; ${what} can use ${known.join(', ')}`,
          data,
          tree,
          file,
        ),
      );
    });
  }

  if (!Array.isArray(routes)) return errors;
  const defined = [...names.keys()];
  const allowed = defined.length === 0 ? 'but no channels are defined' : `one of ${defined.join(', ')}`;
  routes.forEach((route: unknown, routeIndex) => {
    checkCel(['routes', routeIndex, 'match'], (route as { match?: unknown } | null)?.match);
    const targets = (route as { channels?: unknown } | null)?.channels;
    if (!Array.isArray(targets)) return;
    targets.forEach((target: unknown, index) => {
      if (typeof target === 'string' && !names.has(target)) {
        errors.push(valueError(['routes', routeIndex, 'channels', index], `must name a defined channel, ${allowed}`, data, tree, file));
      }
    });
  });
  return errors;
}

/** A server reachable from other machines needs a token: `run` would refuse to start without one. */
function serverCheck(server: unknown, data: unknown, tree: YamlTree, file: string): ConfigError[] {
  if (server === null || typeof server !== 'object') return [];
  const { listen, token } = server as Record<string, unknown>;
  const host = typeof listen === 'string' ? listenHost(listen) : null;
  if (host === null || isLoopback(host) || (typeof token === 'string' && token.trim() !== '')) return [];
  return [
    valueError(
      ['server', 'listen'],
      'is reachable from other machines, so it needs server.token (a bearer token, like token: ${HOSTWATCH_TOKEN}); or listen on 127.0.0.1',
      data,
      tree,
      file,
    ),
  ];
}

/** Whether a template path is a webhook's body sent as JSON (its content_type, JSON by default). */
function jsonBodyOf(channel: unknown, path: KeyPath): boolean {
  if (path.length !== 2 || path[1] !== 'body' || (channel as { type?: unknown }).type !== 'webhook') return false;
  const type = ((channel as { template?: { content_type?: unknown } }).template ?? {}).content_type;
  return type === undefined || (typeof type === 'string' && /json/i.test(type));
}

/**
 * The Liquid templates a written channel holds, with their key paths: a chat channel's
 * `template`, a webhook's `template.body` and `template.headers.*`. They are checked here,
 * variables included, so `check` names the file and line of an unknown variable.
 */
function templatesOf(channel: unknown): Array<[KeyPath, string]> {
  if (channel === null || typeof channel !== 'object') return [];
  const t = (channel as { template?: unknown }).template;
  if (typeof t === 'string') return t.trim() === '' ? [] : [[['template'], t]];
  if (t === null || typeof t !== 'object') return [];
  const out: Array<[KeyPath, string]> = [];
  const { body, headers } = t as { body?: unknown; headers?: unknown };
  if (typeof body === 'string') out.push([['template', 'body'], body]);
  if (headers !== null && typeof headers === 'object') {
    for (const [name, value] of Object.entries(headers)) if (typeof value === 'string') out.push([['template', 'headers', name], value]);
  }
  return out;
}

// ---- written -> normalized ----------------------------------------------------------------

function normalize(written: CheckedConfig, file: string, baseDir: string): Config {
  const api = written.api;
  const resolvePath = (path: string) => resolveIn(baseDir, path);
  const sources: Config['sources'] = {};
  for (const [name, override] of Object.entries(written.sources ?? {})) {
    sources[name] = {
      enabled: override?.enabled ?? true,
      every_ms: override?.every ?? null,
      priority: override?.priority ?? null,
      max_events: override?.max_events ?? DEFAULTS.maxEventsPerPoll,
    };
    if (override?.paths) sources[name].paths = override.paths;
    if (override?.site_paths) {
      sources[name].site_paths = Object.fromEntries(Object.entries(override.site_paths).map(([id, paths]) => [Number(id), paths]));
    }
  }
  return {
    file,
    name: written.name ?? DEFAULTS.name,
    api: {
      base_url: api.base_url,
      key: api.key,
      timeout_ms: api.timeout ?? DEFAULTS.api.timeout_ms,
      max_requests_per_second: api.max_requests_per_second ?? DEFAULTS.api.max_requests_per_second,
      max_concurrency: api.max_concurrency ?? DEFAULTS.api.max_concurrency,
      retries: api.retries ?? DEFAULTS.api.retries,
      max_pages: api.max_pages ?? DEFAULTS.api.max_pages,
      max_reply_bytes: api.max_reply_bytes ?? DEFAULTS.api.max_reply_bytes,
    },
    storage: written.storage?.url
      ? { engine: 'postgres', url: written.storage.url }
      : { engine: 'sqlite', path: resolvePath(written.storage?.path ?? DEFAULTS.storage.path) },
    ...normalizeSites(written.sites),
    sources,
    rules: (written.rules ?? []).map(resolvePath),
    channels: (written.channels ?? []).map(normalizeChannel),
    routes: (written.routes ?? []).map((route) => ({
      match: route.match ?? null,
      channels: route.channels,
      continue: route.continue ?? false,
      group_by: route.group_by ?? [],
      group_wait_ms: route.group_wait ?? DEFAULTS.route.group_wait_ms,
      group_interval_ms: route.group_interval ?? DEFAULTS.route.group_interval_ms,
      send_resolved: route.send_resolved ?? true,
    })),
    maintenance: (written.maintenance ?? []).map((w) => ({
      name: w.name,
      schedule: w.schedule.trim(),
      duration_ms: w.duration,
      timezone: w.timezone ?? 'UTC',
      sites: w.sites ?? [],
      match: w.match ?? null,
    })),
    inhibit: written.inhibit === undefined || written.inhibit === null
      ? DEFAULTS.inhibit.map((i) => ({ ...i }))
      : written.inhibit.map((i) => ({ source: i.source, target: i.target ?? null })),
    delivery: {
      retry_schedule_ms: written.delivery?.retry_schedule ?? [...DEFAULTS.delivery.retry_schedule_ms],
      drain_timeout_ms: written.delivery?.drain_timeout ?? DEFAULTS.delivery.drain_timeout_ms,
      concurrency: written.delivery?.concurrency ?? DEFAULTS.delivery.concurrency,
      disable_after_ms: written.delivery?.disable_after ?? DEFAULTS.delivery.disable_after_ms,
    },
    server: {
      listen: written.server?.listen ?? null,
      token: written.server?.token?.trim() ? written.server.token : null,
      not_ready_after_ms: written.server?.not_ready_after ?? DEFAULTS.notReadyAfterMs,
      allowed_hosts: (written.server?.allowed_hosts ?? []).map((h) => h.toLowerCase()),
    },
    silences: { max_duration_ms: written.silences?.max_duration ?? DEFAULTS.silenceMaxMs },
    degraded: {
      after_failures: written.degraded?.after_failures ?? DEFAULTS.degraded.after_failures,
      after_ms: written.degraded?.after ?? DEFAULTS.degraded.after_ms,
    },
    log: { level: written.log?.level ?? DEFAULTS.log.level, pretty: written.log?.pretty ?? DEFAULTS.log.pretty },
    history: {
      retention_ms: written.history?.retention ?? DEFAULTS.history.retention_ms,
      prune_every_ms: written.history?.prune_every ?? DEFAULTS.history.prune_every_ms,
    },
    site_labels: (written.site_labels ?? []).map((l) =>
      'from' in l ? { from: l.from, label: l.label } : { match: l.match ?? null, labels: { ...l.labels } },
    ),
    heartbeat: written.heartbeat
      ? {
          url: written.heartbeat.url,
          every_ms: written.heartbeat.every ?? DEFAULTS.heartbeat.every_ms,
          timeout_ms: written.heartbeat.timeout ?? DEFAULTS.heartbeat.timeout_ms,
        }
      : null,
    // `watchdog:` present (even empty) turns it on, unless it says enabled: false.
    watchdog:
      written.watchdog === undefined || written.watchdog?.enabled === false
        ? null
        : { every_ms: written.watchdog?.every ?? DEFAULTS.watchdog.every_ms },
    incidents: {
      enabled: written.incidents?.enabled ?? true,
      min_sites: minSitesOf(written.incidents?.min_sites),
      window_ms: written.incidents?.window ?? DEFAULTS.incidents.window_ms,
      wait_ms: written.incidents?.wait ?? DEFAULTS.incidents.wait_ms,
      alerts: written.incidents?.alerts ?? [],
    },
    cluster: { instance: written.cluster?.instance ?? null, lease_ms: written.cluster?.lease ?? DEFAULTS.cluster.lease_ms },
  };
}

function normalizeSites(written: CheckedConfig['sites']): Pick<Config, 'sites' | 'sites_max'> {
  // Left empty (`sites:`), like a section left empty: the default, every site.
  if (written === undefined || written === null || written === 'all' || Array.isArray(written)) return { sites: written ?? 'all', sites_max: DEFAULTS.sitesMax };
  return { sites: written.watch ?? 'all', sites_max: written.max ?? DEFAULTS.sitesMax };
}

function minSitesOf(v: number | string | undefined): Config['incidents']['min_sites'] {
  if (v === undefined) return { count: DEFAULTS.incidents.min_sites };
  if (typeof v === 'number') return { count: v };
  return { percent: Number(v.replace('%', '').trim()) };
}

function normalizeChannel(channel: NonNullable<CheckedConfig['channels']>[number]): ChannelConfig {
  switch (channel.type) {
    case 'webhook': {
      const secrets = channel.secret === undefined ? [] : typeof channel.secret === 'string' ? [channel.secret] : channel.secret;
      const t = channel.template;
      return {
        name: channel.name,
        type: 'webhook',
        url: channel.url,
        secret: secrets[0] ?? null,
        secrets,
        timeout_ms: channel.timeout ?? DEFAULTS.channelTimeoutMs,
        mode: channel.mode ?? 'structured',
        template: t ? { body: t.body, headers: t.headers ?? {}, content_type: t.content_type ?? DEFAULTS.webhookContentType } : null,
      };
    }
    case 'slack':
    case 'teams':
    case 'discord':
      return { ...chatChannel(channel), type: channel.type, url: channel.url };
    case 'ntfy':
      return { ...chatChannel(channel), type: 'ntfy', url: channel.url, token: channel.token ?? null };
    case 'telegram':
      return {
        ...chatChannel(channel),
        type: 'telegram',
        bot_token: channel.bot_token,
        chat_id: String(channel.chat_id),
        message_thread_id: channel.message_thread_id ?? null,
        api_url: trimSlash(channel.api_url ?? DEFAULTS.providers.telegram),
      };
    case 'pagerduty':
      return {
        name: channel.name,
        type: 'pagerduty',
        routing_key: channel.routing_key,
        api_url: trimSlash(channel.api_url ?? DEFAULTS.providers.pagerduty),
        timeout_ms: channel.timeout ?? DEFAULTS.channelTimeoutMs,
        template: channel.template ?? null,
      };
    case 'opsgenie':
      return {
        name: channel.name,
        type: 'opsgenie',
        api_key: channel.api_key,
        api_url: trimSlash(channel.api_url ?? DEFAULTS.providers.opsgenie[channel.region ?? 'us']),
        timeout_ms: channel.timeout ?? DEFAULTS.channelTimeoutMs,
        template: channel.template ?? null,
      };
    case 'console':
      return { name: channel.name, type: 'console' };
    case 'email': {
      const port = channel.smtp.port ?? DEFAULTS.smtpPort;
      return {
        name: channel.name,
        type: 'email',
        to: channel.to,
        from: channel.from,
        smtp: {
          host: channel.smtp.host,
          port,
          user: channel.smtp.user ?? null,
          pass: channel.smtp.pass ?? null,
          // Port 465 speaks TLS from the first byte; 587 and 25 upgrade with STARTTLS.
          secure: channel.smtp.secure ?? port === 465,
          // A password that would leave this machine goes only over an encrypted connection:
          // a server (or anyone in the path) that does not offer STARTTLS would get it in
          // clear text. A relay on loopback, or one with no login, may stay unencrypted.
          require_tls: channel.smtp.require_tls ?? (channel.smtp.pass !== undefined && !isLoopback(channel.smtp.host)),
        },
        timeout_ms: channel.timeout ?? DEFAULTS.channelTimeoutMs,
        digest: channel.digest ? parseDigest(channel.digest) : null,
      };
    }
  }
}

/** The keys every chat channel shares: name, timeout, digest and template. */
function chatChannel(channel: { name: string; timeout?: number | undefined; digest?: string | undefined; template?: string | undefined }) {
  return {
    name: channel.name,
    timeout_ms: channel.timeout ?? DEFAULTS.channelTimeoutMs,
    digest: channel.digest ? parseDigest(channel.digest) : null,
    template: channel.template ?? null,
  };
}

function trimSlash(url: string): string {
  return url.trim().replace(/\/+$/, '');
}

/** storage.url made into another URL (or none) by a variable's value (urlBrokenByVariable). */
function storageUrlCheck(data: unknown, tree: YamlTree, file: string, env: Env): ConfigError[] {
  const storage = (data as { storage?: unknown } | null)?.storage;
  if (storage === null || typeof storage !== 'object') return [];
  const problem = urlBrokenByVariable((storage as Record<string, unknown>)['url'], tree.writtenAt(['storage', 'url']), env);
  return problem === null ? [] : [valueError(['storage', 'url'], problem, data, tree, file)];
}

/**
 * A variable whose value changes what a URL names (its host, port or database), not only its
 * user or password: `postgres://app:${PGPASS}@db/app` with a password holding "/", "@" or
 * ":" (as `openssl rand -base64` makes them) is read with part of the password as the host,
 * which is then looked up in DNS and printed in connection errors. The same URL with every
 * variable's value percent-encoded says what the file meant (a host or a database name in a
 * variable is the same encoded). Never quotes the value.
 */
export function urlBrokenByVariable(value: unknown, written: string | undefined, env: Env): string | null {
  if (typeof value !== 'string' || written === undefined) return null;
  const names = [...written.matchAll(/(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1]!);
  let unresolved = false;
  const plain = written.replace(/(?<!\$)\$\{[^}]*\}/g, (ref) => {
    const one = substituteEnv(ref, env);
    if (!one.ok) unresolved = true;
    return one.ok ? encodeURIComponent(one.text) : 'x';
  });
  if (unresolved) return null; // the variable's own error says so
  let meant: URL;
  try {
    meant = new URL(plain);
  } catch {
    return null; // not a URL as written: the URL check says so
  }
  let got: URL | null = null;
  try {
    got = new URL(value);
  } catch {
    // A URL as written that the value makes no URL at all (a "/" in the password made the rest a port)
  }
  if (got !== null && meant.host === got.host && meant.pathname === got.pathname && meant.search === got.search && meant.hash === got.hash) return null;
  const which = names.length === 1 ? `the value of \${${names[0]}}` : `the value of one of ${names.map((n) => `\${${n}}`).join(', ')}`;
  return `${which} changes the URL's host or database: a password (or user) in a URL must be percent-encoded where it has / @ : ? # % or spaces (node -p "encodeURIComponent(process.argv[1])" 'the-password' prints it so), or use a password of letters and digits`;
}

