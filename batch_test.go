package hookrelay_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaymock"
	"github.com/hookrelay/hookrelay/hookrelaytest"
)

// With a BatchLedger the worker still records before it acknowledges, and
// reports the delivery only after both: batching groups the ledger writes,
// it never moves an acknowledgement before one.
func TestWorkerRecordsTheBatchBeforeAcknowledging(t *testing.T) {
	ctrl := gomock.NewController(t)
	queue := hookrelaymock.NewMockQueue(ctrl)
	ledger := hookrelaymock.NewMockBatchLedger(ctrl)
	dests := hookrelaymock.NewMockDestinations(ctrl)
	clk := clock.NewMock()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk.Set(now)
	claim := hookrelay.Claim{
		Delivery: hookrelay.Delivery{ID: hookrelay.DeliveryID("evt_1", "dest_1"), EventID: "evt_1", TenantID: "t",
			DestinationID: "dest_1", Attempt: 1, PolicyVersion: "default", State: hookrelay.StatePending, FirstQueuedAt: now, NextAttemptAt: now},
		Lease: hookrelay.Lease{Token: 7, ExpiresAt: now.Add(hookrelay.DefaultLeaseFor)}, // as Claim promises: Now+LeaseFor
	}
	var (
		mu    sync.Mutex
		order []string
	)
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	delivered := make(chan struct{})
	first := queue.EXPECT().Claim(gomock.Any(), gomock.Any()).Return([]hookrelay.Claim{claim}, nil)
	queue.EXPECT().Claim(gomock.Any(), gomock.Any()).Return(nil, nil).AnyTimes().After(first)
	gomock.InOrder(
		ledger.EXPECT().WasDelivered(gomock.Any(), claim.Delivery.ID).Return(false, nil),
		dests.EXPECT().Destination(gomock.Any(), "dest_1").Return(hookrelay.Destination{ID: "dest_1"}, nil),
		ledger.EXPECT().RecordBatch(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, ws []hookrelay.LedgerWrite) ([]error, error) {
			note("ledger")
			require.Len(t, ws, 1)
			require.NotNil(t, ws[0].Delivered)
			assert.Equal(t, claim.Delivery.ID, ws[0].Delivered.ID)
			assert.Equal(t, claim.Lease, ws[0].Delivered.Lease, "fenced by the claim's own lease")
			return []error{nil}, nil
		}),
		queue.EXPECT().Acknowledge(gomock.Any(), gomock.Any()).DoAndReturn(func(context.Context, hookrelay.AckParams) error {
			note("ack")
			return nil
		}),
	)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: queue, Ledger: ledger, Destinations: dests, Clock: clk, Random: hookrelaytest.FixedRandom(0.5),
		DestinationCacheTTL: -1,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			note("send")
			return hookrelay.Delivered(204)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventDelivered {
				note("observed")
				close(delivered)
			}
		}),
	})
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	select {
	case <-delivered:
	case <-time.After(10 * time.Second): // a hang, not a speed check
		t.Fatal("not delivered")
	}
	require.NoError(t, c.Stop(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"send", "ledger", "ack", "observed"}, order)
}

// claimCountingStore counts Claim calls and what they return; embedding keeps
// the memory store's abilities (LedgerQueue, BatchLedger, rooms).
type claimCountingStore struct {
	*memory.Store
	mu     sync.Mutex
	claims []int
}

func (s *claimCountingStore) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	cs, err := s.Store.Claim(ctx, p)
	s.mu.Lock()
	s.claims = append(s.claims, len(cs))
	s.mu.Unlock()
	return cs, err
}

