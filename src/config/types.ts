import type { Priority } from '../api/budget.js';

/** Where the data lives: a SQLite file (the embedded default) or a PostgreSQL database. */
export type StorageConfig = { engine: 'sqlite'; path: string } | { engine: 'postgres'; url: string };

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
  storage: StorageConfig;
  /** 'all', or the ids of the sites to watch. */
  sites: 'all' | number[];
  /** The most sites a site list may hold (`sites.max`); a longer reply fails the poll. */
  sites_max: number;
  sources: Record<string, SourceOverride>;
  /** Extra rule files or folders (absolute paths); built-in packs are always loaded. */
  rules: string[];
  channels: ChannelConfig[];
  /** Empty: every event goes to every channel. */
  routes: RouteConfig[];
  /** Recurring windows in which matching events are stored but not delivered. */
  maintenance: MaintenanceConfig[];
  /** While a source alert fires for a site, that site's other events are held (docs/routing.md). */
  inhibit: InhibitConfig[];
  delivery: DeliveryConfig;
  /** `not_ready_after_ms`: /readyz answers 503 when no poll has succeeded for this long. */
  server: {
    listen: string | null;
    token: string | null;
    not_ready_after_ms: number;
    /** Names the server answers to besides localhost and IP literals (lower case; `.domain`, `*`). */
    allowed_hosts: string[];
  };
  /** The longest silence the API and the CLI accept. */
  silences: { max_duration_ms: number };
  /** When `source.degraded` fires: an entity failed this many polls in a row, or (two or more) for this long. */
  degraded: { after_failures: number; after_ms: number };
  log: { level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal'; pretty: boolean };
  /** The change log the trust tools read (backtest, explain): kept this long, pruned this often. */
  history: { retention_ms: number; prune_every_ms: number };
  /** Labels given to sites (data.labels of every event about the site), in order: later entries win. */
  site_labels: SiteLabelConfig[];
  /** A dead man's switch pinged while cycles succeed (null: none). */
  heartbeat: HeartbeatConfig | null;
  /** The always-firing `hostwatch.watchdog` alert, re-sent every `every_ms` (null: off). */
  watchdog: { every_ms: number } | null;
  /** One `platform.incident` instead of many pages when many sites fire the same alert. */
  incidents: IncidentsConfig;
  /** Cluster membership (PostgreSQL only; docs/cluster.md). */
  cluster: ClusterConfig;
}

/**
 * `cluster:` — every daemon on a PostgreSQL database is a member of its cluster; these say
 * how it is named and how long a silent member keeps its work.
 */
export interface ClusterConfig {
  /** This instance's name among the members; null: the host name. */
  instance: string | null;
  /** A member that has not renewed its lease for this long is dead: its work is taken over. */
  lease_ms: number;
}

/** `{ match, labels }`: labels for the sites the CEL match accepts; `{ from, label }`: a label fed by the API. */
export type SiteLabelConfig =
  | { match: string | null; labels: Record<string, string> }
  | { from: 'client_reports'; label: string };

/** `heartbeat: { url, every }`: GET `url` every `every_ms` while cycles succeed. The URL is a secret. */
export interface HeartbeatConfig {
  url: string;
  every_ms: number;
  timeout_ms: number;
}

/** `incidents:` (docs/routing.md, "Platform incidents"). */
export interface IncidentsConfig {
  enabled: boolean;
  /** A number of sites, or a share of the watched sites. */
  min_sites: { count: number } | { percent: number };
  /** Sites count toward an incident when their alert started firing within this long. */
  window_ms: number;
  /** How long an opened incident gathers sites before its event goes out (or its source's cycle ends). */
  wait_ms: number;
  /** Alert event names that can make an incident ([] = every per-site alert). */
  alerts: string[];
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
  /** The largest reply body read; a larger reply fails its poll with `too_large`. */
  max_reply_bytes: number;
}

/** Per-source settings; every source is on by default. */
export interface SourceOverride {
  enabled: boolean;
  every_ms: number | null;
  /** Which source stretches first when the request budget is short; null: derived from its rules. */
  priority: Priority | null;
  /** The most events one poll of this source may emit (the rest: one summary event). */
  max_events: number;
  /** `files`: the paths (relative to each site's folder) whose stat is watched on every site. */
  paths?: string[];
  /** `files`: more paths for single sites, by site id. */
  site_paths?: Record<number, string[]>;
}

export type ChannelConfig =
  | WebhookChannelConfig
  | ConsoleChannelConfig
  | SlackChannelConfig
  | EmailChannelConfig
  | TeamsChannelConfig
  | DiscordChannelConfig
  | PagerDutyChannelConfig
  | OpsgenieChannelConfig
  | TelegramChannelConfig
  | NtfyChannelConfig;

