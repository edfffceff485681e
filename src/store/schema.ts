import type { ColumnType, Generated } from 'kysely';

/** Kysely table types; they mirror migrations/*.sql (times are epoch milliseconds). */
export interface Database {
  snapshots: {
    source: string;
    entity: string;
    site_id: number | null;
    hash: string;
    body: string;
    version: number;
    changed_at: number;
  };
  poll_state: {
    source: string;
    entity: string;
    site_id: number | null;
    last_attempt_at: number | null;
    last_success_at: number | null;
    consecutive_failures: number;
    last_error_code: string | null;
    last_error: string | null;
  };
  alerts: {
    rule: string;
    subject: string;
    site_id: number | null;
    status: 'firing' | 'resolved';
    seq: number;
    since: number;
    last_event_id: string | null;
    /** Timers of the rule language (0003); see migrations/0003_rule_history.sql. */
    pending_since: number | null;
    clear_since: number | null;
    last_sent_at: number | null;
    repeats: number;
  };
  change_log: {
    id: Generated<number>;
    source: string;
    entity: string;
    site_id: number | null;
    version: number;
    at: number;
    body: string;
  };
  event_evidence: {
    event_id: string;
    at: number;
    body: string;
  };
  events: {
    seq: Generated<number>;
    id: string;
    type: string;
    subject: string;
    site_id: number | null;
    severity: string;
    status: string | null;
    rule: string;
    time: number;
    body: string;
    /**
     * The silence that held this event back (0002). Written only by SilencesRepo after the
     * insert, and read there with `sql`; its select type is `never` so EventRow, and with it
     * every existing insert of an event, stays exactly as it was before the column existed.
     */
    silenced_by: ColumnType<never, string | null | undefined, string | null>;
  };
  outbox: {
    id: Generated<number>;
    event_id: string;
    channel: string;
    state: 'pending' | 'delivered' | 'dead';
    attempts: number;
    next_attempt_at: number;
    last_error: string | null;
    created_at: number;
    updated_at: number;
  };
  delivery_attempts: {
    id: Generated<number>;
    outbox_id: number;
    attempt: number;
    at: number;
    outcome: 'delivered' | 'retry' | 'dead';
    status_code: number | null;
    error: string | null;
    duration_ms: number;
  };
  silences: {
    id: string;
    /** CEL over routeBindings(event), like a route's match. */
    match: string;
    starts_at: number;
    ends_at: number;
    comment: string;
    created_by: string;
    created_at: number;
    /** Set when someone expired it early; null while it runs its course. */
    expired_at: number | null;
  };
  schema_migrations: {
    version: number;
    name: string;
    checksum: string;
    applied_at: number;
  };
}

/** The unique keys the upserts conflict on. */
export const KEYS = {
  snapshots: ['source', 'entity'],
  poll_state: ['source', 'entity'],
  alerts: ['rule', 'subject'],
} as const;

/** Columns written by inserts (generated ids left out), for prepared statements. */
export const COLUMNS = {
  snapshots: ['source', 'entity', 'site_id', 'hash', 'body', 'version', 'changed_at'],
  poll_state: ['source', 'entity', 'site_id', 'last_attempt_at', 'last_success_at', 'consecutive_failures', 'last_error_code', 'last_error'],
  alerts: ['rule', 'subject', 'site_id', 'status', 'seq', 'since', 'last_event_id', 'pending_since', 'clear_since', 'last_sent_at', 'repeats'],
  change_log: ['source', 'entity', 'site_id', 'version', 'at', 'body'],
  event_evidence: ['event_id', 'at', 'body'],
  events: ['id', 'type', 'subject', 'site_id', 'severity', 'status', 'rule', 'time', 'body'],
  outbox: ['event_id', 'channel', 'state', 'attempts', 'next_attempt_at', 'last_error', 'created_at', 'updated_at'],
  delivery_attempts: ['outbox_id', 'attempt', 'at', 'outcome', 'status_code', 'error', 'duration_ms'],
  silences: ['id', 'match', 'starts_at', 'ends_at', 'comment', 'created_by', 'created_at', 'expired_at'],
} as const;
