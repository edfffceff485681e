-- hostwatch schema v3: the full rule language and its trust tools (docs/rules.md).

-- Alert timers. They live in the alerts row so they survive a restart:
--   pending_since  the condition has held since then, but not yet for the rule's `for`;
--   clear_since    a firing alert's condition has been false since then, but not yet for
--                  its `keep_firing_for`;
--   last_sent_at   when the firing (or its last repeat) was sent, for `repeat`;
--   repeats        how many times the current firing was re-sent (part of repeat ids).
-- A row with seq 0 and status 'resolved' is an alert that is pending but never fired.
ALTER TABLE alerts ADD COLUMN pending_since INTEGER;
ALTER TABLE alerts ADD COLUMN clear_since INTEGER;
ALTER TABLE alerts ADD COLUMN last_sent_at INTEGER;
ALTER TABLE alerts ADD COLUMN repeats INTEGER NOT NULL DEFAULT 0;

-- The change log: every stored snapshot version of every entity (the baseline included),
-- written in the poll's transaction. Backtests replay it and `for`-windows read it.
-- Pruned by age (history.retention, default 90 days).
CREATE TABLE change_log (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  source   TEXT    NOT NULL,
  entity   TEXT    NOT NULL,
  site_id  INTEGER,
  version  INTEGER NOT NULL,
  at       INTEGER NOT NULL,
  body     TEXT    NOT NULL
);
CREATE INDEX change_log_by_entity ON change_log (source, entity, at);
CREATE INDEX change_log_by_time ON change_log (at);

-- What a rule saw when it made an event (`hostwatch explain EVENT_ID`), written with the
-- event in the same transaction; removed with the event's change-log age.
CREATE TABLE event_evidence (
  event_id TEXT    PRIMARY KEY,
  at       INTEGER NOT NULL,
  body     TEXT    NOT NULL
) WITHOUT ROWID;
CREATE INDEX event_evidence_by_time ON event_evidence (at);
