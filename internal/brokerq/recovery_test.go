package brokerq_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// losesFirstPublish is a broker queue whose process dies between the
// ledger's create and the publish, once: the first Enqueue publishes
// nothing.
type losesFirstPublish struct {
	hookrelay.Queue
	lost atomic.Bool
}

func (q *losesFirstPublish) Enqueue(ctx context.Context, ds []hookrelay.Delivery) error {
	if q.lost.CompareAndSwap(false, true) {
		return errors.New("injected crash before the publish")
	}
	return q.Queue.Enqueue(ctx, ds)
}

// A record whose message was lost between Create and the publish is
// published again by the worker once it has gone unleased for the grace
// period, and delivered within grace plus one poll, on the client's clock.
func TestWorkerRepublishesARecordWhoseMessageWasLost(t *testing.T) {
	ctx := context.Background()
	const grace, poll = 5 * time.Minute, time.Second
	clk := clock.NewMock()
	start := clk.Now()
	ledger := memory.NewStore()
	q := &losesFirstPublish{Queue: newQueue(t, newFakeBroker(), ledger)}
	var (
		mu          sync.Mutex
		sentAt      []time.Time
		republished int
	)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: q, Ledger: ledger, Destinations: memory.NewDestinations(hookrelay.Destination{ID: "dest_1", URL: "https://example.com/hook"}),
		Clock: clk, PollInterval: poll, RecoverUnpublishedAfter: grace,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			mu.Lock()
			sentAt = append(sentAt, clk.Now())
			mu.Unlock()
			return hookrelay.Delivered(204)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Kind == hookrelay.EventRepublished {
				mu.Lock()
				republished++
				mu.Unlock()
			}
		}),
	})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "evt_1", TenantID: "t", DestinationID: "dest_1", EventType: "x", Payload: []byte(`{}`)})
	require.Error(t, err, "the producer saw the crash")
	id := hookrelay.DeliveryID("evt_1", "dest_1")
	d, err := ledger.Get(ctx, id)
	require.NoError(t, err, "the record was created before the crash")
	require.Equal(t, hookrelay.StatePending, d.State)

	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	delivered := func() bool { ok, _ := ledger.WasDelivered(ctx, id); return ok }
	// Nothing is due for recovery before the grace period; from just
	// before it, the mock clock moves in steps of a tenth of a poll, with
	// real time between them for the worker to act.
	clk.Add(grace - 2*poll)
	time.Sleep(10 * time.Millisecond)
	require.False(t, delivered(), "not before the grace period")
	for !delivered() && clk.Now().Before(start.Add(grace+3*poll)) {
		clk.Add(poll / 10)
		time.Sleep(2 * time.Millisecond)
	}
	require.Eventually(t, delivered, 5*time.Second, time.Millisecond, "the record is delivered")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, sentAt, 1, "sent once")
	assert.False(t, sentAt[0].Before(start.Add(grace)), "not before the grace period: sent at +%s", sentAt[0].Sub(start))
	assert.LessOrEqual(t, sentAt[0].Sub(start), grace+poll, "within grace plus one poll")
	assert.Equal(t, 1, republished, "one recovery reported")
}
