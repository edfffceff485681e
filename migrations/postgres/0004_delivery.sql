-- hostwatch schema v4, PostgreSQL: delivery (docs/routing.md). As ../0004_delivery.sql.

ALTER TABLE outbox ADD COLUMN group_key TEXT COLLATE "C";
CREATE INDEX outbox_by_group ON outbox (channel, group_key, state) WHERE group_key IS NOT NULL;

ALTER TABLE events ADD COLUMN held_by TEXT COLLATE "C";
ALTER TABLE events ADD COLUMN held_outcome TEXT;
CREATE INDEX events_by_hold ON events (held_by, seq) WHERE held_by IS NOT NULL;

CREATE TABLE delivery_groups (
  channel      TEXT COLLATE "C" NOT NULL,
  group_key    TEXT COLLATE "C" NOT NULL,
  last_sent_at BIGINT NOT NULL,
  PRIMARY KEY (channel, group_key)
);

CREATE TABLE channel_state (
  channel         TEXT COLLATE "C" PRIMARY KEY,
  failing_since   BIGINT,
  disabled_at     BIGINT,
  disabled_reason TEXT,
  disabled_count  INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE inhibitions (
  source   TEXT COLLATE "C" NOT NULL,
  site_id  BIGINT NOT NULL,
  event_id TEXT COLLATE "C" NOT NULL,
  since    BIGINT NOT NULL,
  PRIMARY KEY (source, site_id)
);
