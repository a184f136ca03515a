-- hookrelay schema version 2 (MariaDB): operator recovery. A redrive gives a
-- delivery a fresh attempt budget while its attempt numbering continues, so
-- the row records where the current budget began. The redrives table becomes
-- the redrive audit log, which also carries the durable stop control. IF NOT
-- EXISTS keeps every statement re-runnable (MariaDB syntax).
ALTER TABLE {p}deliveries ADD COLUMN IF NOT EXISTS budget_start INT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS {p}deliveries_dead ON {p}deliveries (state, updated_at, id);
ALTER TABLE {p}redrives
	ADD COLUMN IF NOT EXISTS reason BLOB NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS tenants BLOB NOT NULL DEFAULT '[]',
	ADD COLUMN IF NOT EXISTS snapshot_at BIGINT NOT NULL DEFAULT 0,
	ADD COLUMN IF NOT EXISTS rate_per_second DOUBLE NOT NULL DEFAULT 0,
	ADD COLUMN IF NOT EXISTS batch_size INT NOT NULL DEFAULT 0,
	ADD COLUMN IF NOT EXISTS redriven BIGINT NOT NULL DEFAULT 0,
	ADD COLUMN IF NOT EXISTS skipped BIGINT NOT NULL DEFAULT 0,
	ADD COLUMN IF NOT EXISTS stop_requested INT NOT NULL DEFAULT 0,
	ADD COLUMN IF NOT EXISTS stop_requested_by BLOB NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS last_delivery_id VARBINARY(255) NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS error BLOB NOT NULL DEFAULT '';
