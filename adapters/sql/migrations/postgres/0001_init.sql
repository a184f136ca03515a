-- hookrelay schema version 1 (PostgreSQL). Times are BIGINT unix nanoseconds
-- written from the caller's clock; -9223372036854775808 stands for the zero
-- time. {p} is the validated table prefix.
CREATE TABLE IF NOT EXISTS {p}deliveries (
	id               TEXT PRIMARY KEY,
	seq              BIGINT GENERATED ALWAYS AS IDENTITY,
	event_id         TEXT NOT NULL,
	tenant_id        TEXT NOT NULL,
	scope            TEXT NOT NULL,
	destination_id   TEXT NOT NULL,
	event_type       TEXT NOT NULL,
	payload          BYTEA,
	envelope_version INTEGER NOT NULL,
	attempt          INTEGER NOT NULL,
	first_queued_at  BIGINT NOT NULL,
	next_attempt_at  BIGINT NOT NULL,
	policy_version   TEXT NOT NULL,
	state            TEXT NOT NULL,
	last_outcome     TEXT NOT NULL,
	last_reason      TEXT NOT NULL,
	updated_at       BIGINT NOT NULL,
	dead_lettered_at BIGINT,
	lease_token      BIGINT NOT NULL DEFAULT 0,
	lease_holder     TEXT NOT NULL DEFAULT '',
	lease_expires_at BIGINT
);
-- Claims walk this index in order; only pending rows are in it, so delivered
-- and dead history does not slow them down.
CREATE INDEX IF NOT EXISTS {p}deliveries_due ON {p}deliveries (next_attempt_at, seq) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS {p}deliveries_destination ON {p}deliveries (destination_id, state);
CREATE TABLE IF NOT EXISTS {p}attempts (
	seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	delivery_id     TEXT NOT NULL,
	number          INTEGER NOT NULL,
	started_at      BIGINT NOT NULL,
	finished_at     BIGINT NOT NULL,
	kind            INTEGER NOT NULL,
	outcome         TEXT NOT NULL,
	reason          TEXT NOT NULL,
	status_code     INTEGER NOT NULL,
	detail          TEXT NOT NULL,
	next_attempt_at BIGINT
);
CREATE INDEX IF NOT EXISTS {p}attempts_delivery ON {p}attempts (delivery_id, seq);
CREATE TABLE IF NOT EXISTS {p}destinations (
	id              TEXT PRIMARY KEY,
	tenant_id       TEXT NOT NULL,
	url             TEXT NOT NULL,
	secrets         TEXT NOT NULL,
	headers         TEXT NOT NULL,
	policy          TEXT NOT NULL,
	max_concurrency INTEGER NOT NULL,
	timeout_ns      BIGINT NOT NULL,
	paused          INTEGER NOT NULL,
	disabled        INTEGER NOT NULL,
	disabled_reason TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS {p}redrives (
	id             TEXT PRIMARY KEY,
	created_at     BIGINT NOT NULL,
	actor          TEXT NOT NULL,
	tenant_id      TEXT NOT NULL,
	selection      TEXT NOT NULL,
	delivery_count BIGINT NOT NULL,
	state          TEXT NOT NULL,
	updated_at     BIGINT NOT NULL
);
-- The recipient kit's idempotency records: one per webhook-id.
CREATE TABLE IF NOT EXISTS {p}idempotency (
	idem_key     TEXT PRIMARY KEY,
	state        TEXT NOT NULL,
	token        TEXT NOT NULL,
	started_at   BIGINT NOT NULL,
	completed_at BIGINT,
	status       INTEGER NOT NULL,
	header       TEXT NOT NULL,
	body         BYTEA
);
