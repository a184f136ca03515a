-- hookrelay schema version 8 (MariaDB/MySQL): recipient protection.
-- max_per_second is Destination.MaxPerSecond (0: the client's default).
-- destination_guards holds each guarded destination's state
-- (hookrelay.GuardState), read and written under its row lock;
-- claimable_at is its ClaimableAt, so a claim skips a destination that is
-- held, rate-limited or behind an open circuit.
ALTER TABLE {p}destinations ADD COLUMN max_per_second DOUBLE NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS {p}destination_guards (
	destination_id VARBINARY(255) NOT NULL PRIMARY KEY,
	tokens         DOUBLE NOT NULL,
	refilled_at    BIGINT NOT NULL,
	limited_until  BIGINT NOT NULL,
	held_until     BIGINT NOT NULL,
	failures       INT NOT NULL,
	circuit        VARBINARY(16) NOT NULL,
	open_until     BIGINT NOT NULL,
	probe          VARBINARY(255) NOT NULL,
	failing_since  BIGINT NOT NULL,
	claimable_at   BIGINT NOT NULL
) ENGINE=InnoDB;
-- The index's name is short enough for MySQL's 64-byte identifiers with a
-- 40-byte prefix; databases migrated before may call it
-- {p}destination_guards_claimable (nothing refers to it by name).
CREATE INDEX {p}guards_claimable ON {p}destination_guards (claimable_at);
