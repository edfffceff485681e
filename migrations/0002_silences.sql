-- hostwatch schema v2: silences (docs/silences.md).
-- A silence holds back delivery, never storage: an event committed while an active
-- silence matches it is stored with events.silenced_by set and gets no outbox rows.

-- One row per silence. `match` is CEL over the same variables as a route's match.
-- Active while starts_at <= now < ends_at and expired_at is null; never deleted, so the
-- events it silenced keep pointing at it.
CREATE TABLE silences (
  id          TEXT    PRIMARY KEY,
  match       TEXT    NOT NULL,
  starts_at   INTEGER NOT NULL,
  ends_at     INTEGER NOT NULL,
  comment     TEXT    NOT NULL,
  created_by  TEXT    NOT NULL,
  created_at  INTEGER NOT NULL,
  expired_at  INTEGER,
  CHECK (ends_at > starts_at)
);
CREATE INDEX silences_by_end ON silences (ends_at);

ALTER TABLE events ADD COLUMN silenced_by TEXT REFERENCES silences (id);
CREATE INDEX events_by_silence ON events (silenced_by) WHERE silenced_by IS NOT NULL;
