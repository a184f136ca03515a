package hookrelay_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// countingStore counts the calls the worker can skip on a LedgerQueue. It
// embeds the store, so it keeps the store's LedgerQueue ability.
type countingStore struct {
	*memory.Store
	wasDelivered, acks, enqueues atomic.Int32
}

func (s *countingStore) Enqueue(ctx context.Context, ds []hookrelay.Delivery) error {
	s.enqueues.Add(int32(len(ds)))
	return s.Store.Enqueue(ctx, ds)
}

func (s *countingStore) WasDelivered(ctx context.Context, id string) (bool, error) {
	s.wasDelivered.Add(1)
	return s.Store.WasDelivered(ctx, id)
}

func (s *countingStore) Acknowledge(ctx context.Context, p hookrelay.AckParams) error {
	s.acks.Add(1)
	return s.Store.Acknowledge(ctx, p)
}

// separate hides the LedgerQueue ability: queue and ledger as two ports.
type separate struct {
	hookrelay.Queue
}

func deliverThree(t *testing.T, store *countingStore, queue hookrelay.Queue) {
	t.Helper()
	ctx := context.Background()
	dests := memory.NewDestinations(hookrelay.Destination{ID: "acct", TenantID: "t", URL: "https://example.com/hook"})
	var delivered atomic.Int32
	c, err := hookrelay.New(hookrelay.Config{
		Queue: queue, Ledger: store, Destinations: dests, Clock: clock.NewMock(),
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventDelivered {
				delivered.Add(1)
			}
		}),
	})
	require.NoError(t, err)
	var ids []string
	for i := range 3 {
		res, err := c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: fmt.Sprintf("evt_%d", i), TenantID: "t", DestinationID: "acct", EventType: "x"})
		require.NoError(t, err)
		ids = append(ids, res.ID)
	}
	require.NoError(t, c.Start(ctx))
	require.Eventually(t, func() bool { return delivered.Load() == 3 }, 20*time.Second, time.Millisecond)
	require.NoError(t, c.Stop(ctx))
	for _, id := range ids {
		d, err := store.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StateDelivered, d.State)
	}
	cs, err := store.Claim(ctx, hookrelay.ClaimParams{Now: time.Now().Add(time.Hour), Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	assert.Empty(t, cs, "nothing is left claimable, acknowledged or not")
}

// Where the queue is the ledger, a delivery is one Create, one claim, one
// send and one write: no Enqueue after the Create (the record is the queue
// entry), no ledger check of a fresh claim, no separate acknowledgement.
func TestLedgerQueueCompletesADeliveryInOneWrite(t *testing.T) {
	store := &countingStore{Store: memory.NewStore()}
	deliverThree(t, store, store)
	assert.Zero(t, store.enqueues.Load(), "the record Create stored is the queue entry")
	assert.Zero(t, store.wasDelivered.Load(), "a fresh claim from the ledger needs no ledger check")
	assert.Zero(t, store.acks.Load(), "the ledger write was the acknowledgement")
}

// With the queue as a separate port, every step of the state machine runs.
func TestSeparateQueueRunsEveryStep(t *testing.T) {
	store := &countingStore{Store: memory.NewStore()}
	deliverThree(t, store, separate{store})
	assert.Equal(t, int32(3), store.enqueues.Load())
	assert.Equal(t, int32(3), store.wasDelivered.Load())
	assert.Equal(t, int32(3), store.acks.Load())
}
