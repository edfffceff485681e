-- hostwatch schema v5, PostgreSQL: operator state. As ../0005_operator_state.sql.

ALTER TABLE poll_state ADD COLUMN failing_since BIGINT;

CREATE TABLE daemon_heartbeat (
  instance   TEXT COLLATE "C" NOT NULL PRIMARY KEY,
  pid        INTEGER NOT NULL,
  host       TEXT   NOT NULL,
  started_at BIGINT NOT NULL,
  seen_at    BIGINT NOT NULL,
  stopped_at BIGINT
);
