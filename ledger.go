package hookrelay

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Ledger is the durable record of every delivery and attempt (the seeds'
// DeliveryLedger). It decides what work is allowed to do and keeps the
// evidence. Each write takes the caller's lease (see Queue for what the
// current lease is) and checks, in this order: a token that is not the
// delivery's current one (older, or zero) is ErrLeaseLost, so a stale
// holder cannot overwrite a newer attempt; a record no longer pending is
// ErrInvalidState (MarkDelivered on a delivered record is a no-op instead);
// a lease already ended — by Release or by an earlier write — or an attempt
// number that is not the record's is ErrLeaseLost. A lease that expired but
// was not claimed again still writes: fencing is by token, not by clock.
// Each write stores the finished attempt together with the state change,
// atomically, and ends the caller's lease: the delivery is done, dead, or
// claimable again at its next time even if the queue transition that
// follows never happens (a crash between the two). Where the ledger's
// records are the queue's entries (memory, SQL), that makes the transition
// itself a cheap check rather than a second write.
//
// A Ledger must be durable: a write that returned nil survives a crash and
// a power loss (commits reach stable storage), records are never evicted,
// and a failover never lands on a replica that may lack acknowledged
// writes. A lost record is a webhook never sent; a lost write or a token
// that goes backwards lets a stale holder overwrite a newer attempt. Times
// are the caller's, stored exactly to the nanosecond (CheckStorable gives
// the range). Implementations must be safe for concurrent use, return an
// error wrapping ctx's error when ctx is done, and translate backend errors
// to the core's sentinel errors. docs/adapters.md has the whole contract.
type Ledger interface {
	// Create stores new pending deliveries: State is pending whatever the
	// input says, every other field is stored as given. A delivery whose ID
	// already exists is left untouched (enqueue is idempotent by delivery
	// ID); the returned slice says, per input, whether a record was
	// created. A delivery CheckStorable refuses refuses the whole call with
	// its *ValidationError, and nothing is stored.
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

// Storage limits every Ledger enforces at Create (see CheckStorable), so a
// record the memory fake accepts is one the SQL store accepts too.
const (
	// MaxStoredStringBytes bounds the ID, EventID, TenantID,
	// DestinationID, EventType and PolicyVersion of a stored record.
	MaxStoredStringBytes = 255
	// MaxStoredScopeBytes bounds a record's Scope: the bytes of all its
	// keys and values together. It is what the largest Scope that
	// Client.Prepare accepts can hold (MaxScopeLabels labels of
	// MaxScopeKeyBytes and MaxScopeValueBytes), so the store never refuses
	// what the client let through.
	MaxStoredScopeBytes = MaxScopeLabels * (MaxScopeKeyBytes + MaxScopeValueBytes)
)

// storableTimes is the range of times every Ledger stores exactly: what
// int64 nanoseconds since 1970 hold.
var (
	minStorableTime = time.Unix(0, math.MinInt64+1)
	maxStorableTime = time.Unix(0, math.MaxInt64)
)

// CheckStorable returns a *ValidationError (wrapping ErrInvalidDelivery)
// naming the first field of d that a Ledger must refuse at Create: an
// empty ID; an ID, EventID, TenantID, DestinationID, EventType or
// PolicyVersion over MaxStoredStringBytes, not valid UTF-8 or holding a NUL
// byte; a Scope key or value that is not valid UTF-8, or a Scope over
// MaxStoredScopeBytes; an EnvelopeVersion this library does not know; a
// FirstQueuedAt, NextAttemptAt or UpdatedAt outside the years 1678 to 2262
// (zero is allowed). These are what a TEXT column of every SQL dialect and
// int64 nanoseconds hold exactly. Every Ledger, the memory fake included,
// calls it (or applies the same rules) so that tests passing on one store
// do not fail on another. Client.Prepare already refuses most of these;
// records written by EnqueueTx or by hand reach the store unchecked.
func CheckStorable(d Delivery) error {
	for _, f := range []struct {
		name, v string
	}{
		{"ID", d.ID}, {"EventID", d.EventID}, {"TenantID", d.TenantID},
		{"DestinationID", d.DestinationID}, {"EventType", d.EventType}, {"PolicyVersion", d.PolicyVersion},
	} {
		switch {
		case f.name == "ID" && f.v == "":
			return invalid(ErrInvalidDelivery, f.name, "must not be empty")
		case len(f.v) > MaxStoredStringBytes:
			return invalid(ErrInvalidDelivery, f.name, fmt.Sprintf("is %d bytes, over the %d-byte limit", len(f.v), MaxStoredStringBytes))
		case !utf8.ValidString(f.v):
			return invalid(ErrInvalidDelivery, f.name, "is not valid UTF-8")
		case strings.IndexByte(f.v, 0) >= 0:
			return invalid(ErrInvalidDelivery, f.name, "contains a NUL byte")
		}
	}
	size := 0
	for k, v := range d.Scope {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return invalid(ErrInvalidDelivery, "Scope", fmt.Sprintf("label %q is not valid UTF-8", shortPrefix(k)))
		}
		size += len(k) + len(v)
	}
	if size > MaxStoredScopeBytes {
		return invalid(ErrInvalidDelivery, "Scope", fmt.Sprintf("is %d bytes, over the %d-byte limit", size, MaxStoredScopeBytes))
	}
	if d.EnvelopeVersion < 0 || d.EnvelopeVersion > EnvelopeVersion {
		return invalid(ErrInvalidDelivery, "EnvelopeVersion", fmt.Sprintf("%d is unknown (this library writes versions 1 to %d)", d.EnvelopeVersion, EnvelopeVersion))
	}
	for _, t := range []struct {
		name string
		t    time.Time
	}{{"FirstQueuedAt", d.FirstQueuedAt}, {"NextAttemptAt", d.NextAttemptAt}, {"UpdatedAt", d.UpdatedAt}} {
		if !t.t.IsZero() && (t.t.Before(minStorableTime) || t.t.After(maxStorableTime)) {
			return invalid(ErrInvalidDelivery, t.name, t.t.Format(time.RFC3339)+" is outside the storable range (years 1678 to 2262)")
		}
	}
	return nil
}

// shortPrefix is at most the first 32 bytes of s, for error messages.
func shortPrefix(s string) string {
	if len(s) <= 32 {
		return s
	}
	return s[:32] + "…"
}
