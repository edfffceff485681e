-- hostwatch schema v5: operator state (portable SQL: SQLite and PostgreSQL).

-- When an entity's current run of failed polls began (NULL while it polls fine), so
-- source.degraded can fire on time as well as on a count of failures.
ALTER TABLE poll_state ADD COLUMN failing_since BIGINT;

-- A running daemon writes its row every few seconds, so a command on the same database
-- (hostwatch redeliver) can say whether someone is there to send now.
CREATE TABLE daemon_heartbeat (
  instance   TEXT   NOT NULL PRIMARY KEY,
  pid        INTEGER NOT NULL,
  host       TEXT   NOT NULL,
  started_at BIGINT NOT NULL,
  seen_at    BIGINT NOT NULL,
  stopped_at BIGINT
);
