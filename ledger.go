package hookrelay

import (
	"context"
	"time"
)

// Ledger is the durable record of every delivery and attempt (the seeds'
// DeliveryLedger). It decides what work is allowed to do and keeps the
// evidence. Each write takes the caller's lease and is refused with
// ErrLeaseLost when the lease is no longer current, so a stale holder cannot
// overwrite a newer attempt. Each write stores the finished attempt together
// with the state change, atomically, and ends the caller's lease: the
// delivery is done, dead, or claimable again at its next time even if the
// queue transition that follows never happens (a crash between the two).
// Where the ledger's records are the queue's entries (memory, SQL), that
// makes the transition itself a cheap check rather than a second write. Implementations must be safe for
// concurrent use and translate backend errors to the core's sentinel errors.
type Ledger interface {
	// Create stores new pending deliveries. A delivery whose ID already
	// exists is left untouched (enqueue is idempotent by delivery ID); the
	// returned slice says, per input, whether a record was created.
	Create(ctx context.Context, deliveries []Delivery) ([]bool, error)
	// Get returns the record, or an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (Delivery, error)
	// WasDelivered reports whether the delivery is recorded as delivered.
	// An unknown ID is not delivered.
	WasDelivered(ctx context.Context, id string) (bool, error)
	// MarkDelivered records the delivery as delivered with its final attempt.
	// Marking a delivered record again is a no-op.
	MarkDelivered(ctx context.Context, params MarkDeliveredParams) error
	// RecordRetry records a failed attempt and the next one: attempt number
	// and eligible time.
	RecordRetry(ctx context.Context, params RecordRetryParams) error
	// RecordDeadLetter records the delivery as dead with its reason (and the
	// final attempt, if one was made).
	RecordDeadLetter(ctx context.Context, params RecordDeadLetterParams) error
	// Attempts returns the attempt history in attempt order.
	Attempts(ctx context.Context, id string) ([]Attempt, error)
}

// MarkDeliveredParams are the inputs of Ledger.MarkDelivered.
type MarkDeliveredParams struct {
	ID      string
	Lease   Lease
	Attempt Attempt
	Now     time.Time
}

// RecordRetryParams are the inputs of Ledger.RecordRetry.
type RecordRetryParams struct {
	ID    string
	Lease Lease
	// Attempt is the failed attempt; its Number is the delivery's current
	// attempt.
	Attempt Attempt
	// NextAttempt is Attempt.Number + 1; NextAttemptAt is when it is due.
	NextAttempt   int
	NextAttemptAt time.Time
	Now           time.Time
}

// RecordDeadLetterParams are the inputs of Ledger.RecordDeadLetter.
type RecordDeadLetterParams struct {
	ID     string
	Lease  Lease
	Reason string
	// Attempt is the final attempt, or nil when the delivery was
	// dead-lettered without sending (delivery window passed, destination
	// unknown).
	Attempt *Attempt
	Now     time.Time
}
