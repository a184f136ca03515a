-- hookrelay schema version 11 (MariaDB/MySQL): the columns that hold a
-- caller's JSON or text of no fixed bound become LONGBLOB, as they are
-- unbounded TEXT on PostgreSQL and SQLite. A BLOB holds 65,535 bytes: a
-- destination with 64 KiB of headers or secrets could not be Put, and a
-- redrive spanning a few thousand tenants could not write its audit
-- (tenants), so it could not start. Free text (reasons, details) stays
-- BLOB: every store cuts it to hookrelay.MaxStoredTextBytes. MODIFY is
-- idempotent, so a step interrupted here completes on the next Migrate.
-- redrives.resumed_by records who last resumed a redrive.
ALTER TABLE {p}destinations MODIFY url LONGBLOB NOT NULL;
ALTER TABLE {p}destinations MODIFY secrets LONGBLOB NOT NULL;
ALTER TABLE {p}destinations MODIFY headers LONGBLOB NOT NULL;
ALTER TABLE {p}destinations MODIFY policy LONGBLOB NOT NULL;
ALTER TABLE {p}destinations MODIFY event_types LONGBLOB NOT NULL;
ALTER TABLE {p}redrives MODIFY tenants LONGBLOB NOT NULL;
ALTER TABLE {p}idempotency MODIFY header LONGBLOB NOT NULL;
ALTER TABLE {p}redrives ADD COLUMN resumed_by BLOB NOT NULL DEFAULT ('');
