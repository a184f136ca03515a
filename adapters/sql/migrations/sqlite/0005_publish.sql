-- hookrelay schema version 5 (SQLite): subscriptions for Client.Publish.
-- event_types holds a destination's EventTypes patterns as a JSON array
-- ('[]': every event type). Publish reads one tenant's destinations through
-- the tenant index, in ID order, and matches the patterns in Go, so a
-- tenant's publish does not scan other tenants' destinations.
ALTER TABLE {p}destinations ADD COLUMN event_types TEXT NOT NULL DEFAULT '[]';
CREATE INDEX IF NOT EXISTS {p}destinations_tenant ON {p}destinations (tenant_id, id);
