-- hostwatch schema v2, PostgreSQL: silences (docs/silences.md). As ../0002_silences.sql.

CREATE TABLE silences (
  id          TEXT COLLATE "C" PRIMARY KEY,
  match       TEXT    NOT NULL,
  starts_at   BIGINT  NOT NULL,
  ends_at     BIGINT  NOT NULL,
  comment     TEXT    NOT NULL,
  created_by  TEXT    NOT NULL,
  created_at  BIGINT  NOT NULL,
  expired_at  BIGINT,
  CHECK (ends_at > starts_at)
);
CREATE INDEX silences_by_end ON silences (ends_at);

ALTER TABLE events ADD COLUMN silenced_by TEXT COLLATE "C" REFERENCES silences (id);
CREATE INDEX events_by_silence ON events (silenced_by) WHERE silenced_by IS NOT NULL;
