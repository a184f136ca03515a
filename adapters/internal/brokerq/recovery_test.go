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
	ledger := &recordsTakes{Store: memory.NewStore(), taken: make(chan struct{})}
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
			if e.Name == hookrelay.EventRepublished {
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
	// The mock clock moves in steps of a tenth of a poll until a recovery
	// pass takes the record, then stays put: the record must be delivered
	// without another poll. Whether it was taken on time is judged by each
	// pass's own clock reading, not by how far the clock got meanwhile, so
	// a busy machine that delays the worker cannot fail the test.
	clk.Add(grace - 2*poll)
	time.Sleep(10 * time.Millisecond)
	require.False(t, delivered(), "not before the grace period")
	deadline := time.After(10 * time.Second) // a hang, not a speed check
stepping:
	for {
		select {
		case <-ledger.taken:
			break stepping
		case <-deadline:
			t.Fatal("no recovery pass took the record")
		default:
			clk.Add(poll / 10)
			time.Sleep(2 * time.Millisecond)
		}
	}
	require.Eventually(t, delivered, 10*time.Second, time.Millisecond, "delivered without waiting for another poll")
	calls := ledger.calls()
	last := calls[len(calls)-1]
	require.Equal(t, 1, last.n, "the record was taken once")
	assert.GreaterOrEqual(t, last.now.Sub(start), grace, "not before the grace period")
	for _, c := range calls[:len(calls)-1] {
		assert.Zero(t, c.n)
		assert.Less(t, c.now.Sub(start), grace, "a pass after the grace period left the record: taken a poll late")
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, sentAt, 1, "sent once")
	assert.False(t, sentAt[0].Before(start.Add(grace)), "not before the grace period: sent at +%s", sentAt[0].Sub(start))
	assert.Equal(t, 1, republished, "one recovery reported")
}

// recordsTakes is a memory ledger that records each recovery pass: its
// clock reading and how many records it took; taken is closed by the first
// pass that takes one.
type recordsTakes struct {
	*memory.Store
	mu    sync.Mutex
	log   []takeCall
	taken chan struct{}
	// during, if set, runs inside each pass, told its number (from 1).
	during func(pass int)
}

type takeCall struct {
	now time.Time
	n   int
}

func (r *recordsTakes) TakeUnpublished(ctx context.Context, p hookrelay.RecoverUnpublishedParams) ([]hookrelay.Delivery, error) {
	ds, err := r.Store.TakeUnpublished(ctx, p)
	if r.during != nil {
		r.during(len(r.calls()) + 1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.log = append(r.log, takeCall{now: p.Now, n: len(ds)}); len(ds) > 0 {
		select {
		case <-r.taken:
		default:
			close(r.taken)
		}
	}
	return ds, err
}

func (r *recordsTakes) calls() []takeCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]takeCall(nil), r.log...)
}

// A record stored without a message (the SQL store's EnqueueTx, or a
// publish lost after Create) gets its message from an Enqueue or Publish
// of the same event repeated by the producer, at once, without waiting for
// recovery: nothing new is created, and nothing is published twice.
func TestARepeatedEnqueueOrPublishPublishesAStoredRecord(t *testing.T) {
	ctx := context.Background()
	ledger := memory.NewStore()
	b := newFakeBroker()
	c, err := hookrelay.New(hookrelay.Config{
		Queue: newQueue(t, b, ledger), Ledger: ledger,
		Destinations: memory.NewDestinations(
			hookrelay.Destination{ID: "dest_1", TenantID: "t", URL: "https://example.com/1"},
			hookrelay.Destination{ID: "dest_2", TenantID: "t", URL: "https://example.com/2"},
		),
		Clock:  clock.NewMock(),
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
	})
	require.NoError(t, err)
	params := hookrelay.EnqueueParams{EventID: "evt_1", TenantID: "t", DestinationID: "dest_1", EventType: "x", Payload: []byte(`{}`)}
	ds, err := c.Prepare(ctx, []hookrelay.EnqueueParams{params})
	require.NoError(t, err)
	_, err = ledger.Create(ctx, ds) // stored as EnqueueTx stores it: no message
	require.NoError(t, err)
	require.Zero(t, b.pending())

	res, err := c.Enqueue(ctx, params)
	require.NoError(t, err)
	assert.False(t, res.Created)
	assert.Equal(t, 1, b.pending(), "the repeated enqueue published the stored record")

	pp, err := c.PreparePublish(ctx, hookrelay.PublishParams{EventID: "evt_2", TenantID: "t", EventType: "x", Payload: []byte(`{}`)})
	require.NoError(t, err)
	_, err = ledger.Create(ctx, pp.Deliveries) // as PublishTx stores them
	require.NoError(t, err)
	require.Equal(t, 1, b.pending())
	pr, err := c.Publish(ctx, hookrelay.PublishParams{EventID: "evt_2", TenantID: "t", EventType: "x", Payload: []byte(`{}`)})
	require.NoError(t, err)
	require.Len(t, pr.Deliveries, 2)
	for _, r := range pr.Deliveries {
		assert.False(t, r.Created, r.DestinationID)
	}
	assert.Equal(t, 3, b.pending(), "the repeated publish published both stored records")
}

// Recovery passes start a poll interval apart, measured from the end of
// one to the start of the next, however long a pass takes: a slow pass
// (a large outbox, a slow store) did not also push the next one back by
// its own length, as a wait measured from the pass's start and begun at
// its end did.
func TestRecoveryPassesArePollIntervalApartWhateverAPassTakes(t *testing.T) {
	ctx := context.Background()
	const poll, slow = time.Second, 30 * time.Second
	clk := clock.NewMock()
	ledger := &recordsTakes{Store: memory.NewStore(), taken: make(chan struct{})}
	ledger.during = func(pass int) {
		if pass == 1 {
			clk.Add(slow) // the first pass takes 30 s
		}
	}
	c, err := hookrelay.New(hookrelay.Config{
		Queue: newQueue(t, newFakeBroker(), ledger), Ledger: ledger,
		Destinations: memory.NewDestinations(hookrelay.Destination{ID: "dest_1", URL: "https://example.com/hook"}),
		Clock:        clk, PollInterval: poll, RecoverUnpublishedAfter: time.Minute,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
	})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	require.Eventually(t, func() bool { return len(ledger.calls()) == 1 }, 10*time.Second, time.Millisecond, "the first pass at once")
	deadline := time.After(10 * time.Second) // a hang, not a speed check
	for len(ledger.calls()) < 2 {
		select {
		case <-deadline:
			t.Fatal("no second recovery pass")
		default:
			clk.Add(poll / 10)
			time.Sleep(2 * time.Millisecond)
		}
	}
	calls := ledger.calls()
	apart := calls[1].now.Sub(calls[0].now)
	assert.GreaterOrEqual(t, apart, slow+poll, "a poll interval after the slow pass ended")
	assert.Less(t, apart, slow+2*poll, "not a poll interval plus the slow pass's length after it ended")
}
