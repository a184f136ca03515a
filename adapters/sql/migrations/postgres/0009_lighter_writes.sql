-- hookrelay schema version 9 (PostgreSQL): fewer index writes per
-- delivery. Measured per delivered delivery (claim, ledger write, attempt
-- row; one connection, 8,000 deliveries, from the WAL): B-tree leaf inserts
-- 8.2 → 5.0 and WAL 2,080 → 1,180 bytes; in peerbench the server's CPU per
-- delivery went from 92 to 81 µs (docs/benchmarks.md).
--
-- deliveries_destination holds pending and dead rows only: every query that
-- reads it (Stats, the dead-letter queries filtered by destination) asks for
-- those states, and a row's move to delivered, which changes indexed
-- columns and so writes a new entry into each index that holds the row, no
-- longer adds one here.
DROP INDEX IF EXISTS {p}deliveries_destination;
CREATE INDEX IF NOT EXISTS {p}deliveries_destination ON {p}deliveries (destination_id, state) WHERE state <> 'delivered';
-- The attempts' primary key is (delivery_id, seq), the order every reader
-- uses (a record's history, its attempt count, the cleaner's deletes and
-- summaries), in place of the key on seq alone plus a second index on
-- (delivery_id, seq): one index to write per attempt instead of two. seq
-- stays an identity column, so each attempt still gets the next number;
-- nothing looks an attempt up by seq alone. On a large attempts table this
-- step builds the new key's index once, holding writes to the table
-- meanwhile (the step is one transaction).
CREATE UNIQUE INDEX IF NOT EXISTS {p}attempts_delivery_seq ON {p}attempts (delivery_id, seq);
ALTER TABLE {p}attempts DROP CONSTRAINT IF EXISTS {p}attempts_pkey;
ALTER TABLE {p}attempts ADD CONSTRAINT {p}attempts_pkey PRIMARY KEY USING INDEX {p}attempts_delivery_seq;
DROP INDEX IF EXISTS {p}attempts_delivery;
-- Half of each deliveries page is left free (was 30%, version 6): a claim
-- changes unindexed columns only, and with room on the page for a new
-- version of every row it holds, every claim is a heap-only update (about
-- half were at 70: a claim updates rows in batches, and a page filled up
-- before the claim committed and its old versions could be pruned). A
-- non-heap-only claim writes an entry into the key, due and destination
-- indexes.
ALTER TABLE {p}deliveries SET (fillfactor = 50);
