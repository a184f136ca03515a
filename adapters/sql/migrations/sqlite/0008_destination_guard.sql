-- hookrelay schema version 8 (SQLite): recipient protection.
-- max_per_second is Destination.MaxPerSecond (0: the client's default).
-- destination_guards holds each guarded destination's state
-- (hookrelay.GuardState), read and written under the write lock;
-- claimable_at is its ClaimableAt, so a claim skips a destination that is
-- held, rate-limited or behind an open circuit.
ALTER TABLE {p}destinations ADD COLUMN max_per_second REAL NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS {p}destination_guards (
	destination_id TEXT NOT NULL PRIMARY KEY,
	tokens         REAL NOT NULL,
	refilled_at    INTEGER NOT NULL,
	limited_until  INTEGER NOT NULL,
	held_until     INTEGER NOT NULL,
	failures       INTEGER NOT NULL,
	circuit        TEXT NOT NULL,
	open_until     INTEGER NOT NULL,
	probe          TEXT NOT NULL,
	failing_since  INTEGER NOT NULL,
	claimable_at   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS {p}destination_guards_claimable ON {p}destination_guards (claimable_at);
