-- hookrelay schema version 10 (SQLite): the attempt that delivered a record
-- is kept in the record's own row (delivering_*) instead of as a row of the
-- attempts table; delivering_attempt is its number, NULL when the row keeps
-- none. Its kind is delivered, its outcome and reason are the row's
-- last_outcome and last_reason, it scheduled nothing. A delivery's history
-- is its attempts rows, in order, then this one; compaction summarizes both
-- and clears these columns. One insert and two index entries fewer per
-- delivered delivery, on SQLite's one writer.
ALTER TABLE {p}deliveries ADD COLUMN delivering_attempt INTEGER;
ALTER TABLE {p}deliveries ADD COLUMN delivering_started_at INTEGER;
ALTER TABLE {p}deliveries ADD COLUMN delivering_finished_at INTEGER;
ALTER TABLE {p}deliveries ADD COLUMN delivering_status_code INTEGER;
ALTER TABLE {p}deliveries ADD COLUMN delivering_detail TEXT;
