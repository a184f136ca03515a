package hookrelay

import (
	"cmp"
	"context"
	"strings"
	"time"
)

// DestinationStats is the state of one destination's deliveries at a moment.
// A stable total can hide one destination that stopped making progress; the
// ages are what show it.
type DestinationStats struct {
	DestinationID string
	// Pending counts pending deliveries, due or not, claimed or not.
	Pending int64
	// EligibleNow counts pending deliveries due at Now and not under a live
	// lease: work that could run this instant.
	EligibleNow int64
	// OldestEligibleAge is Now minus the earliest NextAttemptAt among the
	// eligible deliveries; zero when none is eligible.
	OldestEligibleAge time.Duration
	// Dead counts dead-lettered deliveries.
	Dead int64
	// OldestDeadAge is Now minus the earliest dead-letter time (the record's
	// UpdatedAt); zero when none is dead.
	OldestDeadAge time.Duration
}

// StatsParams are the inputs of LedgerStats.Stats.
type StatsParams struct {
	Now time.Time
}

// LedgerStats is an optional ability of a Ledger (the memory and SQL
// ledgers have it; found with As, through wrappers that Unwrap): per-destination counts and ages for dashboards, alerts
// and the CLI's stats command. Destinations with no pending or dead
// deliveries may be omitted. Results are ordered by DestinationID.
type LedgerStats interface {
	Stats(ctx context.Context, params StatsParams) ([]DestinationStats, error)
}

// OutcomeCount counts the attempts to one destination that finished in a
// time window with one result kind and reason.
type OutcomeCount struct {
	DestinationID string
	Kind          Kind
	Reason        string
	Count         int64
}

// RecentOutcomesParams are the inputs of AttemptStats.RecentOutcomes.
type RecentOutcomesParams struct {
	// Since selects attempts that finished at or after it.
	Since time.Time
}

// AttemptStats is an optional ability of a Ledger (the memory and SQL
// ledgers have it): how recent attempts ended, per destination, for
// dashboards such as the operator console's overview. It counts the
// attempt history the ledger keeps, so it agrees with each delivery's
// attempts. Results are ordered by DestinationID, then Kind, then Reason.
type AttemptStats interface {
	RecentOutcomes(ctx context.Context, params RecentOutcomesParams) ([]OutcomeCount, error)
}

// CompareOutcomeCounts orders OutcomeCounts as AttemptStats returns them.
func CompareOutcomeCounts(a, b OutcomeCount) int {
	if c := strings.Compare(a.DestinationID, b.DestinationID); c != 0 {
		return c
	}
	if a.Kind != b.Kind {
		return cmp.Compare(a.Kind, b.Kind)
	}
	return strings.Compare(a.Reason, b.Reason)
}
