// Package hooksql is hookrelay's durable store on database/sql: one Store is
// the Ledger, the Queue, the LedgerStats, the LeaseLedger and the
// Destinations of a Client, on SQLite (modernc.org/sqlite, pure Go, the
// embedded default), PostgreSQL (pgx v5) or MariaDB/MySQL
// (go-sql-driver/mysql). It passes the same conformance suite
// (hookrelaytest) as the memory adapter. Store.IdempotencyStore is the
// recipient kit's idempotency store on the same database.
//
//	store, err := hooksql.OpenSQLite(ctx, "hookrelay.db", hooksql.Options{})
//	if err != nil { … }
//	defer store.Close()
//	if err := store.Migrate(ctx); err != nil { … }
//	client, err := hookrelay.New(hookrelay.Config{
//		Queue: store, Ledger: store, Destinations: store, Sender: sender,
//	})
//
// # One row per delivery
//
// The deliveries table holds the ledger record and is the queue entry: a
// pending row whose next_attempt_at has come and whose lease is absent or
// expired is due. Claim picks due rows in next_attempt_at order through a
// partial index of pending rows (so delivered and dead history does not slow
// it, and a claim among a million pending rows costs what it costs among a
// thousand) and leases them in one transaction: with FOR UPDATE SKIP LOCKED
// on PostgreSQL and MariaDB/MySQL, so workers in many processes take
// disjoint rows without waiting on each other, and under SQLite's single
// writer (BEGIN IMMEDIATE with a busy timeout) otherwise. Deliveries due at
// the same instant are claimed in insertion order; one Create call inserts
// its rows in delivery ID order, so concurrent batches lock rows in the same
// order.
//
// Every claim sets a lease expiry, the holder's name and a fencing token one
// greater than the delivery's previous token; a new row's token starts at
// the wall clock in microseconds, so a record removed by retention and
// created again never hands out a token of the removed one (whose late
// holder would write to it). Every ledger write locks the
// row and checks the caller's token and attempt number first, exactly like
// the memory store: a holder whose lease expired and was claimed again gets
// hookrelay.ErrLeaseLost, an unknown ID hookrelay.ErrNotFound, a record no
// longer pending hookrelay.ErrInvalidState (marking a delivered record
// delivered again is a no-op). The attempt history row is written in the
// same transaction as the state change.
//
// # Time
//
// Nothing reads the database clock: every time comes from the caller's
// params (the Client's injected clock). Times are stored as BIGINT unix
// nanoseconds on every dialect, so a mock clock's times round-trip exactly;
// they are decoded in time.Local, like time.Unix. Times before 1678 or after
// 2262 are refused.
//
// # Transactional enqueue
//
// EnqueueTx stores deliveries built by Client.Prepare in the caller's
// *sql.Tx, so a business write and its webhooks commit or roll back
// together (the outbox pattern). The primary key on the delivery ID makes a
// repeated enqueue a no-op. Create and EnqueueTx insert many rows per
// statement; on PostgreSQL through pgx, Create is one pipelined statement
// per 500 rows (INSERT … SELECT FROM unnest of one array per column) that
// also announces the rows it inserted to listening workers, and EnqueueTx
// runs the same statement in the caller's transaction. PublishTx does the same for a fan-out built by
// Client.PreparePublish: the business write and every subscribed
// destination's delivery commit together.
//
// # Subscriptions
//
// The Store is a hookrelay.DestinationFinder: DestinationsFor reads one
// tenant's destinations through an index on tenant_id and matches their
// event-type patterns (stored as JSON in destinations.event_types) with
// hookrelay.MatchEventType, so Client.Publish to one tenant does not scan
// the others'.
//
// # Schema
//
// Migrate applies the embedded, versioned migrations (tables deliveries,
// attempts, destinations, redrives, idempotency, attempt_summaries,
// destination_guards and schema_migrations, all named with
// Options.TablePrefix). Running it again is a no-op; a database
// at a newer version than SchemaVersion is refused with ErrSchemaTooNew.
//
// # Errors
//
// Failures reported by the database wrap ErrDatabase with the operation and
// the driver's message, with any DSN password removed; no driver error type
// is exposed. A DSN the driver cannot read (or an in-memory SQLite
// database) is refused by Open with ErrInvalidDSN, and an option out of its
// range with ErrInvalidOptions (Options.Validate checks them alone), before
// anything is dialed. Context cancellation wraps the
// context's error, and means the write was not made: a context done once a
// write's commit has been sent no longer ends it, so such a write reports
// the success it had (a single statement outside a transaction of the
// Store's own, such as ReleaseLease's, can still be cancelled in flight
// with its outcome unknown, as any statement). Invalid input
// (a payload over Options.MaxPayloadBytes, an empty, overlong or non-UTF-8
// ID) is refused as a *hookrelay.ValidationError before anything is
// written. A stored row that cannot be decoded is a *DecodeError; a claim
// that meets one moves it to the dead-letter path with ReasonUndecodable
// rather than let it block the queue, and a record written by a newer
// library (a newer envelope version) is left pending for a worker that can
// read it.
//
// Destination secrets and headers are stored in the destinations table as
// JSON, so protect that table like any credential store; they never appear
// in errors.
package hooksql
