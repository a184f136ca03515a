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

// blindQueue is the memory store seen as a queue that claims in its own
// order and does not honour destination rooms, as the broker queues
// (hooknats, hookamqp) do: it hides ClaimsByDestinationRoom, and every
// other ability, and drops the rooms from each claim. It honours
// SkipDestinations, as they do. It counts the deliveries of each claim.
type blindQueue struct {
	hookrelay.Queue
	mu     sync.Mutex
	claims []int
}

func (q *blindQueue) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	p.DestinationRoom, p.DefaultDestinationRoom = nil, 0
	cs, err := q.Queue.Claim(ctx, p)
	q.mu.Lock()
	q.claims = append(q.claims, len(cs))
	q.mu.Unlock()
	return cs, err
}

func (q *blindQueue) sizes() []int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]int(nil), q.claims...)
}

// enqueueInOrder enqueues one delivery per destination ID in dests, one
// millisecond apart on clk, so a claim that takes the oldest first (a
// broker's order) takes them in this order.
func enqueueInOrder(t *testing.T, c *hookrelay.Client, clk *clock.Mock, dests []string) []string {
	t.Helper()
	ids := make([]string, len(dests))
	for i, dest := range dests {
		res, err := c.Enqueue(context.Background(), hookrelay.EnqueueParams{EventID: fmt.Sprintf("e%d", i), TenantID: "t",
			DestinationID: dest, EventType: "x", Payload: []byte("{}")})
		require.NoError(t, err)
		ids[i] = res.ID
		clk.Add(time.Millisecond)
	}
	return ids
}

// concurrencyPeaks tracks sends in flight per destination and the most
// ever seen at once.
type concurrencyPeaks struct {
	mu    sync.Mutex
	now   map[string]int
	peaks map[string]int
}

func (p *concurrencyPeaks) enter(dest string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.now == nil {
		p.now, p.peaks = map[string]int{}, map[string]int{}
	}
	p.now[dest]++
	p.peaks[dest] = max(p.peaks[dest], p.now[dest])
}

func (p *concurrencyPeaks) leave(dest string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now[dest]--
}

func (p *concurrencyPeaks) peak() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, v := range p.peaks {
		n = max(n, v)
	}
	return n
}

// From a queue that does not honour destination rooms (a broker), ten
// destinations with a limit of 5 each still fill a worker of 50, and the
// worker claims ahead as it does from a store that honours rooms: the
// first claim is held to the tightest room (40, eight rounds of one
// destination's slots, ClaimAhead) and, having seen the queue's order
// spread over ten destinations, the second takes the rest of eight times
// the capacity.
// Nothing is handed back for want of room, no destination exceeds its
// limit, and StopAndCancel hands back every held claim without spending an
// attempt.
func TestBlindQueueClaimsFillTheWorkerAcrossDestinations(t *testing.T) {
	ctx := context.Background()
	store := memory.NewStore()
	queue := &blindQueue{Queue: store}
	dests := memory.NewDestinations()
	for i := range 10 {
		require.NoError(t, dests.Put(ctx, hookrelay.Destination{ID: fmt.Sprintf("d%d", i), URL: "https://example.com/hook"}))
	}
	clk := clock.NewMock()
	started := make(chan struct{}, 500)
	var (
		peaks concurrencyPeaks
		mu    sync.Mutex
		rel   []string
	)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: queue, Ledger: store, Destinations: dests, Clock: clk,
		Concurrency: 50, PerDestinationConcurrency: 5,
		Sender: hookrelay.SenderFunc(func(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
			peaks.enter(p.Destination.ID)
			defer peaks.leave(p.Destination.ID)
			started <- struct{}{}
			<-ctx.Done() // until StopAndCancel
			return hookrelay.Unknown(hookrelay.ReasonTimeout)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventReleased {
				mu.Lock()
				rel = append(rel, e.Reason)
				mu.Unlock()
			}
		}),
	})
	require.NoError(t, err)
	var order []string
	for i := range 500 {
		order = append(order, fmt.Sprintf("d%d", i%10))
	}
	ids := enqueueInOrder(t, c, clk, order)
	require.NoError(t, c.Start(ctx))
	for range 50 {
		select {
		case <-started:
		case <-time.After(10 * time.Second): // a hang, not a speed check
			t.Fatal("the worker did not fill its 50 slots")
		}
	}
	require.Eventually(t, func() bool { return len(queue.sizes()) >= 2 }, 10*time.Second, time.Millisecond)
	sizes := queue.sizes()
	assert.Equal(t, []int{40, 360}, sizes[:2], "a claim held to the tightest room, then one of all the free capacity (8 × 50 less 40)")
	require.NoError(t, c.StopAndCancel(ctx))
	assert.Equal(t, 5, peaks.peak(), "the per-destination limit holds")
	mu.Lock()
	assert.NotContains(t, rel, hookrelay.ReasonDestinationSaturated, "nothing was claimed only to be handed back")
	mu.Unlock()
	for _, id := range ids {
		d, err := store.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StatePending, d.State)
		assert.Equal(t, 1, d.Attempt, "nothing held or cancelled spent an attempt")
	}
	got, err := store.Claim(ctx, hookrelay.ClaimParams{Now: clk.Now(), Limit: 500, LeaseFor: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, 500, len(got), "held and cancelled deliveries are claimable again at once")
}

