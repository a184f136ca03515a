-- hookrelay schema version 7 (MariaDB/MySQL): retention and broker outbox
-- recovery. touched_at is when a record was last leased through
-- AcquireLease or taken as unpublished (NULL: never), so a broker worker can
-- tell a pending record whose message was lost. history_compacted marks a
-- delivered record whose attempts were compacted into attempt_summaries.
-- The cleaner removes delivered and dead rows oldest first through
-- deliveries_dead (state, updated_at, id); compaction walks the index below.
ALTER TABLE {p}deliveries ADD COLUMN touched_at BIGINT NULL;
ALTER TABLE {p}deliveries ADD COLUMN history_compacted INT NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS {p}attempt_summaries (
	delivery_id      VARBINARY(255) NOT NULL PRIMARY KEY,
	attempts         INT NOT NULL,
	first_started_at BIGINT NOT NULL,
	last_finished_at BIGINT NOT NULL,
	last_status_code INT NOT NULL,
	last_outcome     VARBINARY(16) NOT NULL,
	last_reason      BLOB NOT NULL
) ENGINE=InnoDB;
CREATE INDEX {p}deliveries_uncompacted ON {p}deliveries (state, history_compacted, updated_at, id);
