-- hookrelay schema version 4 (MariaDB and MySQL 8): a redrive gives a
-- delivery a fresh delivery window as well as a fresh attempt budget, so the
-- row records when the current window began. NULL means first_queued_at
-- (never redriven). MySQL 8 has no ADD COLUMN IF NOT EXISTS: Migrate treats
-- "duplicate column name" (error 1060) as already applied, which keeps the
-- statement re-runnable on both. (Version 3 is reserved for another change;
-- Migrate applies every missing version, so the gap is harmless.)
ALTER TABLE {p}deliveries ADD COLUMN window_start BIGINT NULL;
-- Recent attempt outcomes (the operator console's overview) count attempts by
-- the time they finished. MySQL 8 has no CREATE INDEX IF NOT EXISTS either:
-- Migrate treats "duplicate key name" (error 1061) as already applied.
CREATE INDEX {p}attempts_finished ON {p}attempts (finished_at);
