-- hostwatch schema v11: on SQLite the tables snapshots and event_evidence stop being
-- WITHOUT ROWID tables (same columns, same keys). PostgreSQL tables are heaps with a
-- separate primary-key index already: nothing changes here. The file keeps the two engines'
-- migration numbers in step.
SELECT 1;
