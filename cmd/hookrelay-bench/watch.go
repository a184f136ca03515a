package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookrelay/hookrelay"
)

// deliveredWatch counts EventDelivered and keeps each enqueue-to-delivered
// latency; it is the client's observer.
type deliveredWatch struct {
	mu        sync.Mutex
	count     int
	target    int
	reached   chan struct{}
	latencies []time.Duration
	errors    atomic.Int64
	lastErr   atomic.Value
	events    sync.Map // hookrelay.EventName → *atomic.Int64
}

func (d *deliveredWatch) kindCount(k hookrelay.EventName) int64 {
	v, ok := d.events.Load(k)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func (d *deliveredWatch) expect(n int) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.count, d.target, d.latencies = 0, n, make([]time.Duration, 0, n)
	d.reached = make(chan struct{})
	return d.reached
}

func (d *deliveredWatch) Observe(_ context.Context, e hookrelay.Event) {
	v, _ := d.events.LoadOrStore(e.Name, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	switch e.Name {
	case hookrelay.EventDelivered:
		d.mu.Lock()
		defer d.mu.Unlock()
		d.count++
		d.latencies = append(d.latencies, e.Time.Sub(e.Delivery.FirstQueuedAt))
		if d.count == d.target {
			close(d.reached)
		}
	case hookrelay.EventWorkerError, hookrelay.EventRetryScheduled, hookrelay.EventDeadLettered:
		d.errors.Add(1)
		d.lastErr.Store(fmt.Sprintf("%s %v %v", e.Name, e.Err, e.Result))
	}
}

func (d *deliveredWatch) snapshot() (int, []time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count, slices.Clone(d.latencies)
}

// countingQueue counts Claim calls: each is a transaction on a SQL backend.
type countingQueue struct {
	hookrelay.Queue
	watch *deliveredWatch
}

// claimCall is the pseudo event kind countingQueue counts under.
const claimCall hookrelay.EventName = "bench_claim_call"

func (q *countingQueue) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	q.watch.Observe(ctx, hookrelay.Event{Name: claimCall})
	return q.Queue.Claim(ctx, p)
}