// Ten busy destinations with a limit of 5 each fill a worker of 50 in one
// claim, not in claims held to one destination's room; the same claim takes
// seven times as much again (the worker claims eight times its capacity,
// ClaimAhead) to hold for the slots about to free. Stopping hands the held
// ones back without spending an attempt.
func TestOneClaimFillsTheWorkerAcrossDestinations(t *testing.T) {
	ctx := context.Background()
	store := &claimCountingStore{Store: memory.NewStore()}
	dests := memory.NewDestinations()
	for i := range 10 {
		require.NoError(t, dests.Put(ctx, hookrelay.Destination{ID: fmt.Sprintf("d%d", i), URL: "https://example.com/hook"}))
	}
	started := make(chan struct{}, 400)
	var (
		mu      sync.Mutex
		perDest = map[string]int{}
		peak    int
	)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: dests, Clock: clock.NewMock(),
		Concurrency: 50, PerDestinationConcurrency: 5,
		Sender: hookrelay.SenderFunc(func(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
			mu.Lock()
			perDest[p.Destination.ID]++
			peak = max(peak, perDest[p.Destination.ID])
			mu.Unlock()
			started <- struct{}{}
			<-ctx.Done() // until StopAndCancel
			return hookrelay.Unknown(hookrelay.ReasonTimeout)
		}),
	})
	require.NoError(t, err)
	var params []hookrelay.EnqueueParams
	for i := range 500 {
		params = append(params, hookrelay.EnqueueParams{EventID: fmt.Sprintf("e%d", i), TenantID: "t",
			DestinationID: fmt.Sprintf("d%d", i%10), EventType: "x", Payload: []byte("{}")})
	}
	res, err := c.EnqueueMany(ctx, params)
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	for range 50 {
		select {
		case <-started:
		case <-time.After(10 * time.Second): // a hang, not a speed check
			t.Fatal("the worker did not fill its 50 slots")
		}
	}
	store.mu.Lock()
	assert.Equal(t, 400, store.claims[0], "the first claim took 40 for each of the 10 destinations: 5 to send, 35 held")
	store.mu.Unlock()
	require.NoError(t, c.StopAndCancel(ctx))
	mu.Lock()
	assert.Equal(t, 5, peak, "the per-destination limit holds")
	mu.Unlock()
	for _, r := range res {
		d, err := store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StatePending, d.State)
		assert.Equal(t, 1, d.Attempt, "nothing held or cancelled spent an attempt")
	}
	got, err := store.Store.Claim(ctx, hookrelay.ClaimParams{Now: c.Clock().Now(), Limit: 1000, LeaseFor: time.Minute})
	require.NoError(t, err)
	assert.Len(t, got, 500, "held and cancelled deliveries are claimable again at once")
}

// countingDestinations counts lookups.
type countingDestinations struct {
	*memory.Destinations
	mu    sync.Mutex
	reads int
}

func (d *countingDestinations) Destination(ctx context.Context, id string) (hookrelay.Destination, error) {
	d.mu.Lock()
	d.reads++
	d.mu.Unlock()
	return d.Destinations.Destination(ctx, id)
}

func (d *countingDestinations) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reads
}

// The worker reads a destination once per DestinationCacheTTL, not once
// per delivery; a redrive (usually after a fix to the destination) reads it
// afresh.
func TestWorkerReusesWhatItReadOfADestination(t *testing.T) {
	ctx := context.Background()
	store := memory.NewStore()
	dests := &countingDestinations{Destinations: memory.NewDestinations(hookrelay.Destination{ID: "acct", TenantID: "t", URL: "https://old.example/hook"})}
	var (
		mu   sync.Mutex
		urls = map[string]int{}
	)
	done := make(chan struct{}, 64)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: dests, DestinationCacheTTL: time.Hour, // never runs out in this test
		Sender: hookrelay.SenderFunc(func(_ context.Context, p hookrelay.SendParams) hookrelay.Result {
			mu.Lock()
			urls[p.Destination.URL]++
			mu.Unlock()
			if p.Destination.URL == "https://old.example/hook" {
				return hookrelay.Permanent(hookrelay.ReasonNotFound).WithStatus(404)
			}
			return hookrelay.Delivered(204)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventDelivered || e.Name == hookrelay.EventDeadLettered {
				done <- struct{}{}
			}
		}),
	})
	require.NoError(t, err)
	wait := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-done:
			case <-time.After(10 * time.Second): // a hang, not a speed check
				t.Fatal("deliveries did not finish")
			}
		}
	}
	enqueueEvents(t, c, "acct", 20)
	enqueueReads := dests.count()
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	wait(20)
	assert.Equal(t, 1, dests.count()-enqueueReads, "the worker reads it once, not once per delivery")

	// The operator fixes the URL and redrives: the redriven deliveries go
	// to the new URL although the cached entry has not expired.
	require.NoError(t, dests.Put(ctx, hookrelay.Destination{ID: "acct", TenantID: "t", URL: "https://new.example/hook"}))
	_, err = c.Redrive(ctx, hookrelay.RedriveParams{Filter: hookrelay.DeadLetterFilter{DestinationIDs: []string{"acct"}},
		Actor: "ops", Reason: "url fixed", RatePerSecond: 1e6})
	require.NoError(t, err)
	wait(20)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 20, urls["https://new.example/hook"], "every redriven delivery read the corrected destination")
}

