package hookrelay_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// A destination's own MaxConcurrency holds from the first delivery a
// worker makes to it, and holds again at once when it is lowered. The
// worker learns the limit only when an attempt looks the destination up,
// so it starts as many as PerDestinationConcurrency first; those over the
// limit wait for the destination's free slots without sending, spending
// an attempt, or taking a slot another destination could use.
func TestOwnConcurrencyLimitHoldsFromTheFirstDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		store := memory.NewStore()
		dests := memory.NewDestinations(
			hookrelay.Destination{ID: "narrow", URL: "https://example.com/hook", MaxConcurrency: 1},
			hookrelay.Destination{ID: "wide", URL: "https://example.com/hook"},
		)
		var mu sync.Mutex
		sending, peak, delivered := map[string]int{}, map[string]int{}, map[string]int{}
		gate := make(chan struct{})
		c, err := hookrelay.New(hookrelay.Config{
			Queue: store, Ledger: store, Destinations: dests,
			Concurrency: 8, PerDestinationConcurrency: 4,
			Sender: hookrelay.SenderFunc(func(_ context.Context, p hookrelay.SendParams) hookrelay.Result {
				id := p.Delivery.DestinationID
				mu.Lock()
				sending[id]++
				peak[id] = max(peak[id], sending[id])
				mu.Unlock()
				<-gate
				mu.Lock()
				sending[id]--
				delivered[id]++
				mu.Unlock()
				return hookrelay.Delivered(204)
			}),
		})
		require.NoError(t, err)
		enqueueN(t, c, "narrow", "a_narrow", n)
		enqueueN(t, c, "wide", "a_wide", n)
		require.NoError(t, c.Start(context.Background()))
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, 1, sending["narrow"], "sends to narrow (MaxConcurrency 1) on the worker's first round")
		assert.Equal(t, 4, sending["wide"], "the slots narrow gave back went to wide")
		mu.Unlock()

		// One by one, so that every send is seen in flight.
		for range 2 * n {
			gate <- struct{}{}
			synctest.Wait()
		}
		mu.Lock()
		assert.Equal(t, map[string]int{"narrow": n, "wide": n}, delivered)
		assert.Equal(t, 1, peak["narrow"])
		mu.Unlock()

		// Lowered while the worker knows the old limit: the next attempts
		// read the destination again once its cached copy is a
		// DestinationCacheTTL old.
		require.NoError(t, dests.Put(context.Background(), hookrelay.Destination{ID: "wide", URL: "https://example.com/hook", MaxConcurrency: 2}))
		time.Sleep(2 * hookrelay.DefaultDestinationCacheTTL)
		enqueueN(t, c, "wide", "b_wide", n)
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, 2, sending["wide"], "sends to wide after its limit was lowered to 2")
		mu.Unlock()
		for range n {
			gate <- struct{}{}
			synctest.Wait()
			mu.Lock()
			assert.LessOrEqual(t, sending["wide"], 2)
			mu.Unlock()
		}
		require.NoError(t, c.Stop(context.Background()))
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, 2*n, delivered["wide"], "every delivery to wide made")
	})
}

// gatedDestinations holds every destination lookup until gate is closed,
// once gate is set.
type gatedDestinations struct {
	hookrelay.Destinations
	gate chan struct{}
}

func (d *gatedDestinations) Destination(ctx context.Context, id string) (hookrelay.Destination, error) {
	if d.gate != nil {
		<-d.gate
	}
	return d.Destinations.Destination(ctx, id)
}

// An attempt that finds itself over its destination's own limit while the
// worker is stopping hands its claim back to the queue: claimable again
// at once, not held by a worker that has already handed back its held
// claims and left to wait out a lease.
func TestOverLimitAttemptsOfAStoppingWorkerHandTheirClaimsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		store := memory.NewStore()
		dests := &gatedDestinations{
			Destinations: memory.NewDestinations(hookrelay.Destination{ID: "narrow", URL: "https://example.com/hook", MaxConcurrency: 1}),
		}
		c, err := hookrelay.New(hookrelay.Config{
			Queue: store, Ledger: store, Destinations: dests,
			Concurrency: 8, PerDestinationConcurrency: 4, LeaseFor: time.Hour,
			Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
		})
		require.NoError(t, err)
		enqueueN(t, c, "narrow", "e", n)
		dests.gate = make(chan struct{})
		require.NoError(t, c.Start(context.Background()))
		synctest.Wait() // four attempts wait on the lookup; the rest are held
		stopped := make(chan error)
		go func() { stopped <- c.Stop(context.Background()) }()
		synctest.Wait() // held claims handed back; the four attempts still wait
		close(dests.gate)
		require.NoError(t, <-stopped)

		claims, err := store.Claim(context.Background(), hookrelay.ClaimParams{
			Now: time.Now(), Limit: 2 * n, LeaseFor: time.Minute, Holder: "next",
		})
		require.NoError(t, err)
		assert.Len(t, claims, n-1, "claimable at once after the stop: all but the one delivered")
	})
}