export interface WebhookChannelConfig {
  name: string;
  type: 'webhook';
  url: string;
  /** The first of `secrets`; null only for a webhook with a template and no secret (unsigned). */
  secret: string | null;
  /** Every secret that signs (more than one while rotating); empty: unsigned. */
  secrets: string[];
  timeout_ms: number;
  /** CloudEvents content mode: the whole event as JSON, or ce-* headers with data as the body. */
  mode: 'structured' | 'binary';
  /** A user-written body and headers (Liquid) instead of the CloudEvent; null: the CloudEvent. */
  template: WebhookTemplateConfig | null;
}
/** A webhook's own request: Liquid templates over the event (docs/channels.md#templates). */
export interface WebhookTemplateConfig {
  body: string;
  headers: Record<string, string>;
  content_type: string;
}
export interface ConsoleChannelConfig {
  name: string;
  type: 'console';
}
/** A Slack incoming webhook. */
export interface SlackChannelConfig {
  name: string;
  type: 'slack';
  url: string;
  timeout_ms: number;
  digest: DigestConfig | null;
  /** Liquid: the text shown for each event instead of its summary; null: the summary. */
  template: string | null;
}
/** A Microsoft Teams Workflows webhook (Adaptive Card). */
export interface TeamsChannelConfig {
  name: string;
  type: 'teams';
  url: string;
  timeout_ms: number;
  digest: DigestConfig | null;
  template: string | null;
}
/** A Discord webhook (embeds, no mentions). */
export interface DiscordChannelConfig {
  name: string;
  type: 'discord';
  url: string;
  timeout_ms: number;
  digest: DigestConfig | null;
  template: string | null;
}
/** PagerDuty Events API v2: trigger and resolve, one dedup_key per alert firing. */
export interface PagerDutyChannelConfig {
  name: string;
  type: 'pagerduty';
  routing_key: string;
  /** Where /v2/enqueue is (https://events.pagerduty.com unless overridden). */
  api_url: string;
  timeout_ms: number;
  template: string | null;
}
/** Opsgenie Alert API: create and close by alias. */
export interface OpsgenieChannelConfig {
  name: string;
  type: 'opsgenie';
  api_key: string;
  /** Where /v2/alerts is: the region's API (US or EU) unless overridden. */
  api_url: string;
  timeout_ms: number;
  template: string | null;
}
/** A Telegram bot's sendMessage to one chat. */
export interface TelegramChannelConfig {
  name: string;
  type: 'telegram';
  bot_token: string;
  /** A numeric id (as text) or @channelname. */
  chat_id: string;
  /** A forum topic of the chat, or null. */
  message_thread_id: number | null;
  /** https://api.telegram.org unless overridden (a local Bot API server, a test). */
  api_url: string;
  timeout_ms: number;
  digest: DigestConfig | null;
  template: string | null;
}
/** An ntfy topic (ntfy.sh or self-hosted), published as JSON. */
export interface NtfyChannelConfig {
  name: string;
  type: 'ntfy';
  /** The topic URL as written: the server's address plus the topic. */
  url: string;
  token: string | null;
  timeout_ms: number;
  digest: DigestConfig | null;
  template: string | null;
}
/** E-mail over SMTP (one pooled transport per channel). */
export interface EmailChannelConfig {
  name: string;
  type: 'email';
  to: string[];
  from: string;
  smtp: {
    host: string;
    port: number;
    user: string | null;
    pass: string | null;
    secure: boolean;
    /** Refuse to send over a connection STARTTLS did not encrypt (only where `secure` is false). */
    require_tls: boolean;
  };
  timeout_ms: number;
  digest: DigestConfig | null;
}

/** `daily at 08:00 Europe/Paris`: info events wait for one message a day. */
export interface DigestConfig {
  hour: number;
  minute: number;
  timezone: string;
}

export interface RouteConfig {
  /** A CEL expression over the event (type, severity, site_id, status, labels…); absent = match all. */
  match: string | null;
  channels: string[];
  /** Keep trying the routes after this one when it matched. */
  continue: boolean;
  /** Event fields that make a group (for channels that send groups: e-mail, Slack); [] = one group. */
  group_by: string[];
  /** How long a new group waits for more events before its first message. */
  group_wait_ms: number;
  /** How long after a group's message the next one for the same group may go. */
  group_interval_ms: number;
  /** Send `resolved` events too (default true). */
  send_resolved: boolean;
}

/** A recurring maintenance window: starts at each `schedule` time, lasts `duration_ms`. */
export interface MaintenanceConfig {
  name: string;
  schedule: string;
  duration_ms: number;
  timezone: string;
  /** Only these sites ([] = no site restriction). */
  sites: number[];
  /** CEL over the event, like a route's match; null = every event (of `sites`). */
  match: string | null;
}

/** While an event named `source` fires for a site, that site's events matching `target` are held. */
export interface InhibitConfig {
  source: string;
  /** CEL over the held event (alert or change); null = every other alert of the site (changes pass). */
  target: string | null;
}

export interface DeliveryConfig {
  /** Delay before each retry after the first attempt; after the last, the row is dead-lettered. */
  retry_schedule_ms: number[];
  /** How long `poll --once` waits for the outbox to drain before it exits. */
  drain_timeout_ms: number;
  /** Outbox rows sent at once, across channels. */
  concurrency: number;
  /** A channel that has failed without a success for this long is disabled (operator event). */
  disable_after_ms: number;
}