// enqueueEvents enqueues n events (e0 … e<n-1>) to destination dest.
func enqueueEvents(t *testing.T, c *hookrelay.Client, dest string, n int) {
	t.Helper()
	var params []hookrelay.EnqueueParams
	for i := range n {
		params = append(params, hookrelay.EnqueueParams{EventID: fmt.Sprintf("e%d", i), TenantID: "t", DestinationID: dest, EventType: "x", Payload: []byte("{}")})
	}
	_, err := c.EnqueueMany(context.Background(), params)
	require.NoError(t, err)
}

// slowDestinations answers every lookup after a pause, counting them.
type slowDestinations struct {
	countingDestinations
	pause time.Duration
}

func (d *slowDestinations) Destination(ctx context.Context, id string) (hookrelay.Destination, error) {
	time.Sleep(d.pause)
	return d.countingDestinations.Destination(ctx, id)
}

// Attempts that want a destination the worker has not read yet (or whose
// entry ran out) while a read of it is under way wait for that read: a
// destination is read once, not once per attempt in flight to it — on a
// SQL store a burst of round trips every DestinationCacheTTL.
func TestAttemptsShareOneReadOfADestination(t *testing.T) {
	ctx := context.Background()
	store := memory.NewStore()
	dests := &slowDestinations{pause: 50 * time.Millisecond, countingDestinations: countingDestinations{
		Destinations: memory.NewDestinations(hookrelay.Destination{ID: "acct", TenantID: "t", URL: "https://example.com/hook", MaxConcurrency: 20})}}
	done := make(chan struct{}, 64)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: dests, DestinationCacheTTL: time.Hour,
		Concurrency: 20, PerDestinationConcurrency: 20,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventDelivered {
				done <- struct{}{}
			}
		}),
	})
	require.NoError(t, err)
	enqueueEvents(t, c, "acct", 20)
	enqueueReads := dests.count()
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	for range 20 {
		select {
		case <-done:
		case <-time.After(10 * time.Second): // a hang, not a speed check
			t.Fatal("deliveries did not finish")
		}
	}
	assert.Equal(t, 1, dests.count()-enqueueReads, "20 attempts started together read the destination once")
}

// batchSizes records the size of every RecordBatch; embedding keeps the
// memory store's other abilities.
type batchSizes struct {
	*memory.Store
	mu    sync.Mutex
	sizes []int
}

func (b *batchSizes) RecordBatch(ctx context.Context, ws []hookrelay.LedgerWrite) ([]error, error) {
	b.mu.Lock()
	b.sizes = append(b.sizes, len(ws))
	b.mu.Unlock()
	return b.Store.RecordBatch(ctx, ws)
}

// With a CompletionLinger the first write of a batch waits, on the
// client's clock, for the others: three attempts finishing together make
// one batch, flushed when the linger ends and not before.
func TestCompletionLingerGathersOneBatch(t *testing.T) {
	ctx := context.Background()
	store := &batchSizes{Store: memory.NewStore()}
	clk := clock.NewMock()
	sent := make(chan struct{}, 3)
	delivered := make(chan struct{}, 3)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: memory.NewDestinations(hookrelay.Destination{ID: "acct", URL: "https://example.com/hook"}),
		Clock: clk, CompletionLinger: time.Second,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			sent <- struct{}{}
			return hookrelay.Delivered(204)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventDelivered {
				delivered <- struct{}{}
			}
		}),
	})
	require.NoError(t, err)
	for i := range 3 {
		_, err := c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: fmt.Sprintf("e%d", i), TenantID: "t", DestinationID: "acct", EventType: "x", Payload: []byte("{}")})
		require.NoError(t, err)
	}
	require.NoError(t, c.Start(ctx))
	for range 3 {
		select {
		case <-sent:
		case <-time.After(10 * time.Second): // a hang, not a speed check
			t.Fatal("not sent")
		}
	}
	require.Eventually(t, func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		if len(store.sizes) > 0 {
			return true
		}
		clk.Add(100 * time.Millisecond) // the linger runs on the client's clock
		return false
	}, 10*time.Second, 5*time.Millisecond)
	for range 3 {
		select {
		case <-delivered:
		case <-time.After(10 * time.Second):
			t.Fatal("not delivered")
		}
	}
	require.NoError(t, c.Stop(ctx))
	store.mu.Lock()
	defer store.mu.Unlock()
	assert.Equal(t, []int{3}, store.sizes, "one batch held open by the linger")
}

