package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/errtext"
)

var (
	_ hookrelay.DeadLetterLedger   = (*Store)(nil)
	_ hookrelay.RedriveAuditLog    = (*Store)(nil)
	_ hookrelay.DestinationPauser  = (*Destinations)(nil)
	_ hookrelay.RedriveAuditLister = (*Store)(nil)
)

// ListDead implements hookrelay.DeadLetterLedger. It scans every record
// under the store's lock, which is fine at in-memory sizes.
func (s *Store) ListDead(ctx context.Context, p hookrelay.ListDeadParams) (hookrelay.ListDeadPage, error) {
	if err := ctx.Err(); err != nil {
		return hookrelay.ListDeadPage{}, fmt.Errorf("hookrelay/memory: list dead: %w", err)
	}
	limit := max(p.Limit, 1)
	s.mu.Lock()
	var out []hookrelay.Delivery
	for _, r := range s.records {
		if p.Filter.Matches(r.d) && (p.After == nil || p.After.After(r.d)) {
			out = append(out, r.d)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b hookrelay.Delivery) int {
		return cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), strings.Compare(a.ID, b.ID))
	})
	var page hookrelay.ListDeadPage
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		page.Next = &hookrelay.DeadLetterCursor{DeadAt: last.UpdatedAt, ID: last.ID}
	}
	for _, d := range out {
		page.Deliveries = append(page.Deliveries, cloneDelivery(d))
	}
	return page, nil
}

// PlanRedrive implements hookrelay.DeadLetterLedger.
func (s *Store) PlanRedrive(ctx context.Context, f hookrelay.DeadLetterFilter) ([]hookrelay.PlanRow, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("hookrelay/memory: plan redrive: %w", err)
	}
	type key struct{ tenant, dest, reason string }
	counts := map[key]int64{}
	s.mu.Lock()
	for _, r := range s.records {
		if f.Matches(r.d) {
			counts[key{r.d.TenantID, r.d.DestinationID, r.d.LastReason}]++
		}
	}
	s.mu.Unlock()
	out := make([]hookrelay.PlanRow, 0, len(counts))
	for k, n := range counts {
		out = append(out, hookrelay.PlanRow{TenantID: k.tenant, DestinationID: k.dest, Reason: k.reason, Count: n})
	}
	slices.SortFunc(out, func(a, b hookrelay.PlanRow) int {
		return cmp.Or(strings.Compare(a.TenantID, b.TenantID), strings.Compare(a.DestinationID, b.DestinationID), strings.Compare(a.Reason, b.Reason))
	})
	return out, nil
}

