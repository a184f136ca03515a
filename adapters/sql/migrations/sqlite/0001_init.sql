-- hookrelay schema version 1 (SQLite). Times are INTEGER unix nanoseconds
-- written from the caller's clock; -9223372036854775808 stands for the zero
-- time. {p} is the validated table prefix.
CREATE TABLE IF NOT EXISTS {p}deliveries (
	id               TEXT NOT NULL PRIMARY KEY,
	event_id         TEXT NOT NULL,
	tenant_id        TEXT NOT NULL,
	scope            TEXT NOT NULL,
	destination_id   TEXT NOT NULL,
	event_type       TEXT NOT NULL,
	payload          BLOB,
	envelope_version INTEGER NOT NULL,
	attempt          INTEGER NOT NULL,
	first_queued_at  INTEGER NOT NULL,
	next_attempt_at  INTEGER NOT NULL,
	policy_version   TEXT NOT NULL,
	state            TEXT NOT NULL,
	last_outcome     TEXT NOT NULL,
	last_reason      TEXT NOT NULL,
	updated_at       INTEGER NOT NULL,
	dead_lettered_at INTEGER,
	lease_token      INTEGER NOT NULL DEFAULT 0,
	lease_holder     TEXT NOT NULL DEFAULT '',
	lease_expires_at INTEGER
);
-- Claims walk this index in order; only pending rows are in it, so delivered
-- and dead history does not slow them down.
CREATE INDEX IF NOT EXISTS {p}deliveries_due ON {p}deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS {p}deliveries_destination ON {p}deliveries (destination_id, state);
CREATE TABLE IF NOT EXISTS {p}attempts (
	seq             INTEGER PRIMARY KEY,
	delivery_id     TEXT NOT NULL,
	number          INTEGER NOT NULL,
	started_at      INTEGER NOT NULL,
	finished_at     INTEGER NOT NULL,
	kind            INTEGER NOT NULL,
	outcome         TEXT NOT NULL,
	reason          TEXT NOT NULL,
	status_code     INTEGER NOT NULL,
	detail          TEXT NOT NULL,
	next_attempt_at INTEGER
);
CREATE INDEX IF NOT EXISTS {p}attempts_delivery ON {p}attempts (delivery_id, seq);
CREATE TABLE IF NOT EXISTS {p}destinations (
	id              TEXT NOT NULL PRIMARY KEY,
	tenant_id       TEXT NOT NULL,
	url             TEXT NOT NULL,
	secrets         TEXT NOT NULL,
	headers         TEXT NOT NULL,
	policy          TEXT NOT NULL,
	max_concurrency INTEGER NOT NULL,
	timeout_ns      INTEGER NOT NULL,
	paused          INTEGER NOT NULL,
	disabled        INTEGER NOT NULL,
	disabled_reason TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS {p}redrives (
	id             TEXT NOT NULL PRIMARY KEY,
	created_at     INTEGER NOT NULL,
	actor          TEXT NOT NULL,
	tenant_id      TEXT NOT NULL,
	selection      TEXT NOT NULL,
	delivery_count INTEGER NOT NULL,
	state          TEXT NOT NULL,
	updated_at     INTEGER NOT NULL
);
-- The recipient kit's idempotency records: one per webhook-id.
CREATE TABLE IF NOT EXISTS {p}idempotency (
	idem_key     TEXT NOT NULL PRIMARY KEY,
	state        TEXT NOT NULL,
	token        TEXT NOT NULL,
	started_at   INTEGER NOT NULL,
	completed_at INTEGER,
	status       INTEGER NOT NULL,
	header       TEXT NOT NULL,
	body         BLOB
);
