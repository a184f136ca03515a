-- hookrelay schema version 3: the recipient kit's idempotency records keep
-- the SHA-256 of the request body, so a webhook-id reused with a different
-- body is refused instead of replaying another request's response. NULL
-- for records kept before (trusted as before).
ALTER TABLE {p}idempotency ADD COLUMN body_hash VARBINARY(32) NULL;
