-- hostwatch schema v11: the two tables that hold JSON bodies become ordinary (rowid) tables,
-- with the same columns and the same primary keys (now unique indexes). As WITHOUT ROWID
-- tables their rows, a few hundred bytes to several KB each, sat in the primary key's own
-- B-tree: every new row landed in a random leaf of it and split pages full of bodies. Now a
-- new row is appended, and only its small key goes into the index. On the bench's first poll
-- (1,500 snapshots, 350 evidence rows) this made the statements 11–15 ms and the COMMITs
-- 3–8 ms cheaper, and the whole ingest 41–53 ms (docs/benchmarks.md, run 24). SQLite's own
-- advice is the same: WITHOUT ROWID suits rows well under a twentieth of a page.
-- The copy runs once, in this migration's transaction.

CREATE TABLE snapshots_v11 (
  source      TEXT    NOT NULL,
  entity      TEXT    NOT NULL,
  site_id     INTEGER,
  hash        TEXT    NOT NULL,
  body        TEXT    NOT NULL,
  version     INTEGER NOT NULL,
  changed_at  INTEGER NOT NULL,
  PRIMARY KEY (source, entity)
);
INSERT INTO snapshots_v11 (source, entity, site_id, hash, body, version, changed_at)
  SELECT source, entity, site_id, hash, body, version, changed_at FROM snapshots ORDER BY source, entity;
DROP TABLE snapshots;
ALTER TABLE snapshots_v11 RENAME TO snapshots;

CREATE TABLE event_evidence_v11 (
  event_id TEXT    PRIMARY KEY,
  at       INTEGER NOT NULL,
  body     TEXT    NOT NULL
);
INSERT INTO event_evidence_v11 (event_id, at, body)
  SELECT event_id, at, body FROM event_evidence ORDER BY at;
DROP TABLE event_evidence;
ALTER TABLE event_evidence_v11 RENAME TO event_evidence;
CREATE INDEX event_evidence_by_time ON event_evidence (at);
