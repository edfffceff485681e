-- hostwatch schema v10: what each cluster member runs. `channels`: the names of the channels
-- its config has (a JSON array), so that a member claims only the deliveries it can send, and
-- a delivery of a channel that no live member has is dead-lettered (during a rolling config
-- change, one that only some members have yet is left to them). `config_hash`: a
-- fingerprint of its config, so that members running different configs are told apart in the
-- log and `hostwatch cluster status`. NULL on rows from before v10 (taken to have every channel).
ALTER TABLE cluster_members ADD COLUMN channels TEXT;
ALTER TABLE cluster_members ADD COLUMN config_hash TEXT;
