-- hookrelay schema version 8 (PostgreSQL): recipient protection.
-- max_per_second is Destination.MaxPerSecond (0: the client's default).
-- destination_guards holds each guarded destination's state
-- (hookrelay.GuardState), read and written under its row lock;
-- claimable_at is its ClaimableAt, so a claim skips a destination that is
-- held, rate-limited or behind an open circuit.
ALTER TABLE {p}destinations ADD COLUMN IF NOT EXISTS max_per_second DOUBLE PRECISION NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS {p}destination_guards (
	destination_id TEXT PRIMARY KEY,
	tokens         DOUBLE PRECISION NOT NULL,
	refilled_at    BIGINT NOT NULL,
	limited_until  BIGINT NOT NULL,
	held_until     BIGINT NOT NULL,
	failures       INTEGER NOT NULL,
	circuit        TEXT NOT NULL,
	open_until     BIGINT NOT NULL,
	probe          TEXT NOT NULL,
	failing_since  BIGINT NOT NULL,
	claimable_at   BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS {p}destination_guards_claimable ON {p}destination_guards (claimable_at);
