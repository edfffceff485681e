-- hostwatch schema v6: the cluster (docs/cluster.md). Used on PostgreSQL, where several
-- instances share one database; a SQLite file has one daemon (a lock), so these tables
-- stay empty there. They exist on both engines so the two schemas stay the same.

-- One row per run of an instance (a restart is a new member). A member is live while
-- lease_until, on the database's clock, lies ahead; it renews it with every heartbeat.
CREATE TABLE cluster_members (
  id           TEXT   NOT NULL PRIMARY KEY,
  instance     TEXT   NOT NULL,
  pid          INTEGER NOT NULL,
  host         TEXT   NOT NULL,
  started_at   BIGINT NOT NULL,
  heartbeat_at BIGINT NOT NULL,
  lease_until  BIGINT NOT NULL,
  left_at      BIGINT
);

-- Named work that exactly one live member does (the timers: the Timekeeper, retention).
-- token grows with every change of holder: a fencing token.
CREATE TABLE cluster_leases (
  name   TEXT   NOT NULL PRIMARY KEY,
  holder TEXT,
  token  BIGINT NOT NULL DEFAULT 0,
  since  BIGINT NOT NULL
);

-- Which member polls an entity (a site of a source, or the account): held while the
-- holder is live, taken over by another member when it is not.
CREATE TABLE entity_leases (
  source TEXT   NOT NULL,
  entity TEXT   NOT NULL,
  holder TEXT   NOT NULL,
  since  BIGINT NOT NULL,
  PRIMARY KEY (source, entity)
);

-- The API request budget the members share (api.max_requests_per_second, a 429's pause),
-- one row per budget: the pace's next free turn, the adaptive rate, and until when every
-- member holds its requests. Times in epoch milliseconds on the database's clock.
CREATE TABLE cluster_budget (
  name          TEXT NOT NULL PRIMARY KEY,
  rate          REAL NOT NULL,
  next_slot     REAL NOT NULL DEFAULT 0,
  paused_until  REAL NOT NULL DEFAULT 0,
  last_decrease REAL NOT NULL DEFAULT 0
);

-- An outbox row being sent is claimed by one member; claim_token grows with every claim,
-- and an attempt is recorded only under the token it was sent under (a fencing token).
ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
ALTER TABLE outbox ADD COLUMN claim_token BIGINT NOT NULL DEFAULT 0;
