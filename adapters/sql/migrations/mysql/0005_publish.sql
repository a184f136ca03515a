-- hookrelay schema version 5 (MariaDB and MySQL 8): subscriptions for
-- Client.Publish. event_types holds a destination's EventTypes patterns as
-- a JSON array; rows that existed before this step read '' (every event
-- type, like '[]'), since MySQL gives a BLOB no literal default. Publish
-- reads one tenant's destinations through the tenant index, in ID order,
-- and matches the patterns in Go, so a tenant's publish does not scan other
-- tenants' destinations. The column and the index are one ALTER statement
-- (no IF NOT EXISTS, which MySQL 8 lacks): it applies whole or not at all,
-- so an interrupted step has either nothing to redo or only its version to
-- record.
ALTER TABLE {p}destinations
	ADD COLUMN event_types BLOB NOT NULL,
	ADD INDEX {p}destinations_tenant (tenant_id, id);
