package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hookrelay/hookrelay"
)

var (
	_ hookrelay.HistoryCleaner      = (*Store)(nil)
	_ hookrelay.UnpublishedRecovery = (*Store)(nil)
)

// CleanHistory implements hookrelay.HistoryCleaner. Removed records leave
// the store's maps entirely, so a store that a cleaner runs on holds the
// history the policy keeps, not every delivery it ever saw. Each call
// scans the records under the store's lock.
func (s *Store) CleanHistory(ctx context.Context, p hookrelay.CleanHistoryParams) (hookrelay.CleanHistoryResult, error) {
	if err := ctx.Err(); err != nil {
		return hookrelay.CleanHistoryResult{}, fmt.Errorf("hookrelay/memory: clean history: %w", err)
	}
	if err := p.Policy.Validate(); err != nil {
		return hookrelay.CleanHistoryResult{}, fmt.Errorf("hookrelay/memory: clean history: %w", err)
	}
	if p.Limit <= 0 && !p.DryRun {
		return hookrelay.CleanHistoryResult{}, fmt.Errorf("hookrelay/memory: clean history: Limit must be positive")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var remove, compact []*record
	for _, r := range s.records {
		switch {
		case removable(r, p):
			remove = append(remove, r)
		case r.d.State == hookrelay.StateDelivered && len(r.attempts) > 0 && !r.d.UpdatedAt.After(p.Now.Add(-p.Policy.AttemptDetails)):
			compact = append(compact, r)
		}
	}
	oldestFirst := func(a, b *record) int {
		if c := a.d.UpdatedAt.Compare(b.d.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.d.ID, b.d.ID)
	}
	more := false
	if !p.DryRun {
		for _, rs := range []*[]*record{&remove, &compact} {
			if len(*rs) > p.Limit {
				slices.SortFunc(*rs, oldestFirst)
				*rs, more = (*rs)[:p.Limit], true
			}
		}
	}
	counts := map[hookrelay.HistoryCount]*hookrelay.HistoryCount{}
	count := func(r *record) *hookrelay.HistoryCount {
		k := hookrelay.HistoryCount{DestinationID: r.d.DestinationID, State: r.d.State}
		if c, ok := counts[k]; ok {
			return c
		}
		c := &k
		counts[k] = c
		return c
	}
	for _, r := range remove {
		count(r).Removed++
		if !p.DryRun {
			delete(s.records, r.d.ID)
		}
	}
	for _, r := range compact {
		count(r).Compacted++
		if !p.DryRun {
			r.summary = summarize(r.summary, r.attempts)
			r.attempts = nil
		}
	}
	out := hookrelay.CleanHistoryResult{More: more}
	for _, c := range counts {
		out.Counts = append(out.Counts, *c)
	}
	slices.SortFunc(out.Counts, hookrelay.CompareHistoryCounts)
	return out, nil
}

// removable reports whether the policy lets r go at p.Now.
func removable(r *record, p hookrelay.CleanHistoryParams) bool {
	switch r.d.State {
	case hookrelay.StateDelivered:
		return !r.d.UpdatedAt.After(p.Now.Add(-p.Policy.Delivered))
	case hookrelay.StateDead:
		return p.Policy.RemoveDead && !r.d.UpdatedAt.After(p.Now.Add(-p.Policy.Dead))
	}
	return false
}

// summarize folds attempts (in attempt order) into sum.
func summarize(sum hookrelay.AttemptSummary, attempts []hookrelay.Attempt) hookrelay.AttemptSummary {
	for _, a := range attempts {
		if sum.Count == 0 || a.StartedAt.Before(sum.FirstStartedAt) {
			sum.FirstStartedAt = a.StartedAt
		}
		sum.Count++
		sum.LastFinishedAt, sum.LastStatusCode, sum.LastOutcome, sum.LastReason = a.FinishedAt, a.StatusCode, a.Outcome, a.Reason
	}
	return sum
}

// AttemptSummary implements hookrelay.HistoryCleaner.
func (s *Store) AttemptSummary(ctx context.Context, id string) (hookrelay.AttemptSummary, error) {
	if err := ctx.Err(); err != nil {
		return hookrelay.AttemptSummary{}, fmt.Errorf("hookrelay/memory: attempt summary: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		return hookrelay.AttemptSummary{}, hookrelay.ErrNotFound
	}
	return r.summary, nil
}

// TakeUnpublished implements hookrelay.UnpublishedRecovery.
func (s *Store) TakeUnpublished(ctx context.Context, p hookrelay.RecoverUnpublishedParams) ([]hookrelay.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("hookrelay/memory: take unpublished: %w", err)
	}
	if p.Limit <= 0 || p.Grace < 0 {
		return nil, fmt.Errorf("hookrelay/memory: take unpublished: Limit must be positive and Grace not negative")
	}
	cutoff := p.Now.Add(-p.Grace)
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []*record
	for _, r := range s.records {
		if r.d.State == hookrelay.StatePending && !r.d.NextAttemptAt.After(cutoff) &&
			!(r.leased && r.lease.ExpiresAt.After(p.Now)) && !r.touched.After(cutoff) &&
			!slices.Contains(p.SkipDestinations, r.d.DestinationID) {
			found = append(found, r)
		}
	}
	slices.SortFunc(found, func(a, b *record) int {
		if c := a.d.NextAttemptAt.Compare(b.d.NextAttemptAt); c != 0 {
			return c
		}
		return strings.Compare(a.d.ID, b.d.ID)
	})
	found = found[:min(len(found), p.Limit)]
	out := make([]hookrelay.Delivery, len(found))
	for i, r := range found {
		r.touched = p.Now
		out[i] = cloneDelivery(r.d)
	}
	return out, nil
}
