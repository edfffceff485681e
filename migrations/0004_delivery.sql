-- hostwatch schema v4: delivery (docs/routing.md). Grouping, held events, channel health.

-- Outbox rows of one channel that share a group_key go out as one message (e-mail, Slack).
-- NULL: sent on its own (webhooks, console).
ALTER TABLE outbox ADD COLUMN group_key TEXT;
CREATE INDEX outbox_by_group ON outbox (channel, group_key, state) WHERE group_key IS NOT NULL;

-- Why an event was stored but not queued (besides a silence, events.silenced_by):
-- 'maintenance:<window>' or 'inhibited:<source event name>:<site id>'. held_outcome is NULL
-- while an inhibited event waits, then 'released' or 'dropped'; 'suppressed' for maintenance.
ALTER TABLE events ADD COLUMN held_by TEXT;
ALTER TABLE events ADD COLUMN held_outcome TEXT;
CREATE INDEX events_by_hold ON events (held_by, seq) WHERE held_by IS NOT NULL;

-- When each group last went out, so the next message waits for group_interval.
CREATE TABLE delivery_groups (
  channel      TEXT    NOT NULL,
  group_key    TEXT    NOT NULL,
  last_sent_at INTEGER NOT NULL,
  PRIMARY KEY (channel, group_key)
) WITHOUT ROWID;

-- Channel health: since when it has failed without a success, and whether it is disabled.
CREATE TABLE channel_state (
  channel         TEXT    PRIMARY KEY,
  failing_since   INTEGER,
  disabled_at     INTEGER,
  disabled_reason TEXT,
  disabled_count  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Inhibiting alerts firing now: while a row exists, the site's other events are held.
CREATE TABLE inhibitions (
  source   TEXT    NOT NULL,
  site_id  INTEGER NOT NULL,
  event_id TEXT    NOT NULL,
  since    INTEGER NOT NULL,
  PRIMARY KEY (source, site_id)
) WITHOUT ROWID;
