-- hostwatch schema v6, PostgreSQL: the cluster (docs/cluster.md). As ../0006_cluster.sql.

CREATE TABLE cluster_members (
  id           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
  instance     TEXT COLLATE "C" NOT NULL,
  pid          INTEGER NOT NULL,
  host         TEXT   NOT NULL,
  started_at   BIGINT NOT NULL,
  heartbeat_at BIGINT NOT NULL,
  lease_until  BIGINT NOT NULL,
  left_at      BIGINT
);
CREATE INDEX cluster_members_live ON cluster_members (lease_until);

CREATE TABLE cluster_leases (
  name   TEXT COLLATE "C" NOT NULL PRIMARY KEY,
  holder TEXT COLLATE "C",
  token  BIGINT NOT NULL DEFAULT 0,
  since  BIGINT NOT NULL
);

CREATE TABLE entity_leases (
  source TEXT COLLATE "C" NOT NULL,
  entity TEXT COLLATE "C" NOT NULL,
  holder TEXT COLLATE "C" NOT NULL,
  since  BIGINT NOT NULL,
  PRIMARY KEY (source, entity)
);
CREATE INDEX entity_leases_by_holder ON entity_leases (holder);

CREATE TABLE cluster_budget (
  name          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
  rate          DOUBLE PRECISION NOT NULL,
  next_slot     DOUBLE PRECISION NOT NULL DEFAULT 0,
  paused_until  DOUBLE PRECISION NOT NULL DEFAULT 0,
  last_decrease DOUBLE PRECISION NOT NULL DEFAULT 0
);

ALTER TABLE outbox ADD COLUMN claimed_by TEXT COLLATE "C";
ALTER TABLE outbox ADD COLUMN claim_token BIGINT NOT NULL DEFAULT 0;
CREATE INDEX outbox_claimed ON outbox (claimed_by) WHERE claimed_by IS NOT NULL;
