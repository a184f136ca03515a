package hookrelay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// claimRecorder records what a queue was asked to claim and what it
// returned; it unwraps to the queue, so the client still finds the
// store's abilities.
type claimRecorder struct {
	hookrelay.Queue
	mu     sync.Mutex
	params []hookrelay.ClaimParams
	got    [][]hookrelay.Claim
}

func (q *claimRecorder) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	claims, err := q.Queue.Claim(ctx, p)
	q.mu.Lock()
	q.params = append(q.params, p)
	q.got = append(q.got, claims)
	q.mu.Unlock()
	return claims, err
}

func (q *claimRecorder) Unwrap() hookrelay.Queue { return q.Queue }

// enqueueN enqueues n deliveries to destination dest through c, with event
// IDs prefix_0 … prefix_(n-1).
func enqueueN(t *testing.T, c *hookrelay.Client, dest, prefix string, n int) {
	t.Helper()
	var ps []hookrelay.EnqueueParams
	for i := range n {
		ps = append(ps, hookrelay.EnqueueParams{EventID: fmt.Sprintf("%s_%d", prefix, i), TenantID: "t", DestinationID: dest, EventType: "x", Payload: []byte("{}")})
	}
	_, err := c.EnqueueMany(context.Background(), ps)
	require.NoError(t, err)
}

// A claim carries the rooms of the destinations the worker has something
// in flight or held for, not of every destination it has seen with a
// concurrency limit of its own (with thousands of those, each claim cost
// them all). A destination with nothing in flight or held is still never
// claimed beyond its room: the default room is no larger than the room of
// the lowest limit a destination has of its own.
func TestClaimsCarryOnlyTheRoomsOfBusyDestinations(t *testing.T) {
	const seen, backlog = 50, 100
	store := memory.NewStore()
	queue := &claimRecorder{Queue: store}
	var list []hookrelay.Destination
	for i := range seen {
		list = append(list, hookrelay.Destination{ID: fmt.Sprintf("own_%d", i), URL: "https://example.com/hook", MaxConcurrency: 2})
	}
	list = append(list, hookrelay.Destination{ID: "limited", URL: "https://example.com/hook", MaxConcurrency: 2})
	var mu sync.Mutex
	delivered := map[string]int{}
	c, err := hookrelay.New(hookrelay.Config{
		Queue: queue, Ledger: store, Destinations: memory.NewDestinations(list...),
		Concurrency: 16, PerDestinationConcurrency: 4,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventDelivered {
				mu.Lock()
				delivered[e.Delivery.DestinationID]++
				mu.Unlock()
			}
		}),
	})
	require.NoError(t, err)
	waitDelivered := func(dest string, n int) {
		t.Helper()
		require.Eventually(t, func() bool { // a hang, not a speed check
			mu.Lock()
			defer mu.Unlock()
			return delivered[dest] == n
		}, 30*time.Second, time.Millisecond, "deliveries to %s", dest)
	}

	// The worker learns every limit at send time.
	for _, d := range list {
		enqueueN(t, c, d.ID, "first", 1)
	}
	require.NoError(t, c.Start(context.Background()))
	for _, d := range list {
		waitDelivered(d.ID, 1)
	}
	// Stopped, nothing is in flight or held; the limits stay learned.
	require.NoError(t, c.Stop(context.Background()))
	queue.mu.Lock()
	queue.params, queue.got = nil, nil
	queue.mu.Unlock()

	enqueueN(t, c, "limited", "backlog", backlog)
	require.NoError(t, c.Start(context.Background()))
	waitDelivered("limited", backlog+1)
	require.NoError(t, c.Stop(context.Background()))

	queue.mu.Lock()
	defer queue.mu.Unlock()
	require.NotEmpty(t, queue.params)
	first := queue.params[0]
	assert.Empty(t, first.DestinationRoom, "rooms of destinations with nothing in flight or held")
	assert.Equal(t, hookrelay.ClaimAhead*2, first.DefaultDestinationRoom, "the default room is the lowest limit's")
	assert.LessOrEqual(t, len(queue.got[0]), hookrelay.ClaimAhead*2, "the first claim to an idle destination with limit 2")
	for i, p := range queue.params {
		assert.LessOrEqual(t, len(p.DestinationRoom), 1, "claim %d: rooms sent", i)
	}
}