// A destination with a long backlog at the head of a queue that does not
// honour rooms cannot fill the worker's held capacity: it holds at most
// ClaimAhead rounds of its own slots, so a later delivery to another
// destination is claimed and delivered while every send to the busy one
// hangs. Stop hands the held claims back: every delivery ends delivered or
// pending, claimable at once, with no attempt spent on what was held.
func TestBlindQueueBacklogToOneDestinationDoesNotStarveAnother(t *testing.T) {
	ctx := context.Background()
	store := memory.NewStore()
	queue := &blindQueue{Queue: store}
	dests := memory.NewDestinations(
		hookrelay.Destination{ID: "busy", URL: "https://busy.example/hook"},
		hookrelay.Destination{ID: "quiet", URL: "https://quiet.example/hook"},
	)
	clk := clock.NewMock()
	unblock := make(chan struct{})
	quietDelivered := make(chan struct{})
	var peaks concurrencyPeaks
	c, err := hookrelay.New(hookrelay.Config{
		Queue: queue, Ledger: store, Destinations: dests, Clock: clk,
		Concurrency: 8, PerDestinationConcurrency: 2,
		Sender: hookrelay.SenderFunc(func(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
			peaks.enter(p.Destination.ID)
			defer peaks.leave(p.Destination.ID)
			if p.Destination.ID == "busy" {
				<-unblock
			}
			return hookrelay.Delivered(204)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventDelivered && e.Delivery.DestinationID == "quiet" {
				close(quietDelivered)
			}
		}),
	})
	require.NoError(t, err)
	order := make([]string, 101)
	for i := range 100 {
		order[i] = "busy"
	}
	order[100] = "quiet"
	ids := enqueueInOrder(t, c, clk, order)
	require.NoError(t, c.Start(ctx))
	select {
	case <-quietDelivered:
	case <-time.After(10 * time.Second): // a hang, not a speed check
		t.Fatal("the quiet destination's delivery waited behind the busy one's backlog")
	}
	close(unblock)
	require.NoError(t, c.Stop(ctx))
	assert.LessOrEqual(t, peaks.peak(), 2, "the per-destination limit holds")
	pending := 0
	for _, id := range ids {
		d, err := store.Get(ctx, id)
		require.NoError(t, err)
		if d.State == hookrelay.StatePending {
			pending++
			assert.Equal(t, 1, d.Attempt, "a held claim handed back spent no attempt")
			continue
		}
		assert.Equal(t, hookrelay.StateDelivered, d.State)
	}
	got, err := store.Claim(ctx, hookrelay.ClaimParams{Now: clk.Now(), Limit: 500, LeaseFor: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, pending, len(got), "what was held when the worker stopped is claimable again at once")
}

// windowQueue is a blindQueue that hands out no more than window
// deliveries not yet settled (acknowledged or released), as RabbitMQ's
// prefetch window does: a claim while the window is full returns nothing.
type windowQueue struct {
	blindQueue
	window    int
	unsettled int
}

func (q *windowQueue) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	q.mu.Lock()
	p.Limit = min(p.Limit, q.window-q.unsettled)
	q.mu.Unlock()
	if p.Limit <= 0 {
		return nil, nil
	}
	cs, err := q.blindQueue.Claim(ctx, p)
	q.mu.Lock()
	q.unsettled += len(cs)
	q.mu.Unlock()
	return cs, err
}

func (q *windowQueue) settle() {
	q.mu.Lock()
	q.unsettled--
	q.mu.Unlock()
}

func (q *windowQueue) Acknowledge(ctx context.Context, p hookrelay.AckParams) error {
	defer q.settle()
	return q.Queue.Acknowledge(ctx, p)
}

func (q *windowQueue) Release(ctx context.Context, p hookrelay.ReleaseParams) error {
	defer q.settle()
	return q.Queue.Release(ctx, p)
}

// slowBatches is the memory store whose ledger batches take a while to
// commit, so that slots free (at the hand-over to the batch) well before
// their deliveries are acknowledged.
type slowBatches struct{ *memory.Store }

func (s slowBatches) RecordBatch(ctx context.Context, ws []hookrelay.LedgerWrite) ([]error, error) {
	time.Sleep(20 * time.Millisecond)
	return s.Store.RecordBatch(ctx, ws)
}

// A queue with a window of unsettled deliveries refuses claims while its
// window is full; it opens when the worker acknowledges, after the ledger
// batch commits — later than the slot frees. The worker claims again then,
// instead of waiting for its next poll (an hour here): with the library's
// default PollInterval (1s) RabbitMQ otherwise delivered a few hundred a
// second.
func TestWindowedQueueIsClaimedAgainWhenDeliveriesSettle(t *testing.T) {
	ctx := context.Background()
	store := memory.NewStore()
	queue := &windowQueue{blindQueue: blindQueue{Queue: store}, window: 4}
	dests := memory.NewDestinations(hookrelay.Destination{ID: "acct", URL: "https://example.com/hook"})
	var delivered sync.WaitGroup
	delivered.Add(40)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: queue, Ledger: slowBatches{store}, Destinations: dests,
		Concurrency: 4, PerDestinationConcurrency: 4, PollInterval: time.Hour,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventDelivered {
				delivered.Done()
			}
		}),
	})
	require.NoError(t, err)
	enqueueEvents(t, c, "acct", 40)
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	done := make(chan struct{})
	go func() { delivered.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang, not a speed check
		t.Fatal("the worker waited for its poll while the queue's window had opened")
	}
}
