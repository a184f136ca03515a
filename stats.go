package hookrelay

import (
	"cmp"
	"context"
	"slices"
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
	// UpdatedAt); zero when none is dead, and never negative: zero too when
	// that time is after Now (a clock ahead of the caller's).
	OldestDeadAge time.Duration
	// Circuit, ConsecutiveFailures, HeldUntil, RateLimitedUntil and
	// FailingSince are the destination's guard state (GuardState), filled
	// by a store that keeps it (the SQL store), or by StatsWithGuard.
	// Circuit is empty when the store says nothing; the times are zero
	// unless they are after Now (FailingSince: unless a run is failing).
	Circuit             CircuitState
	ConsecutiveFailures int
	HeldUntil           time.Time
	RateLimitedUntil    time.Time
	FailingSince        time.Time
}

// MergeGuardStates fills stats' guard fields from gs, and adds a row for
// each destination with a guard state worth seeing (a failing run, a
// circuit not closed, a hold or a rate limit after now) that stats lacks.
// The result is ordered by DestinationID. Stores that keep both call it
// from Stats.
func MergeGuardStates(stats []DestinationStats, gs []GuardState, now time.Time) []DestinationStats {
	at := make(map[string]int, len(stats))
	for i, st := range stats {
		at[st.DestinationID] = i
	}
	for _, g := range gs {
		i, ok := at[g.DestinationID]
		if !ok {
			if !g.IsOpen() && g.ConsecutiveFailures == 0 && !g.HeldUntil.After(now) && !g.LimitedUntil.After(now) && g.FailingSince.IsZero() {
				continue
			}
			stats = append(stats, DestinationStats{DestinationID: g.DestinationID})
			i = len(stats) - 1
		}
		st := &stats[i]
		st.Circuit = g.Circuit
		if st.Circuit == "" {
			st.Circuit = CircuitClosed
		}
		st.ConsecutiveFailures, st.FailingSince = g.ConsecutiveFailures, g.FailingSince
		if g.HeldUntil.After(now) {
			st.HeldUntil = g.HeldUntil
		}
		if g.LimitedUntil.After(now) {
			st.RateLimitedUntil = g.LimitedUntil
		}
	}
	slices.SortFunc(stats, func(a, b DestinationStats) int { return strings.Compare(a.DestinationID, b.DestinationID) })
	return stats
}

// StatsWithGuard returns a LedgerStats that adds guard's states to what
// stats reports (MergeGuardStates): for a Ledger and a Destinations store
// that are separate values, as the memory adapter's are.
func StatsWithGuard(stats LedgerStats, guard DestinationGuard) LedgerStats {
	return guardedStats{stats: stats, guard: guard}
}

type guardedStats struct {
	stats LedgerStats
	guard DestinationGuard
}

func (g guardedStats) Stats(ctx context.Context, p StatsParams) ([]DestinationStats, error) {
	st, err := g.stats.Stats(ctx, p)
	if err != nil {
		return nil, err
	}
	gs, err := g.guard.GuardStates(ctx, GuardStatesParams{})
	if err != nil {
		return nil, err
	}
	return MergeGuardStates(st, gs, p.Now), nil
}

// OutcomeCount counts the attempts to one destination that finished in a
// time window with one result kind and reason.
type OutcomeCount struct {
	DestinationID string
	Kind          Kind
	Reason        string
	Count         int64
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
