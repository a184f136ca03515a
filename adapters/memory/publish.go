package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hookrelay/hookrelay"
)

var _ hookrelay.DestinationFinder = (*Destinations)(nil)

// DestinationsFor implements hookrelay.DestinationFinder; it scans every
// destination. A cancelled ctx is refused, as the SQL store refuses it,
// so that a Publish reaching no destination fails here as there.
func (s *Destinations) DestinationsFor(ctx context.Context, p hookrelay.DestinationsForParams) ([]hookrelay.Destination, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("hookrelay/memory: destinations for: %w", err)
	}
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