// RedriveDelivery implements hookrelay.DeadLetterLedger: a compare-and-set
// from dead to pending under the store's lock.
func (s *Store) RedriveDelivery(ctx context.Context, p hookrelay.RedriveDeliveryParams) (hookrelay.Delivery, bool, error) {
	if err := ctx.Err(); err != nil {
		return hookrelay.Delivery{}, false, fmt.Errorf("hookrelay/memory: redrive delivery: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[p.ID]
	if !ok {
		return hookrelay.Delivery{}, false, hookrelay.ErrNotFound
	}
	if r.d.State != hookrelay.StateDead {
		s.countRedrive(p, false)
		return cloneDelivery(r.d), false, nil
	}
	next := r.d.Attempt
	if n := len(r.attempts); n > 0 {
		next = max(next, r.attempts[n-1].Number+1)
	}
	r.d.State = hookrelay.StatePending
	r.d.Attempt, r.d.BudgetStart = next, next
	r.d.WindowStart, r.d.NextAttemptAt, r.d.UpdatedAt = p.Now, p.Now, p.Now
	// A holder that dead-lettered it but never finished its queue
	// transition must not touch the redriven record: a new token fences it.
	s.lastToken++
	r.lease = hookrelay.Lease{Token: s.lastToken}
	r.leased = false
	s.pushReady(r)
	s.countRedrive(p, true)
	return cloneDelivery(r.d), true, nil
}

// countRedrive adds a RedriveDelivery's outcome to the audit entry it
// names, if the store holds one, under the same lock as the move.
func (s *Store) countRedrive(p hookrelay.RedriveDeliveryParams, moved bool) {
	a, ok := s.audits[p.AuditID]
	if !ok {
		return
	}
	u := hookrelay.RedriveAuditUpdate{ID: p.AuditID, Now: p.Now, LastDeliveryID: p.ID, AddSkipped: 1}
	if moved {
		u.AddRedriven, u.AddSkipped = 1, 0
	}
	u.Apply(a)
}

func cloneAudit(a hookrelay.RedriveAudit) hookrelay.RedriveAudit {
	a.Tenants = slices.Clone(a.Tenants)
	f := &a.Filter
	f.TenantIDs, f.DestinationIDs = slices.Clone(f.TenantIDs), slices.Clone(f.DestinationIDs)
	f.EventTypes, f.Reasons = slices.Clone(f.EventTypes), slices.Clone(f.Reasons)
	return a
}

// storableAudit is a with its free text as the SQL store keeps it
// (hookrelay.StorableText).
func storableAudit(a *hookrelay.RedriveAudit) {
	for _, f := range []*string{&a.Actor, &a.Reason, &a.StopRequestedBy, &a.ResumedBy, &a.Error} {
		*f = hookrelay.StorableText(*f)
	}
}

// CreateRedriveAudit implements hookrelay.RedriveAuditLog.
func (s *Store) CreateRedriveAudit(ctx context.Context, a hookrelay.RedriveAudit) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("hookrelay/memory: create redrive audit: %w", err)
	}
	if a.ID == "" {
		return fmt.Errorf("hookrelay/memory: redrive audit ID must not be empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.audits == nil {
		s.audits = map[string]*hookrelay.RedriveAudit{}
	}
	if _, ok := s.audits[a.ID]; ok {
		return fmt.Errorf("hookrelay/memory: redrive audit %s already exists", errtext.Quote(a.ID))
	}
	a = cloneAudit(a)
	storableAudit(&a)
	s.audits[a.ID] = &a
	return nil
}

// RedriveAudit implements hookrelay.RedriveAuditLog.
func (s *Store) RedriveAudit(ctx context.Context, id string) (hookrelay.RedriveAudit, error) {
	if err := ctx.Err(); err != nil {
		return hookrelay.RedriveAudit{}, fmt.Errorf("hookrelay/memory: redrive audit: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.audits[id]
	if !ok {
		return hookrelay.RedriveAudit{}, fmt.Errorf("%w: %s", hookrelay.ErrRedriveNotFound, errtext.Quote(id))
	}
	return cloneAudit(*a), nil
}

// UpdateRedriveAudit implements hookrelay.RedriveAuditLog.
func (s *Store) UpdateRedriveAudit(ctx context.Context, u hookrelay.RedriveAuditUpdate) (hookrelay.RedriveAudit, error) {
	if err := ctx.Err(); err != nil {
		return hookrelay.RedriveAudit{}, fmt.Errorf("hookrelay/memory: update redrive audit: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.audits[u.ID]
	if !ok {
		return hookrelay.RedriveAudit{}, fmt.Errorf("%w: %s", hookrelay.ErrRedriveNotFound, errtext.Quote(u.ID))
	}
	u.Apply(a)
	storableAudit(a)
	return cloneAudit(*a), nil
}

// ListRedriveAudits implements hookrelay.RedriveAuditLister.
func (s *Store) ListRedriveAudits(_ context.Context, p hookrelay.ListRedriveAuditsParams) ([]hookrelay.RedriveAudit, error) {
	s.mu.Lock()
	out := make([]hookrelay.RedriveAudit, 0, len(s.audits))
	for _, a := range s.audits {
		out = append(out, cloneAudit(*a))
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b hookrelay.RedriveAudit) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID))
	})
	return out[:min(len(out), max(p.Limit, 1))], nil
}
