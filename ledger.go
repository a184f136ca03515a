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

// LedgerWrite is one finished attempt's ledger write, as a BatchLedger
// takes it: exactly one field is set.
type LedgerWrite struct {
	Delivered  *MarkDeliveredParams
	Retry      *RecordRetryParams
	DeadLetter *RecordDeadLetterParams
}

// deliveryID returns the ID of the delivery the write is for.
func (w LedgerWrite) deliveryID() string {
	switch {
	case w.Delivered != nil:
		return w.Delivered.ID
	case w.Retry != nil:
		return w.Retry.ID
	case w.DeadLetter != nil:
		return w.DeadLetter.ID
	}
	return ""
}

// BatchLedger is an optional ability of a Ledger: it records the writes of
// many finished attempts in one durable commit (group commit), which is
// where a durable store spends its time — an fsync on SQLite, a WAL flush
// and a round trip on PostgreSQL. The worker gathers the writes of attempts
// that finish close together and hands them over at once; nothing is
// acknowledged, scheduled, dead-lettered or reported before the batch
// holding its write committed, so the ordering rules do not change.
//
// RecordBatch applies writes in order, in one atomic commit, each exactly as
// the single method (MarkDelivered, RecordRetry, RecordDeadLetter) would,
// fenced by its own lease: one write refused with ErrLeaseLost,
// ErrInvalidState or ErrNotFound does not stop the others. When the batch
// committed it returns one entry per write, nil for a write that took effect
// (or was a no-op, as MarkDelivered again is), and a nil error. When nothing
// committed it returns a nil slice and the error: no write took effect, and
// every delivery stays leased until its lease expires, then claimable again.
// A write must never be reported as committed when the store may not have
// it durably. Implementations must be safe for concurrent use; the memory
// and SQL ledgers implement it.
type BatchLedger interface {
	Ledger
	RecordBatch(ctx context.Context, writes []LedgerWrite) ([]error, error)
}