// A claim held for a slow destination is not started once half its lease
// has gone: it is handed back without spending an attempt and claimed again
// with a fresh lease, so no send starts on a lease about to run out.
func TestHeldClaimWithAShortLeaseIsHandedBack(t *testing.T) {
	ctx := context.Background()
	store := memory.NewStore()
	dests := memory.NewDestinations()
	require.NoError(t, dests.Put(ctx, hookrelay.Destination{ID: "slow", URL: "https://example.com/hook"}))
	clk := clock.NewMock()
	clk.Set(time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC))
	const leaseFor = 2 * time.Minute
	firstStarted, unblock := make(chan struct{}), make(chan struct{})
	var (
		mu       sync.Mutex
		sends    int
		leftOver []time.Duration // lease left when each later send started
		released []string
	)
	delivered := make(chan string, 3)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: dests, Clock: clk,
		Concurrency: 1, PerDestinationConcurrency: 1, LeaseFor: leaseFor,
		Sender: hookrelay.SenderFunc(func(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
			mu.Lock()
			sends++
			first := sends == 1
			if !first {
				deadline, _ := ctx.Deadline()
				leftOver = append(leftOver, deadline.Sub(clk.Now()))
			}
			mu.Unlock()
			if first {
				close(firstStarted)
				<-unblock
			}
			return hookrelay.Delivered(204)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			switch e.Name {
			case hookrelay.EventReleased:
				mu.Lock()
				released = append(released, e.Reason)
				mu.Unlock()
			case hookrelay.EventDelivered:
				delivered <- e.Delivery.ID
			}
		}),
	})
	require.NoError(t, err)
	var params []hookrelay.EnqueueParams
	for i := range 3 {
		params = append(params, hookrelay.EnqueueParams{EventID: fmt.Sprintf("e%d", i), TenantID: "t",
			DestinationID: "slow", EventType: "x", Payload: []byte("{}")})
	}
	res, err := c.EnqueueMany(ctx, params)
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	select {
	case <-firstStarted:
	case <-time.After(10 * time.Second): // a hang, not a speed check
		t.Fatal("the first send did not start")
	}
	clk.Add(leaseFor/2 + time.Second) // the two held claims now have less than half their lease
	close(unblock)
	for range 3 {
		select {
		case <-delivered:
		case <-time.After(10 * time.Second):
			t.Fatal("not every delivery was delivered")
		}
	}
	mu.Lock()
	assert.Equal(t, []string{hookrelay.ReasonDestinationSaturated, hookrelay.ReasonDestinationSaturated}, released,
		"both held claims were handed back")
	require.Len(t, leftOver, 2)
	for _, left := range leftOver {
		assert.Greater(t, left, leaseFor/2, "a later send started on a fresh lease")
	}
	mu.Unlock()
	for _, r := range res {
		as, err := store.Attempts(ctx, r.ID)
		require.NoError(t, err)
		assert.Len(t, as, 1, "handing a held claim back spent no attempt")
	}
}

// claimCommittedLate is a Queue whose first Claim waits until proceed is
// closed, then claims in the store and — if its caller gave up meanwhile —
// answers with the caller's error: the claim committed, its answer was lost,
// as a PostgreSQL claim sent with its commit in one round trip behaves.
type claimCommittedLate struct {
	hookrelay.Queue
	entered, proceed chan struct{}
	once             sync.Once
}

func (q *claimCommittedLate) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	first := false
	q.once.Do(func() { first = true })
	if !first {
		return q.Queue.Claim(ctx, p)
	}
	close(q.entered)
	<-q.proceed
	cs, err := q.Queue.Claim(context.Background(), p)
	if err == nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return cs, err
}

