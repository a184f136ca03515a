-- hookrelay schema version 1 (MariaDB/MySQL). Times are BIGINT unix
-- nanoseconds written from the caller's clock; -9223372036854775808 stands for
-- the zero time. Strings are stored as bytes (VARBINARY/BLOB) so IDs compare
-- exactly, without case folding or trailing-space padding. Indexes are
-- declared inline because MySQL has no CREATE INDEX IF NOT EXISTS. {p} is the
-- validated table prefix.
CREATE TABLE IF NOT EXISTS {p}deliveries (
	id               VARBINARY(255) NOT NULL PRIMARY KEY,
	seq              BIGINT NOT NULL AUTO_INCREMENT UNIQUE,
	event_id         VARBINARY(255) NOT NULL,
	tenant_id        VARBINARY(255) NOT NULL,
	scope            LONGBLOB NOT NULL,
	destination_id   VARBINARY(255) NOT NULL,
	event_type       VARBINARY(255) NOT NULL,
	payload          LONGBLOB,
	envelope_version INT NOT NULL,
	attempt          INT NOT NULL,
	first_queued_at  BIGINT NOT NULL,
	next_attempt_at  BIGINT NOT NULL,
	policy_version   VARBINARY(255) NOT NULL,
	state            VARBINARY(16) NOT NULL,
	last_outcome     VARBINARY(16) NOT NULL,
	last_reason      BLOB NOT NULL,
	updated_at       BIGINT NOT NULL,
	dead_lettered_at BIGINT NULL,
	lease_token      BIGINT NOT NULL DEFAULT 0,
	lease_holder     VARBINARY(255) NOT NULL DEFAULT '',
	lease_expires_at BIGINT NULL,
	INDEX {p}deliveries_due (state, next_attempt_at, seq),
	INDEX {p}deliveries_destination (destination_id, state)
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS {p}attempts (
	seq             BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
	delivery_id     VARBINARY(255) NOT NULL,
	number          INT NOT NULL,
	started_at      BIGINT NOT NULL,
	finished_at     BIGINT NOT NULL,
	kind            INT NOT NULL,
	outcome         VARBINARY(16) NOT NULL,
	reason          BLOB NOT NULL,
	status_code     INT NOT NULL,
	detail          BLOB NOT NULL,
	next_attempt_at BIGINT NULL,
	INDEX {p}attempts_delivery (delivery_id, seq)
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS {p}destinations (
	id              VARBINARY(255) NOT NULL PRIMARY KEY,
	tenant_id       VARBINARY(255) NOT NULL,
	url             BLOB NOT NULL,
	secrets         BLOB NOT NULL,
	headers         BLOB NOT NULL,
	policy          BLOB NOT NULL,
	max_concurrency INT NOT NULL,
	timeout_ns      BIGINT NOT NULL,
	paused          INT NOT NULL,
	disabled        INT NOT NULL,
	disabled_reason BLOB NOT NULL
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS {p}redrives (
	id             VARBINARY(255) NOT NULL PRIMARY KEY,
	created_at     BIGINT NOT NULL,
	actor          BLOB NOT NULL,
	tenant_id      VARBINARY(255) NOT NULL,
	selection      LONGBLOB NOT NULL,
	delivery_count BIGINT NOT NULL,
	state          VARBINARY(16) NOT NULL,
	updated_at     BIGINT NOT NULL
) ENGINE=InnoDB;
-- The recipient kit's idempotency records: one per webhook-id.
CREATE TABLE IF NOT EXISTS {p}idempotency (
	idem_key     VARBINARY(255) NOT NULL PRIMARY KEY,
	state        VARBINARY(16) NOT NULL,
	token        VARBINARY(64) NOT NULL,
	started_at   BIGINT NOT NULL,
	completed_at BIGINT NULL,
	status       INT NOT NULL,
	header       BLOB NOT NULL,
	body         LONGBLOB
) ENGINE=InnoDB;
