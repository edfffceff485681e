-- hostwatch schema v8: how a cluster member stopped being one. A member that leaves by a
-- clean stop and one whose process died and whose next run (same instance and host) made
-- it leave at once both get left_at; `ended` tells them apart for `hostwatch cluster
-- status`: 'stopped', or 'replaced' (the process was gone: a crash, a SIGKILL, a power
-- cut). NULL on rows from before v8 and on members whose lease ran out.
ALTER TABLE cluster_members ADD COLUMN ended TEXT;
