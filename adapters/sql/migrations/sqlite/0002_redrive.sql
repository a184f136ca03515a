-- hookrelay schema version 2: operator recovery. A redrive gives a delivery
-- a fresh attempt budget while its attempt numbering continues, so the row
-- records where the current budget began (0, like 1, means attempt 1). The
-- redrives table becomes the redrive audit log, which also carries the
-- durable stop control.
ALTER TABLE {p}deliveries ADD COLUMN budget_start INTEGER NOT NULL DEFAULT 0;
-- Dead-letter listing walks dead rows in (dead-letter time, id) order.
CREATE INDEX IF NOT EXISTS {p}deliveries_dead ON {p}deliveries (updated_at, id) WHERE state = 'dead';
ALTER TABLE {p}redrives ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE {p}redrives ADD COLUMN tenants TEXT NOT NULL DEFAULT '[]';
ALTER TABLE {p}redrives ADD COLUMN snapshot_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE {p}redrives ADD COLUMN rate_per_second REAL NOT NULL DEFAULT 0;
ALTER TABLE {p}redrives ADD COLUMN batch_size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {p}redrives ADD COLUMN redriven BIGINT NOT NULL DEFAULT 0;
ALTER TABLE {p}redrives ADD COLUMN skipped BIGINT NOT NULL DEFAULT 0;
ALTER TABLE {p}redrives ADD COLUMN stop_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {p}redrives ADD COLUMN stop_requested_by TEXT NOT NULL DEFAULT '';
ALTER TABLE {p}redrives ADD COLUMN last_delivery_id TEXT NOT NULL DEFAULT '';
ALTER TABLE {p}redrives ADD COLUMN error TEXT NOT NULL DEFAULT '';
