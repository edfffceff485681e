-- hostwatch schema v1. Migrations are immutable once released: add a new file instead.
-- Times are integer milliseconds since the epoch (UTC) unless the column name ends in _iso.

-- The latest snapshot of each entity (a source for the account or for one site).
-- An unchanged poll writes nothing here: the hash decides.
CREATE TABLE snapshots (
  source      TEXT    NOT NULL,
  entity      TEXT    NOT NULL,
  site_id     INTEGER,
  hash        TEXT    NOT NULL,
  body        TEXT    NOT NULL,
  version     INTEGER NOT NULL,
  changed_at  INTEGER NOT NULL,
  PRIMARY KEY (source, entity)
) WITHOUT ROWID;

-- Poll outcome per entity, and per source (entity = '') for the cycle as a whole.
-- Written on failure, on recovery and on the first success; not on every unchanged poll.
CREATE TABLE poll_state (
  source               TEXT    NOT NULL,
  entity               TEXT    NOT NULL,
  site_id              INTEGER,
  last_attempt_at      INTEGER,
  last_success_at      INTEGER,
  consecutive_failures INTEGER NOT NULL DEFAULT 0,
  last_error_code      TEXT,
  last_error           TEXT,
  PRIMARY KEY (source, entity)
) WITHOUT ROWID;

-- Level-triggered alerts: one row per rule and subject, firing or resolved.
-- seq counts firings, so the n-th firing and its resolution get their own stable ids.
CREATE TABLE alerts (
  rule          TEXT    NOT NULL,
  subject       TEXT    NOT NULL,
  site_id       INTEGER,
  status        TEXT    NOT NULL CHECK (status IN ('firing', 'resolved')),
  seq           INTEGER NOT NULL,
  since         INTEGER NOT NULL,
  last_event_id TEXT,
  PRIMARY KEY (rule, subject)
) WITHOUT ROWID;

-- The durable event log; seq is the feed cursor.
CREATE TABLE events (
  seq       INTEGER PRIMARY KEY AUTOINCREMENT,
  id        TEXT    NOT NULL UNIQUE,
  type      TEXT    NOT NULL,
  subject   TEXT    NOT NULL,
  site_id   INTEGER,
  severity  TEXT    NOT NULL,
  status    TEXT,
  rule      TEXT    NOT NULL,
  time      INTEGER NOT NULL,
  body      TEXT    NOT NULL
);
CREATE INDEX events_by_type ON events (type, seq);
CREATE INDEX events_by_site ON events (site_id, seq);

-- One row per event and channel; written in the same transaction as the event.
CREATE TABLE outbox (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id        TEXT    NOT NULL REFERENCES events (id),
  channel         TEXT    NOT NULL,
  state           TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  last_error      TEXT,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  UNIQUE (event_id, channel)
);
CREATE INDEX outbox_due ON outbox (state, next_attempt_at);

-- Every delivery attempt, for `hostwatch deliveries` and for debugging a receiver.
CREATE TABLE delivery_attempts (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  outbox_id   INTEGER NOT NULL REFERENCES outbox (id),
  attempt     INTEGER NOT NULL,
  at          INTEGER NOT NULL,
  outcome     TEXT    NOT NULL CHECK (outcome IN ('delivered', 'retry', 'dead')),
  status_code INTEGER,
  error       TEXT,
  duration_ms INTEGER NOT NULL
);
CREATE INDEX delivery_attempts_by_outbox ON delivery_attempts (outbox_id);
