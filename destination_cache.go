package hookrelay

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// destinationCache keeps what Destinations said about a destination for
// Config.DestinationCacheTTL, so a busy worker does not read the same
// destination for every delivery (a round trip each on a SQL store). It is
// part of the worker's state. A destination missing from it is read once
// however many attempts want it at that moment: the others wait for that
// read (reads), instead of every attempt in flight to it reading it too
// each time its entry runs out.
type destinationCache struct {
	mu      sync.Mutex
	entries expiring[Destination]
	reads   singleflight.Group
}

func (dc *destinationCache) get(id string, now time.Time) (Destination, bool) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	return dc.entries.get(id, now)
}

func (dc *destinationCache) put(d Destination, until time.Time, now time.Time) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	dc.entries.put(d.ID, d, until, now)
}

// forget drops a destination, after this process changed it (paused,
// resumed, disabled): its next delivery reads it again.
func (dc *destinationCache) forget(id string) {
	dc.mu.Lock()
	dc.entries.forget(id)
	dc.mu.Unlock()
	dc.reads.Forget(id) // a read already under way may predate the change
}

// destination returns the destination of a delivery about to be sent; for
// the worker's own attempts (cached), from the cache while it is fresh.
// Process called directly always reads it.
func (c *Client) destination(ctx context.Context, id string, cached bool) (Destination, error) {
	if !cached || c.cfg.DestinationCacheTTL <= 0 {
		return c.destinations.Destination(ctx, id)
	}
	dc := &c.worker.dests
	now := c.clock.Now()
	if d, ok := dc.get(id, now); ok {
		return d, nil
	}
	// The attempts sharing a read share the worker's context, so the one
	// that reads cancels with the others.
	v, err, _ := dc.reads.Do(id, func() (any, error) {
		if d, ok := dc.get(id, now); ok {
			return d, nil // put by a read that ended since this attempt looked
		}
		d, err := c.destinations.Destination(ctx, id)
		if err == nil {
			dc.put(d, now.Add(c.cfg.DestinationCacheTTL), now)
		}
		return d, err
	})
	if err != nil {
		return Destination{}, err
	}
	return v.(Destination), nil
}
