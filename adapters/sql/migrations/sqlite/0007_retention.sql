-- hookrelay schema version 7 (SQLite): retention and broker outbox
-- recovery. touched_at is when a record was last leased through
-- AcquireLease or taken as unpublished (NULL: never), so a broker worker can
-- tell a pending record whose message was lost. history_compacted marks a
-- delivered record whose attempts were compacted into attempt_summaries.
ALTER TABLE {p}deliveries ADD COLUMN touched_at INTEGER;
ALTER TABLE {p}deliveries ADD COLUMN history_compacted INTEGER NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS {p}attempt_summaries (
	delivery_id      TEXT NOT NULL PRIMARY KEY,
	attempts         INTEGER NOT NULL,
	first_started_at INTEGER NOT NULL,
	last_finished_at INTEGER NOT NULL,
	last_status_code INTEGER NOT NULL,
	last_outcome     TEXT NOT NULL,
	last_reason      TEXT NOT NULL
);
-- The cleaner walks delivered rows oldest first (dead rows through
-- deliveries_dead); both indexes hold finished rows only.
CREATE INDEX IF NOT EXISTS {p}deliveries_delivered ON {p}deliveries (updated_at, id) WHERE state = 'delivered';
CREATE INDEX IF NOT EXISTS {p}deliveries_uncompacted ON {p}deliveries (updated_at, id) WHERE state = 'delivered' AND history_compacted = 0;
