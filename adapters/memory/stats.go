package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hookrelay/hookrelay"
)

var (
	_ hookrelay.LedgerStats  = (*Store)(nil)
	_ hookrelay.AttemptStats = (*Store)(nil)
)

// RecentOutcomes implements hookrelay.AttemptStats by scanning every
// record's attempts under the store's lock.
func (s *Store) RecentOutcomes(ctx context.Context, p hookrelay.RecentOutcomesParams) ([]hookrelay.OutcomeCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("hookrelay/memory: recent outcomes: %w", err)
	}
	type key struct {
		dest   string
		kind   hookrelay.Kind
		reason string
	}
	counts := map[key]int64{}
	s.mu.Lock()
	for _, r := range s.records {
		for _, a := range r.attempts {
			if !a.FinishedAt.Before(p.Since) {
				counts[key{r.d.DestinationID, a.Kind, a.Reason}]++
			}
		}
	}
	s.mu.Unlock()
	out := make([]hookrelay.OutcomeCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, hookrelay.OutcomeCount{DestinationID: k.dest, Kind: k.kind, Reason: k.reason, Count: n})
	}
	slices.SortFunc(out, hookrelay.CompareOutcomeCounts)
	return out, nil
}

// Stats implements hookrelay.LedgerStats: per destination, pending and dead
// counts, how many pending deliveries could run at params.Now (due and not
// under a live lease) and the ages of the oldest eligible and oldest dead
// delivery. Destinations with nothing pending or dead are omitted. It scans
// every record under the store's lock, which is fine at in-memory sizes.
func (s *Store) Stats(ctx context.Context, params hookrelay.StatsParams) ([]hookrelay.DestinationStats, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("hookrelay/memory: stats: %w", err)
	}
	now := params.Now
	s.mu.Lock()
	defer s.mu.Unlock()
	type oldest struct{ eligible, dead *record }
	byDest := map[string]*hookrelay.DestinationStats{}
	olds := map[string]*oldest{}
	for _, r := range s.records {
		if r.d.State != hookrelay.StatePending && r.d.State != hookrelay.StateDead {
			continue
		}
		id := r.d.DestinationID
		st, ok := byDest[id]
		if !ok {
			st = &hookrelay.DestinationStats{DestinationID: id}
			byDest[id] = st
			olds[id] = &oldest{}
		}
		o := olds[id]
		if r.d.State == hookrelay.StateDead {
			st.Dead++
			if o.dead == nil || r.d.UpdatedAt.Before(o.dead.d.UpdatedAt) {
				o.dead = r
			}
			continue
		}
		st.Pending++
		liveLease := r.leased && r.lease.ExpiresAt.After(now)
		if liveLease || r.d.NextAttemptAt.After(now) {
			continue
		}
		st.EligibleNow++
		if o.eligible == nil || r.d.NextAttemptAt.Before(o.eligible.d.NextAttemptAt) {
			o.eligible = r
		}
	}
	out := make([]hookrelay.DestinationStats, 0, len(byDest))
	for id, st := range byDest {
		o := olds[id]
		if o.eligible != nil {
			st.OldestEligibleAge = now.Sub(o.eligible.d.NextAttemptAt)
		}
		if o.dead != nil {
			st.OldestDeadAge = max(0, now.Sub(o.dead.d.UpdatedAt))
		}
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b hookrelay.DestinationStats) int {
		return strings.Compare(a.DestinationID, b.DestinationID)
	})
	return out, nil
}
