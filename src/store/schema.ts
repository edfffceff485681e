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
    /** When the current run of failed polls began; null while the entity polls fine. */
    failing_since: number | null;
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
    /** Maintenance or inhibition that held this event back (0004); written by DeliveryRepo only, like silenced_by. */
    held_by: ColumnType<never, string | null | undefined, string | null>;
    /** null while held by an inhibition; then 'released' or 'dropped'; 'suppressed' for maintenance (0004). */
    held_outcome: ColumnType<never, string | null | undefined, string | null>;
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
    /** Rows of a channel with the same key go out as one message (0004); null: on its own. */
    group_key: ColumnType<string | null, string | null | undefined, string | null>;
    /** The cluster member sending the row now (0006); null: nobody. */
    claimed_by: ColumnType<string | null, string | null | undefined, string | null>;
    /** Grows with every claim: an attempt is recorded only under the token it was sent under. */
    claim_token: ColumnType<number, number | undefined, number>;
    /**
     * Rows of a channel with the same key go out in the order they were queued (0009): the
     * rule and subject of the event (orderKey). Null: no order (rows from before 0009).
     */
    order_key: ColumnType<string | null, string | null | undefined, string | null>;
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
  delivery_groups: {
    channel: string;
    group_key: string;
    last_sent_at: number;
  };
  channel_state: {
    channel: string;
    failing_since: number | null;
    disabled_at: number | null;
    disabled_reason: string | null;
    disabled_count: number;
  };
  inhibitions: {
    source: string;
    site_id: number;
    event_id: string;
    since: number;
  };
  daemon_heartbeat: {
    instance: string;
    pid: number;
    host: string;
    started_at: number;
    seen_at: number;
    stopped_at: number | null;
  };
  /** The cluster (0006, docs/cluster.md): one row per run of an instance; times on the database's clock. */
  cluster_members: {
    id: string;
    instance: string;
    pid: number;
    host: string;
    started_at: number;
    heartbeat_at: number;
    lease_until: number;
    left_at: number | null;
    /** How it left (0008): 'stopped' (a clean stop) or 'replaced' (its process died; its next run made it leave). */
    ended: 'stopped' | 'replaced' | null;
    /** The channel names of its config, a JSON array (0010); null: from before 0010 (every channel). */
    channels: string | null;
    /** A fingerprint of its config (0010; configFingerprint): members that differ are told apart. */
    config_hash: string | null;
  };
  /** Named work one live member does (`timers`); `token` grows with every change of holder. */
  cluster_leases: {
    name: string;
    holder: string | null;
    token: number;
    since: number;
  };
  /** Which member polls an entity. */
  entity_leases: {
    source: string;
    entity: string;
    holder: string;
    since: number;
  };
  /** The API request budget the members share: the pace's next turn, the rate, the 429 pause (ms, database clock). */
  cluster_budget: {
    name: string;
    rate: number;
    next_slot: number;
    paused_until: number;
    last_decrease: number;
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
  delivery_groups: ['channel', 'group_key'],
  channel_state: ['channel'],
  inhibitions: ['source', 'site_id'],
  daemon_heartbeat: ['instance'],
} as const;

/** Columns written by inserts (generated ids left out), for prepared statements. */
export const COLUMNS = {
  snapshots: ['source', 'entity', 'site_id', 'hash', 'body', 'version', 'changed_at'],
  poll_state: ['source', 'entity', 'site_id', 'last_attempt_at', 'last_success_at', 'consecutive_failures', 'last_error_code', 'last_error', 'failing_since'],
  alerts: ['rule', 'subject', 'site_id', 'status', 'seq', 'since', 'last_event_id', 'pending_since', 'clear_since', 'last_sent_at', 'repeats'],
  change_log: ['source', 'entity', 'site_id', 'version', 'at', 'body'],
  event_evidence: ['event_id', 'at', 'body'],
  events: ['id', 'type', 'subject', 'site_id', 'severity', 'status', 'rule', 'time', 'body'],
  outbox: ['event_id', 'channel', 'state', 'attempts', 'next_attempt_at', 'last_error', 'created_at', 'updated_at', 'group_key', 'order_key'],
  delivery_attempts: ['outbox_id', 'attempt', 'at', 'outcome', 'status_code', 'error', 'duration_ms'],
  delivery_groups: ['channel', 'group_key', 'last_sent_at'],
  channel_state: ['channel', 'failing_since', 'disabled_at', 'disabled_reason', 'disabled_count'],
  inhibitions: ['source', 'site_id', 'event_id', 'since'],
  silences: ['id', 'match', 'starts_at', 'ends_at', 'comment', 'created_by', 'created_at', 'expired_at'],
  daemon_heartbeat: ['instance', 'pid', 'host', 'started_at', 'seen_at', 'stopped_at'],
} as const;
