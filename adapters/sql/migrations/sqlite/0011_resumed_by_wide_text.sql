-- hookrelay schema version 11: redrives.resumed_by records who last
-- resumed a redrive (Client.ResumeRedrive's actor). On MariaDB/MySQL this
-- version widens the columns that hold a destination's URL, secrets,
-- headers, policy and event types, a redrive's tenants and an idempotency
-- record's headers from BLOB (64 KiB) to LONGBLOB; here they are TEXT,
-- which has no such bound.
ALTER TABLE {p}redrives ADD COLUMN resumed_by TEXT NOT NULL DEFAULT '';
