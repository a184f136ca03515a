-- hookrelay schema version 10 (PostgreSQL): the attempt that delivered a
-- record is kept in the record's own row (delivering_*) instead of as a row
-- of the attempts table; delivering_attempt is its number, NULL when the
-- row keeps none. Its kind is delivered, its outcome and reason are the
-- row's last_outcome and last_reason, it scheduled nothing. A delivery's
-- history is its attempts rows, in order, then this one; compaction
-- summarizes both and clears these columns. Measured (docs/benchmarks.md):
-- the attempt's insert and its two index entries were about a fifth of the
-- server's work per delivered delivery. Adding columns without a default
-- rewrites nothing.
ALTER TABLE {p}deliveries ADD COLUMN IF NOT EXISTS delivering_attempt INTEGER;
ALTER TABLE {p}deliveries ADD COLUMN IF NOT EXISTS delivering_started_at BIGINT;
ALTER TABLE {p}deliveries ADD COLUMN IF NOT EXISTS delivering_finished_at BIGINT;
ALTER TABLE {p}deliveries ADD COLUMN IF NOT EXISTS delivering_status_code INTEGER;
ALTER TABLE {p}deliveries ADD COLUMN IF NOT EXISTS delivering_detail TEXT;
