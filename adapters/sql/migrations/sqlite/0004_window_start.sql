-- hookrelay schema version 4 (SQLite): a redrive gives a delivery a fresh
-- delivery window as well as a fresh attempt budget, so the row records when
-- the current window began. NULL means first_queued_at (never redriven).
-- (Version 3 is reserved for another change; Migrate applies every missing
-- version, so the gap is harmless.)
ALTER TABLE {p}deliveries ADD COLUMN window_start INTEGER;
-- Recent attempt outcomes (the operator console's overview) count attempts by
-- the time they finished.
CREATE INDEX IF NOT EXISTS {p}attempts_finished ON {p}attempts (finished_at);
