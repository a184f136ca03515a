package memory

import (
	"context"
	"slices"
	"strings"

	"github.com/hookrelay/hookrelay"
)

var _ hookrelay.DestinationFinder = (*Destinations)(nil)

// DestinationsFor implements hookrelay.DestinationFinder; it scans every
// destination.
func (s *Destinations) DestinationsFor(_ context.Context, p hookrelay.DestinationsForParams) ([]hookrelay.Destination, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []hookrelay.Destination{}
	for _, d := range s.m {
		if (p.TenantID == "" || d.TenantID == p.TenantID) && (p.EventType == "" || d.SubscribesTo(p.EventType)) {
			out = append(out, cloneDestination(d))
		}
	}
	slices.SortFunc(out, func(a, b hookrelay.Destination) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