// Stopping while a claim is on its way leaves nothing leased by nobody: the
// claim runs to its answer and what it claimed is handed back at once,
// instead of waiting out a whole lease.
func TestStoppingDuringAClaimHandsItsDeliveriesBackAtOnce(t *testing.T) {
	ctx := context.Background()
	store := memory.NewStore()
	dests := memory.NewDestinations(hookrelay.Destination{ID: "acct", URL: "https://example.com/hook"})
	clk := clock.NewMock()
	clk.Set(time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC))
	q := &claimCommittedLate{Queue: store, entered: make(chan struct{}), proceed: make(chan struct{})}
	var mu sync.Mutex
	var released []string
	sends := 0
	c, err := hookrelay.New(hookrelay.Config{
		Queue: q, Ledger: store, Destinations: dests, Clock: clk, LeaseFor: time.Hour,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			mu.Lock()
			sends++
			mu.Unlock()
			return hookrelay.Delivered(204)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventReleased {
				mu.Lock()
				released = append(released, e.Reason)
				mu.Unlock()
			}
		}),
	})
	require.NoError(t, err)
	_, err = c.EnqueueMany(ctx, []hookrelay.EnqueueParams{
		{EventID: "e1", TenantID: "t", DestinationID: "acct", EventType: "x", Payload: []byte("{}")},
		{EventID: "e2", TenantID: "t", DestinationID: "acct", EventType: "x", Payload: []byte("{}")},
	})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	require.NoError(t, c.Start(runCtx))
	select {
	case <-q.entered:
	case <-time.After(10 * time.Second): // a hang, not a speed check
		t.Fatal("the worker did not claim")
	}
	cancel() // the worker is cancelled while its claim is on its way
	close(q.proceed)
	select {
	case <-c.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not stop")
	}
	cs, err := store.Claim(ctx, hookrelay.ClaimParams{Now: clk.Now(), Limit: 10, LeaseFor: time.Minute, Holder: "test"})
	require.NoError(t, err)
	assert.Len(t, cs, 2, "both deliveries are claimable at once, not after the lost claim's hour-long lease")
	mu.Lock()
	defer mu.Unlock()
	assert.Zero(t, sends, "nothing was sent after the cancellation")
	assert.Equal(t, []string{hookrelay.ReasonWorkerStopped, hookrelay.ReasonWorkerStopped}, released)
	for _, cl := range cs {
		assert.Equal(t, 1, cl.Delivery.Attempt, "handing back spent no attempt")
	}
}

// gatedBatches is a store whose first RecordBatch waits until open is
// closed; it records the size of every batch.
type gatedBatches struct {
	*memory.Store
	open    chan struct{}
	mu      sync.Mutex
	sizes   []int
	blocked chan struct{} // closed when the first batch starts waiting
}

func (g *gatedBatches) RecordBatch(ctx context.Context, ws []hookrelay.LedgerWrite) ([]error, error) {
	g.mu.Lock()
	first := len(g.sizes) == 0
	g.sizes = append(g.sizes, len(ws))
	g.mu.Unlock()
	if first {
		close(g.blocked)
		<-g.open
	}
	return g.Store.RecordBatch(ctx, ws)
}

// While a batch commits the worker keeps sending: an attempt frees its
// slot once its write is queued, and up to four rounds of the worker's
// slots' writes wait for the next batch, which then takes them all. Only
// then do finished attempts wait with their slots held, and the worker
// stops sending until the commit.
func TestWritesQueueFourRoundsWhileABatchCommits(t *testing.T) {
	ctx := context.Background()
	const concurrency = 5
	store := &gatedBatches{Store: memory.NewStore(), open: make(chan struct{}), blocked: make(chan struct{})}
	var sends atomic.Int64
	delivered := make(chan struct{}, 100)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Concurrency: concurrency, PerDestinationConcurrency: concurrency,
		Destinations: memory.NewDestinations(hookrelay.Destination{ID: "acct", TenantID: "t", URL: "https://example.com/hook"}),
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			sends.Add(1)
			return hookrelay.Delivered(204)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventDelivered {
				delivered <- struct{}{}
			}
		}),
	})
	require.NoError(t, err)
	enqueueEvents(t, c, "acct", 60)
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	<-store.blocked
	store.mu.Lock()
	first := store.sizes[0]
	store.mu.Unlock()
	// The first batch's writes, four rounds queued, and one round of
	// attempts waiting to queue theirs.
	want := int64(first + 4*concurrency + concurrency)
	deadline := time.Now().Add(10 * time.Second) // a hang, not a speed check
	for sends.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // room for any send beyond want
	assert.Equal(t, want, sends.Load(), "sends made while the first batch commits")
	close(store.open)
	for range 60 {
		select {
		case <-delivered:
		case <-time.After(10 * time.Second):
			t.Fatal("deliveries did not finish")
		}
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	require.GreaterOrEqual(t, len(store.sizes), 2)
	assert.Equal(t, 4*concurrency, store.sizes[1], "the next batch takes every queued write")
	for i, n := range store.sizes {
		assert.LessOrEqual(t, n, 4*concurrency, "batch %d", i)
	}
}
