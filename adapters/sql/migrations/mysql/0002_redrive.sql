-- hookrelay schema version 2 (MariaDB and MySQL): operator recovery. A
-- redrive gives a delivery a fresh attempt budget while its attempt
-- numbering continues, so the row records where the current budget began.
-- The redrives table becomes the redrive audit log, which also carries the
-- durable stop control.
--
-- Portable to MySQL 8, which has no ADD COLUMN IF NOT EXISTS nor CREATE
-- INDEX IF NOT EXISTS: each ALTER TABLE adds one column, and Migrate skips
-- a column or index that information_schema shows exists, so a step
-- interrupted here (MySQL commits DDL implicitly) completes on the next
-- Migrate. BLOB defaults are parenthesized expressions, which both accept.
ALTER TABLE {p}deliveries ADD COLUMN budget_start INT NOT NULL DEFAULT 0;
CREATE INDEX {p}deliveries_dead ON {p}deliveries (state, updated_at, id);
ALTER TABLE {p}redrives ADD COLUMN reason BLOB NOT NULL DEFAULT ('');
ALTER TABLE {p}redrives ADD COLUMN tenants BLOB NOT NULL DEFAULT ('[]');
ALTER TABLE {p}redrives ADD COLUMN snapshot_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE {p}redrives ADD COLUMN rate_per_second DOUBLE NOT NULL DEFAULT 0;
ALTER TABLE {p}redrives ADD COLUMN batch_size INT NOT NULL DEFAULT 0;
ALTER TABLE {p}redrives ADD COLUMN redriven BIGINT NOT NULL DEFAULT 0;
ALTER TABLE {p}redrives ADD COLUMN skipped BIGINT NOT NULL DEFAULT 0;
ALTER TABLE {p}redrives ADD COLUMN stop_requested INT NOT NULL DEFAULT 0;
ALTER TABLE {p}redrives ADD COLUMN stop_requested_by BLOB NOT NULL DEFAULT ('');
ALTER TABLE {p}redrives ADD COLUMN last_delivery_id VARBINARY(255) NOT NULL DEFAULT '';
ALTER TABLE {p}redrives ADD COLUMN error BLOB NOT NULL DEFAULT ('');
