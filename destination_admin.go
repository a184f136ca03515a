package hookrelay

import (
	"context"
	"fmt"
	"time"
)

// PauseDestination pauses a destination: its deliveries are no longer
// claimed or sent and spend no attempts; everything else keeps flowing.
// This process stops claiming them at once; other workers sharing the store
// see the pause at their next send-time lookup. Attempts already in flight
// finish. It returns ErrUnsupported when Destinations is not a
// DestinationPauser.
func (c *Client) PauseDestination(ctx context.Context, id string) error {
	return c.setPaused(ctx, id, true)
}

// ResumeDestination resumes a paused destination; its waiting deliveries
// are picked up by this process at once and by other workers within their
// PausedRecheck.
func (c *Client) ResumeDestination(ctx context.Context, id string) error {
	return c.setPaused(ctx, id, false)
}

// EnableDestination re-enables a disabled destination (see
// DestinationEnabler): its waiting deliveries are picked up by this process
// at once and by other workers within their PausedRecheck. It does not
// resume a paused destination. It returns ErrUnsupported when Destinations
// is not a DestinationEnabler.
func (c *Client) EnableDestination(ctx context.Context, id string) error {
	de, ok := As[DestinationEnabler](c.destinations)
	if !ok {
		return fmt.Errorf("enable destination: %w (Destinations is not a DestinationEnabler)", ErrUnsupported)
	}
	if err := de.Enable(ctx, id); err != nil {
		return fmt.Errorf("hookrelay: enable destination %s: %w", quote(id), shortNotFound(err))
	}
	w := &c.worker
	w.notePaused(id, false, time.Time{})
	w.wakeUp()
	c.observe(ctx, Event{Name: EventDestinationEnabled, Delivery: Delivery{DestinationID: id}})
	return nil
}

// ClearDestinationGuard lifts what a destination's guard holds it by, for
// an operator who has had its recipient fixed: a Retry-After hold, a
// rate-limit hold, and an open or half-open circuit, which it closes
// (no failures in a row, no probe outstanding). It keeps the rate-limit
// bucket, so the next sends still keep to the destination's MaxPerSecond,
// and the start of the failing run (GuardState.FailingSince): a
// destination that goes on failing is still disabled once it has failed
// for Config.DisableAfterFailingFor. It does not resume a paused or
// re-enable a disabled destination, nor bring forward a delivery's own
// retry (an attempt answered 429 with Retry-After is retried when its
// policy said).
//
// This process's worker picks the destination's waiting deliveries up at
// once; other workers sharing the store at their next look, within their
// PausedRecheck (a hold or an open circuit makes a worker wait no longer
// than that before it looks at the store again). When Destinations is not
// a DestinationGuard the guard is this process's own, and so is the clear.
// An unknown ID wraps ErrDestinationNotFound.
func (c *Client) ClearDestinationGuard(ctx context.Context, id string) error {
	if _, err := c.destinations.Destination(ctx, id); err != nil {
		return fmt.Errorf("hookrelay: clear destination %s guard: %w", quote(id), shortNotFound(err))
	}
	now := c.clock.Now()
	var was GuardState
	ordered := c.worker.guards.inOrder(id)
	g, err := c.guard.UpdateGuard(ctx, UpdateGuardParams{DestinationID: id, Update: func(g GuardState) GuardState {
		was = g
		return clearGuard(g)
	}})
	if err == nil {
		c.worker.guards.put(g, now, c.cfg.DestinationCacheTTL)
	}
	ordered.Unlock()
	if err != nil {
		return fmt.Errorf("hookrelay: clear destination %s guard: %w", quote(id), err)
	}
	w := &c.worker
	w.unblock(id)
	w.wakeUp()
	c.observe(ctx, Event{Name: EventDestinationGuardCleared, Delivery: Delivery{DestinationID: id},
		At: was.ClaimableAt(), Count: int64(was.ConsecutiveFailures)})
	return nil
}

// clearGuard is g with its holds lifted and its circuit closed; the
// bucket and the failing run are kept (see ClearDestinationGuard).
func clearGuard(g GuardState) GuardState {
	g.HeldUntil, g.LimitedUntil = time.Time{}, time.Time{}
	g.ConsecutiveFailures = 0
	g.Circuit, g.Probe, g.OpenUntil = CircuitClosed, "", time.Time{}
	return g
}

// Destinations is the port that resolves a destination ID at send time.
// Implementations must be safe for concurrent use.
type Destinations interface {
	// Destination returns the destination with the given ID, or an error
	// wrapping ErrDestinationNotFound.
	Destination(ctx context.Context, id string) (Destination, error)
	// Disable marks a destination disabled (the recipient said it is gone).
	// Disabling a disabled destination is a no-op.
	Disable(ctx context.Context, params DisableParams) error
}

// DestinationStatus is what an operator may see of a destination: its ID,
// tenant and switches. It holds no URL, secret or header by construction,
// so a page or a listing built from it cannot leak them.
type DestinationStatus struct {
	ID             string
	TenantID       string
	Paused         bool
	Disabled       bool
	DisabledReason string
}

func (c *Client) setPaused(ctx context.Context, id string, paused bool) error {
	dp, ok := As[DestinationPauser](c.destinations)
	if !ok {
		return fmt.Errorf("pause destination: %w (Destinations is not a DestinationPauser)", ErrUnsupported)
	}
	if err := dp.SetPaused(ctx, id, paused); err != nil {
		return fmt.Errorf("hookrelay: set destination %s paused=%t: %w", quote(id), paused, shortNotFound(err))
	}
	w := &c.worker
	w.dests.forget(id)
	w.notePaused(id, paused, c.clock.Now().Add(c.cfg.PausedRecheck))
	kind := EventDestinationPaused
	if !paused {
		kind = EventDestinationResumed
		w.wakeUp()
	}
	c.observe(ctx, Event{Name: kind, Delivery: Delivery{DestinationID: id}})
	return nil
}
