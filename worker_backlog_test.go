package hookrelay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// A destination with a backlog larger than its concurrency limit is
// delivered without the claim loop claiming its deliveries only to hand
// them back (a store write each, over and over while the backlog lasts),
// from a store that honours destination rooms in a claim and from a queue
// that does not (a broker, blindQueue).
func TestBacklogToOneDestinationIsNotReleasedPerDelivery(t *testing.T) {
	for _, blind := range []bool{false, true} {
		name := "room-claims"
		if blind {
			name = "blind-claims"
		}
		t.Run(name, func(t *testing.T) { testBacklogToOneDestination(t, blind) })
	}
}

func testBacklogToOneDestination(t *testing.T, blind bool) {
	const n = 300
	store := memory.NewStore()
	var queue hookrelay.Queue = store
	if blind {
		queue = &blindQueue{Queue: store}
	}
	dests := memory.NewDestinations(hookrelay.Destination{ID: "acct", URL: "https://example.com/hook"})
	var (
		mu                  sync.Mutex
		inflight, peak      int
		delivered, released int
	)
	done := make(chan struct{})
	c, err := hookrelay.New(hookrelay.Config{
		Queue: queue, Ledger: store, Destinations: dests, Clock: clock.NewMock(),
		Concurrency: 16, PerDestinationConcurrency: 4,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			mu.Lock()
			inflight++
			peak = max(peak, inflight)
			mu.Unlock()
			mu.Lock()
			inflight--
			mu.Unlock()
			return hookrelay.Delivered(204)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch e.Name {
			case hookrelay.EventReleased:
				released++
			case hookrelay.EventDelivered:
				if delivered++; delivered == n {
					close(done)
				}
			}
		}),
	})
	require.NoError(t, err)
	enqueueEvents(t, c, "acct", n)
	require.NoError(t, c.Start(context.Background()))
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a hang, not a speed check
		t.Fatal("backlog not delivered")
	}
	require.NoError(t, c.Stop(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	assert.LessOrEqual(t, peak, 4, "the per-destination limit holds")
	assert.Zero(t, released, "deliveries claimed only to be handed back")
}

// A worker whose Config leaves PerDestinationConcurrency unset lets one
// destination take a quarter of its Concurrency (here 40 / 4 = 10), at
// least DefaultPerDestinationConcurrency: a worker sized for 40 sends in
// flight is not held to 4 of them by a destination, and no destination
// takes more than a quarter of it.
func TestPerDestinationLimitDefaultsToAQuarterOfConcurrency(t *testing.T) {
	for _, tc := range []struct {
		concurrency, want int
	}{{40, 10}, {8, hookrelay.DefaultPerDestinationConcurrency}} {
		t.Run(fmt.Sprint(tc.concurrency), func(t *testing.T) {
			assert.Equal(t, tc.want, peakToOneDestination(t, tc.concurrency, tc.want))
		})
	}
}

// peakToOneDestination runs a worker with the given Concurrency and the
// default per-destination limit over a backlog to one destination whose
// sends block, waits until want are in flight, gives the worker time to
// start more if it would (a build that does has them in flight well within
// it; this one never can), then releases them all and returns the most
// that were in flight at once.
func peakToOneDestination(t *testing.T, concurrency, want int) int {
	t.Helper()
	store := memory.NewStore()
	dests := memory.NewDestinations(hookrelay.Destination{ID: "acct", URL: "https://example.com/hook"})
	var (
		mu             sync.Mutex
		inflight, peak int
		reachedOnce    sync.Once
	)
	reached, release := make(chan struct{}), make(chan struct{})
	c, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: dests, Concurrency: concurrency,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			mu.Lock()
			inflight++
			peak = max(peak, inflight)
			if inflight == want {
				// Once: after the release the worker goes on through the
				// backlog until Stop, and may have want in flight again.
				reachedOnce.Do(func() { close(reached) })
			}
			mu.Unlock()
			<-release
			mu.Lock()
			inflight--
			mu.Unlock()
			return hookrelay.Delivered(204)
		}),
	})
	require.NoError(t, err)
	enqueueEvents(t, c, "acct", 3*concurrency)
	require.NoError(t, c.Start(context.Background()))
	select {
	case <-reached:
	case <-time.After(30 * time.Second): // a hang, not a speed check
		close(release)
		require.NoError(t, c.Stop(context.Background()))
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("never %d sends in flight to one destination (peak %d)", want, peak)
	}
	time.Sleep(200 * time.Millisecond) // room to go past the limit; the assertion does not depend on it
	close(release)
	require.NoError(t, c.Stop(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	return peak
}
