package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/errtext"
)

// Destinations is an in-memory hookrelay.Destinations. It is safe for
// concurrent use; every read returns a copy, so a caller cannot change a
// stored destination by accident.
type Destinations struct {
	mu     sync.RWMutex
	m      map[string]hookrelay.Destination
	guards hookrelay.GuardMap
}

var (
	_ hookrelay.Destinations       = (*Destinations)(nil)
	_ hookrelay.DestinationEnabler = (*Destinations)(nil)
	_ hookrelay.DestinationLister  = (*Destinations)(nil)
	_ hookrelay.DestinationGuard   = (*Destinations)(nil)

	_ hookrelay.DestinationBatchReader = (*Destinations)(nil)
)

// NewDestinations returns a set holding ds. It panics on an empty ID, which
// is a programming error in test setup.
func NewDestinations(ds ...hookrelay.Destination) *Destinations {
	s := &Destinations{m: map[string]hookrelay.Destination{}}
	for _, d := range ds {
		if err := s.Put(context.Background(), d); err != nil {
			panic(err)
		}
	}
	return s
}

func cloneDestination(d hookrelay.Destination) hookrelay.Destination {
	d.Secrets = slices.Clone(d.Secrets)
	d.Headers = maps.Clone(d.Headers)
	d.EventTypes = slices.Clone(d.EventTypes)
	if d.Policy != nil {
		p := *d.Policy
		d.Policy = &p
	}
	return d
}

// Put adds or replaces a destination; the next attempt to it sees the change.
// An ID or TenantID the SQL store cannot hold (an empty ID; over 255 bytes,
// not UTF-8 or with a NUL byte), a malformed EventTypes pattern
// (hookrelay.ValidateEventTypes), and a bad rate limit, a header the
// sender never sends, or a URL, secret or header that is not UTF-8 or
// holds a NUL byte (hookrelay.Destination.ValidateLimits) are refused
// with a *hookrelay.ValidationError naming the field.
func (s *Destinations) Put(ctx context.Context, d hookrelay.Destination) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("hookrelay/memory: put: %w", err)
	}
	if err := checkDestinationString("ID", d.ID, true); err != nil {
		return fmt.Errorf("hookrelay/memory: put destination: %w", err)
	}
	if err := checkDestinationString("TenantID", d.TenantID, false); err != nil {
		return fmt.Errorf("hookrelay/memory: put destination %s: %w", errtext.Quote(d.ID), err)
	}
	if err := hookrelay.ValidateEventTypes(d.EventTypes); err != nil {
		return fmt.Errorf("hookrelay/memory: destination %s: %w", errtext.Quote(d.ID), err)
	}
	if d.Policy != nil {
		if err := d.Policy.Validate(); err != nil {
			return fmt.Errorf("hookrelay/memory: destination %s: %w", errtext.Quote(d.ID), err)
		}
	}
	if err := d.ValidateLimits(); err != nil {
		return fmt.Errorf("hookrelay/memory: destination %s: %w", errtext.Quote(d.ID), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d.DisabledReason = hookrelay.StorableText(d.DisabledReason)
	s.m[d.ID] = cloneDestination(d)
	return nil
}

// checkDestinationString refuses an ID or tenant the SQL store cannot
// hold (empty when required, over 255 bytes, not UTF-8, a NUL byte), so a
// destination the fake stores is one production stores too.
func checkDestinationString(field, v string, required bool) error {
	problem := ""
	switch {
	case required && v == "":
		problem = "must not be empty"
	case len(v) > hookrelay.MaxStoredStringBytes:
		problem = fmt.Sprintf("is %d bytes, over the %d-byte limit", len(v), hookrelay.MaxStoredStringBytes)
	case !utf8.ValidString(v):
		problem = "is not valid UTF-8"
	case strings.IndexByte(v, 0) >= 0:
		problem = "contains a NUL byte"
	default:
		return nil
	}
	return &hookrelay.ValidationError{Err: hookrelay.ErrInvalidDestination, Field: field, Problem: problem}
}

// Destination implements hookrelay.Destinations.
func (s *Destinations) Destination(ctx context.Context, id string) (hookrelay.Destination, error) {
	if err := ctx.Err(); err != nil {
		return hookrelay.Destination{}, fmt.Errorf("hookrelay/memory: destination: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.m[id]
	if !ok {
		return hookrelay.Destination{}, fmt.Errorf("%w: %s", hookrelay.ErrDestinationNotFound, errtext.Quote(id))
	}
	return cloneDestination(d), nil
}

// DestinationsByID implements hookrelay.DestinationBatchReader.
func (s *Destinations) DestinationsByID(ctx context.Context, ids []string) ([]hookrelay.Destination, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("hookrelay/memory: destinations by ID: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []hookrelay.Destination{}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if d, ok := s.m[id]; ok && !seen[id] {
			seen[id] = true
			out = append(out, cloneDestination(d))
		}
	}
	return out, nil
}

// Disable implements hookrelay.Destinations.
func (s *Destinations) Disable(ctx context.Context, p hookrelay.DisableParams) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("hookrelay/memory: disable: %w", err)
	}
	return s.update(p.ID, func(d *hookrelay.Destination) {
		if !d.Disabled {
			d.Disabled, d.DisabledReason = true, hookrelay.StorableText(p.Reason)
		}
	})
}

// SetPaused pauses or resumes a destination. A paused destination's
// deliveries are not sent and spend no attempts.
func (s *Destinations) SetPaused(ctx context.Context, id string, paused bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("hookrelay/memory: set paused: %w", err)
	}
	return s.update(id, func(d *hookrelay.Destination) { d.Paused = paused })
}

// Enable implements hookrelay.DestinationEnabler: it clears Disabled and
// DisabledReason.
func (s *Destinations) Enable(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("hookrelay/memory: enable: %w", err)
	}
	return s.update(id, func(d *hookrelay.Destination) { d.Disabled, d.DisabledReason = false, "" })
}

// ListDestinations implements hookrelay.DestinationLister.
func (s *Destinations) ListDestinations(ctx context.Context) ([]hookrelay.DestinationStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("hookrelay/memory: list destinations: %w", err)
	}
	s.mu.RLock()
	out := make([]hookrelay.DestinationStatus, 0, len(s.m))
	for _, d := range s.m {
		out = append(out, d.Status())
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b hookrelay.DestinationStatus) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (s *Destinations) update(id string, f func(*hookrelay.Destination)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.m[id]
	if !ok {
		return fmt.Errorf("%w: %s", hookrelay.ErrDestinationNotFound, errtext.Quote(id))
	}
	f(&d)
	s.m[id] = d
	return nil
}

// UpdateGuard implements hookrelay.DestinationGuard: the states are kept
// in a hookrelay.GuardMap, so concurrent workers sharing the set see one.
func (s *Destinations) UpdateGuard(ctx context.Context, p hookrelay.UpdateGuardParams) (hookrelay.GuardState, error) {
	g, err := s.guards.UpdateGuard(ctx, p)
	if err != nil {
		return g, fmt.Errorf("hookrelay/memory: update guard: %w", err)
	}
	return g, nil
}

// GuardStates implements hookrelay.DestinationGuard.
func (s *Destinations) GuardStates(ctx context.Context, p hookrelay.GuardStatesParams) ([]hookrelay.GuardState, error) {
	gs, err := s.guards.GuardStates(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("hookrelay/memory: guard states: %w", err)
	}
	return gs, nil
}
