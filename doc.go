// Package hookrelay delivers webhooks reliably from inside a Go service.
//
// A service hands hookrelay events with [Client.Enqueue]; hookrelay gets each
// one to its destination at least once. Every delivery has one immutable
// delivery ID, derived from (event ID, destination ID) by [DeliveryID] and
// sent as the idempotency key on every attempt, including a manual redrive.
// Each failure is classified ([Result]) before anything is retried; retries
// use capped exponential backoff with full jitter ([NextDelay]); every
// attempt is recorded in a durable [Ledger]; and deliveries that exhaust
// their budget, pass their delivery window, or are rejected permanently move
// to a dead-letter state that operators can inspect and redrive.
//
// [Client.Publish] fans one event out to every destination of a tenant
// subscribed to its type ([Destination].EventTypes, [MatchEventType]), in
// one atomic step, with the same per-destination delivery IDs.
//
// # What at-least-once means here
//
// A timeout after the request was written is an unknown outcome, not a
// failure: the recipient may have applied the event. hookrelay retries it
// with the same delivery ID, and only the recipient's deduplication by that
// ID can turn the repeat into one business effect. hookrelay never claims
// exactly-once delivery; a recipient that does not deduplicate may see an
// event more than once.
//
// # Layers
//
// The [Queue] decides when work runs; the [Ledger] decides what work is
// allowed to do and keeps the evidence; the delivery ID is identity. The core
// package depends only on these ports. Adapters live under adapters/
// (stores: memory, sql; broker queues: nats, amqp; the HTTP sender, its
// recipient kit and the operator console: http; observers: slog,
// prometheus, otel), and the public conformance suite in hookrelaytest is
// what every Queue and Ledger implementation, ours and yours, must pass.
package hookrelay
