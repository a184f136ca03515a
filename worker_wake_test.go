package hookrelay_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// With many destinations, a slot that frees while the worker holds claims
// enough for its slots does not send another claim: the worker claims
// once it can take a round of its slots, not once per freed slot for the
// one or two deliveries that finished since the last claim. Every slot
// stays busy meanwhile, and every delivery is made.
//
// The test runs in a synctest bubble: synctest.Wait returns once the claim
// loop and every attempt are blocked, so the claims counted after each
// finished send are all the claims that send set off.
func TestFreedSlotsClaimInRoundsWithManyDestinations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const concurrency, destinations, finishOneByOne = 4, 64, 16
		store := memory.NewStore()
		queue := &claimRecorder{Queue: store}
		var list []hookrelay.Destination
		for i := range destinations {
			list = append(list, hookrelay.Destination{ID: fmt.Sprintf("d%02d", i), URL: "https://example.com/hook"})
		}
		release := make(chan struct{})
		var sending, delivered atomic.Int64
		c, err := hookrelay.New(hookrelay.Config{
			Queue: queue, Ledger: store, Destinations: memory.NewDestinations(list...),
			Concurrency: concurrency, PerDestinationConcurrency: 1,
			Sender: hookrelay.SenderFunc(func(ctx context.Context, _ hookrelay.SendParams) hookrelay.Result {
				sending.Add(1)
				defer sending.Add(-1)
				<-release
				return hookrelay.Delivered(204)
			}),
			Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
				if e.Name == hookrelay.EventDelivered {
					delivered.Add(1)
				}
			}),
		})
		require.NoError(t, err)
		var ps []hookrelay.EnqueueParams
		for _, d := range list {
			ps = append(ps, hookrelay.EnqueueParams{EventID: "e_" + d.ID, TenantID: "t", DestinationID: d.ID, EventType: "x", Payload: []byte("{}")})
		}
		_, err = c.EnqueueMany(context.Background(), ps)
		require.NoError(t, err)

		claims := func() int {
			queue.mu.Lock()
			defer queue.mu.Unlock()
			return len(queue.params)
		}
		require.NoError(t, c.Start(context.Background()))
		synctest.Wait()
		require.Equal(t, int64(concurrency), sending.Load(), "every slot busy after the first claim")
		before := claims()
		for i := range finishOneByOne {
			release <- struct{}{}
			synctest.Wait()
			assert.Equal(t, int64(concurrency), sending.Load(), "slots busy after send %d finished", i+1)
		}
		// Each freed slot starts a held claim for another destination, so
		// each leaves the worker one claim short of full; it claims again
		// once it is a round of its slots short.
		assert.LessOrEqual(t, claims()-before, finishOneByOne/concurrency+1,
			"claims sent while %d sends finished one by one", finishOneByOne)

		close(release)
		synctest.Wait()
		assert.Equal(t, int64(destinations), delivered.Load(), "every delivery made")
		require.NoError(t, c.Stop(context.Background()))
	})
}

// A freed slot that no held claim can take sends a claim even when the
// worker holds nearly its whole claim-ahead: the held claims are for a
// destination at its own limit, and a delivery due for another destination
// is started at once, not at the next poll.
//
// The worker learns a destination's own limit when it sends to it, so its
// first claim takes a backlog to "narrow" (MaxConcurrency 1) at the
// default limit. The delivery to "other" is enqueued by another client
// sharing the store, as another process would, so that nothing but the
// freed slot wakes the worker.
func TestIdleSlotClaimsPastHeldClaimsOfALimitedDestination(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const concurrency = 4
		store := memory.NewStore()
		dests := memory.NewDestinations(
			hookrelay.Destination{ID: "first", URL: "https://example.com/hook"},
			hookrelay.Destination{ID: "narrow", URL: "https://example.com/hook", MaxConcurrency: 1},
			hookrelay.Destination{ID: "other", URL: "https://example.com/hook"},
		)
		gates := map[string]chan struct{}{"first": make(chan struct{}), "narrow": make(chan struct{}), "other": make(chan struct{})}
		var sendingOther atomic.Int64
		cfg := hookrelay.Config{
			Queue: store, Ledger: store, Destinations: dests,
			Concurrency: concurrency, PerDestinationConcurrency: concurrency,
			Sender: hookrelay.SenderFunc(func(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
				if p.Delivery.DestinationID == "other" {
					sendingOther.Add(1)
				}
				<-gates[p.Delivery.DestinationID]
				return hookrelay.Delivered(204)
			}),
		}
		c, err := hookrelay.New(cfg)
		require.NoError(t, err)
		enqueueN(t, c, "first", "first", 1)
		enqueueN(t, c, "narrow", "narrow", hookrelay.ClaimAhead*concurrency)
		require.NoError(t, c.Start(context.Background()))
		synctest.Wait()

		producer, err := hookrelay.New(hookrelay.Config{Queue: store, Ledger: store, Destinations: dests})
		require.NoError(t, err)
		enqueueN(t, producer, "other", "other", 1)
		synctest.Wait()
		require.Zero(t, sendingOther.Load(), "nothing woke the worker yet")

		gates["first"] <- struct{}{} // its slot frees; "narrow" is at its limit
		synctest.Wait()
		assert.Equal(t, int64(1), sendingOther.Load(), "the idle slot took the delivery to other")

		for _, g := range gates {
			close(g)
		}
		require.NoError(t, c.Stop(context.Background()))
	})
}
