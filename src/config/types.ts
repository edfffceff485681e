/**
 * The normalized configuration: what the rest of the program reads.
 * Durations are milliseconds; defaults are applied; `${VAR}` references are resolved.
 * The shape users write (YAML) is described by the zod schema in parse.ts.
 */
export interface Config {
  /** Absolute path of the file this came from ("<embedded>" for the demo). */
  file: string;
  /** Instance name, used in the CloudEvents `source` ("hostwatch://<name>"). */
  name: string;
  api: ApiConfig;
  storage: { path: string };
  /** 'all', or the ids of the sites to watch. */
  sites: 'all' | number[];
  sources: Record<string, SourceOverride>;
  /** Extra rule files or folders (absolute paths); built-in packs are always loaded. */
  rules: string[];
  channels: ChannelConfig[];
  /** Empty: every event goes to every channel. */
  routes: RouteConfig[];
  delivery: DeliveryConfig;
  server: { listen: string | null; token: string | null };
  log: { level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal'; pretty: boolean };
}

/** How hostwatch talks to the Hosting Control API. */
export interface ApiConfig {
  base_url: string;
  key: string;
  timeout_ms: number;
  max_requests_per_second: number;
  max_concurrency: number;
  retries: number;
  /** Upper bound of pages read from one paged list in one poll. */
  max_pages: number;
}

/** Per-source settings; every source is on by default. */
export interface SourceOverride {
  enabled: boolean;
  every_ms: number | null;
  /** `files`: the paths (relative to each site's folder) whose stat is watched on every site. */
  paths?: string[];
  /** `files`: more paths for single sites, by site id. */
  site_paths?: Record<number, string[]>;
}

export type ChannelConfig = WebhookChannelConfig | ConsoleChannelConfig | SlackChannelConfig | EmailChannelConfig;

export interface WebhookChannelConfig {
  name: string;
  type: 'webhook';
  url: string;
  secret: string;
  timeout_ms: number;
}
export interface ConsoleChannelConfig {
  name: string;
  type: 'console';
}
/** Accepted by config already; delivered by the Slack channel of the delivery issue. */
export interface SlackChannelConfig {
  name: string;
  type: 'slack';
  url: string;
  timeout_ms: number;
}
/** Accepted by config already; delivered by the e-mail channel of the delivery issue. */
export interface EmailChannelConfig {
  name: string;
  type: 'email';
  to: string[];
  from: string;
  smtp: { host: string; port: number; user: string | null; pass: string | null; secure: boolean };
}

export interface RouteConfig {
  /** A CEL expression over the event (type, severity, site_id, status, labels…); absent = match all. */
  match: string | null;
  channels: string[];
}

export interface DeliveryConfig {
  /** Delay before each retry after the first attempt; after the last, the row is dead-lettered. */
  retry_schedule_ms: number[];
  /** How long `poll --once` waits for the outbox to drain before it exits. */
  drain_timeout_ms: number;
  /** Outbox rows sent at once, across channels. */
  concurrency: number;
}
