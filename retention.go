package hookrelay

import (
	"cmp"
	"strings"
	"time"
)

// RetentionPolicy says how long a ledger keeps delivery history. Pending
// deliveries are never removed. Config.Retention makes the worker apply it
// in small batches (a HistoryCleaner ability of the ledger); the CLI's
// purge command applies it once.
//
// Removing a delivered record also removes what makes enqueue idempotent
// for it: an event enqueued again after its record was removed is a new
// delivery and is sent again. Keep delivered records longer than a
// producer may retry the same event.
type RetentionPolicy struct {
	// Delivered is how long a delivered record and its attempts are kept
	// after delivery (the record's UpdatedAt): one delivered at or before
	// Now−Delivered goes. Zero removes every delivered record at the next
	// pass; unlike Interval and BatchSize, zero is no default.
	Delivered time.Duration
	// AttemptDetails is how long a delivered record keeps every attempt in
	// full after delivery; then its attempts are compacted into one
	// AttemptSummary (count, first and last time, last status and reason)
	// and Ledger.Attempts returns none. It only matters when below
	// Delivered. Zero compacts them at the next pass (zero is no default
	// here either). Dead records always keep their attempts in full.
	AttemptDetails time.Duration
	// RemoveDead allows removing dead records. Defaults to false: dead
	// letters are the evidence a redrive or a dispute needs, so they are
	// kept until an operator removes them (hookrelay purge --dead-after).
	RemoveDead bool
	// Dead is how long a dead record and its attempts are kept after it was
	// dead-lettered (its UpdatedAt), when RemoveDead is set. Zero, with
	// RemoveDead, removes them at the next pass.
	Dead time.Duration
	// Interval is the time between the worker's cleaner passes. Defaults
	// to DefaultRetentionInterval.
	Interval time.Duration
	// BatchSize bounds the records one cleaner transaction removes or
	// compacts, so no transaction holds many row locks for long. A pass
	// runs batches until one is not full. Defaults to
	// DefaultRetentionBatchSize.
	BatchSize int
}

// Defaults of RetentionPolicy's zero Interval and BatchSize.
const (
	DefaultRetentionInterval  = time.Minute
	DefaultRetentionBatchSize = 500
)

// DefaultRetention returns a policy for a service that keeps a month of
// history: delivered records for 30 days, attempt details for 7, dead
// records until an operator removes them, a pass a minute in batches of 500.
func DefaultRetention() RetentionPolicy {
	return RetentionPolicy{
		Delivered:      30 * 24 * time.Hour,
		AttemptDetails: 7 * 24 * time.Hour,
		Interval:       DefaultRetentionInterval,
		BatchSize:      DefaultRetentionBatchSize,
	}
}

// Validate reports the first invalid field as a *ValidationError wrapping
// ErrInvalidConfig, or nil.
func (r RetentionPolicy) Validate() error {
	switch {
	case r.Delivered < 0:
		return invalid(ErrInvalidConfig, "Retention.Delivered", "must not be negative")
	case r.AttemptDetails < 0:
		return invalid(ErrInvalidConfig, "Retention.AttemptDetails", "must not be negative")
	case r.Dead < 0:
		return invalid(ErrInvalidConfig, "Retention.Dead", "must not be negative")
	case r.Dead > 0 && !r.RemoveDead:
		return invalid(ErrInvalidConfig, "Retention.Dead", "is set but RemoveDead is false: dead records are only removed when RemoveDead says so")
	case r.Interval < 0:
		return invalid(ErrInvalidConfig, "Retention.Interval", "must not be negative")
	case r.BatchSize < 0:
		return invalid(ErrInvalidConfig, "Retention.BatchSize", "must not be negative")
	}
	return nil
}

// withDefaults fills Interval and BatchSize.
func (r RetentionPolicy) withDefaults() RetentionPolicy {
	r.Interval = cmp.Or(r.Interval, DefaultRetentionInterval)
	r.BatchSize = cmp.Or(r.BatchSize, DefaultRetentionBatchSize)
	return r
}

// HistoryCount is what a cleaner did (or, in a dry run, would do) to one
// destination's records in one state.
type HistoryCount struct {
	DestinationID string
	State         State
	// Removed counts records removed with their attempts.
	Removed int64
	// Compacted counts records whose attempts were compacted into a
	// summary.
	Compacted int64
}

// CleanHistoryResult is the result of HistoryCleaner.CleanHistory.
type CleanHistoryResult struct {
	// Counts has one entry per destination and state with something to
	// report, ordered by CompareHistoryCounts.
	Counts []HistoryCount
	// More reports that the call stopped at its Limit: more may be
	// removable or compactable now.
	More bool
}

// CompareHistoryCounts orders HistoryCounts by DestinationID, then State.
func CompareHistoryCounts(a, b HistoryCount) int {
	if c := strings.Compare(a.DestinationID, b.DestinationID); c != 0 {
		return c
	}
	return cmp.Compare(a.State, b.State)
}

// AttemptSummary is what remains of a delivered record's attempts after
// compaction.
type AttemptSummary struct {
	// Count is the number of attempts compacted; zero when none was.
	Count          int
	FirstStartedAt time.Time
	LastFinishedAt time.Time
	LastStatusCode int
	LastOutcome    Outcome
	LastReason     string
}

// MaxRetrySpan is the longest time the policy's own schedule can spread
// one delivery's attempts over: MaxAttempts−1 delays, each at most MaxDelay
// (a recipient's Retry-After included), and never more than the delivery
// window MaxAge when one is set. A recipient that deduplicates by
// webhook-id must keep its idempotency records at least this long after
// the first request, plus a margin for what the schedule does not bound:
// a backlog or a paused destination delays every attempt, and an operator's
// redrive sends the same ID again, any time later. The recipient kit's
// Config.Retention is where that goes.
func (p Policy) MaxRetrySpan() time.Duration {
	gaps := max(p.MaxAttempts-1, 0)
	span := time.Duration(gaps) * p.MaxDelay
	if p.MaxDelay > 0 && span/p.MaxDelay != time.Duration(gaps) {
		span = time.Duration(1<<63 - 1) // overflow: as long as a duration gets
	}
	if p.MaxAge > 0 && p.MaxAge < span {
		span = p.MaxAge
	}
	return span
}
