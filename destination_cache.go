package hookrelay

import (
	"context"
	"sync"
	"time"
)

// destinationCache keeps what Destinations said about a destination for
// Config.DestinationCacheTTL, so a busy worker does not read the same
// destination for every delivery (a round trip each on a SQL store). It is
// part of the worker's state.
type destinationCache struct {
	mu      sync.Mutex
	entries map[string]cachedDestination
}

type cachedDestination struct {
	d     Destination
	until time.Time
}

// destinationCacheSweep is the size past which an insert first drops the
// expired entries, so the cache holds about the destinations in use.
const destinationCacheSweep = 1024

func (dc *destinationCache) get(id string, now time.Time) (Destination, bool) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	e, ok := dc.entries[id]
	if !ok || !now.Before(e.until) {
		return Destination{}, false
	}
	return e.d, true
}

func (dc *destinationCache) put(d Destination, until time.Time, now time.Time) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	if len(dc.entries) >= destinationCacheSweep {
		for id, e := range dc.entries {
			if !now.Before(e.until) {
				delete(dc.entries, id)
			}
		}
	}
	dc.entries[d.ID] = cachedDestination{d: d, until: until}
}

// forget drops a destination, after this process changed it (paused,
// resumed, disabled): its next delivery reads it again.
func (dc *destinationCache) forget(id string) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	delete(dc.entries, id)
}

// destination returns the destination of a delivery about to be sent; for
// the worker's own attempts (cached), from the cache while it is fresh.
// Process called directly always reads it.
func (c *Client) destination(ctx context.Context, id string, cached bool) (Destination, error) {
	if !cached || c.cfg.DestinationCacheTTL <= 0 {
		return c.destinations.Destination(ctx, id)
	}
	now := c.clock.Now()
	if d, ok := c.worker.dests.get(id, now); ok {
		return d, nil
	}
	d, err := c.destinations.Destination(ctx, id)
	if err == nil {
		c.worker.dests.put(d, now.Add(c.cfg.DestinationCacheTTL), now)
	}
	return d, err
}
