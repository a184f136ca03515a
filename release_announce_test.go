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

// releaseRecorder is a Queue that records whether each Release asked to
// be announced, by delivery ID.
type releaseRecorder struct {
	hookrelay.Queue
	mu       sync.Mutex
	announce map[string][]bool
}

func (q *releaseRecorder) Unwrap() hookrelay.Queue { return q.Queue }

func (q *releaseRecorder) Release(ctx context.Context, p hookrelay.ReleaseParams) error {
	q.mu.Lock()
	q.announce[p.ID] = append(q.announce[p.ID], p.Announce)
	q.mu.Unlock()
	return q.Queue.Release(ctx, p)
}

// The releases a worker makes when it stops — the claims it holds (as one
// batch, announced once), the send its StopAndCancel cut short — ask the
// queue to announce them (ReleaseParams.Announce), so workers in other
// processes take them at once; the releases of normal operation (a held claim handed back because
// its destination had no room for it in time) do not, so they wake no one.
func TestWorkerAnnouncesTheReleasesItMakesWhenItStopsOnly(t *testing.T) {
	ctx := context.Background()
	store := memory.NewStore()
	dests := memory.NewDestinations()
	require.NoError(t, dests.Put(ctx, hookrelay.Destination{ID: "slow", URL: "https://example.com/hook"}))
	clk := clock.NewMock()
	clk.Set(time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC))
	const leaseFor = 2 * time.Minute
	q := &releaseRecorder{Queue: store, announce: map[string][]bool{}}
	started := make(chan int, 8)
	unblock := make(chan struct{})
	var (
		mu       sync.Mutex
		sends    int
		released = map[string][]string{} // reasons by delivery ID
	)
	delivered := make(chan string, 8)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: q, Ledger: store, Destinations: dests, Clock: clk,
		Concurrency: 1, PerDestinationConcurrency: 1, LeaseFor: leaseFor,
		Sender: hookrelay.SenderFunc(func(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
			mu.Lock()
			sends++
			n := sends
			mu.Unlock()
			switch n {
			case 1: // holds the worker until its other claims are stale
				started <- n
				<-unblock
			case 4: // holds the worker until StopAndCancel
				started <- n
				<-ctx.Done()
				return hookrelay.Unknown(hookrelay.ReasonSenderError)
			}
			return hookrelay.Delivered(204)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			switch e.Name {
			case hookrelay.EventReleased:
				mu.Lock()
				released[e.Delivery.ID] = append(released[e.Delivery.ID], e.Reason)
				mu.Unlock()
			case hookrelay.EventDelivered:
				delivered <- e.Delivery.ID
			}
		}),
	})
	require.NoError(t, err)
	enqueue := func(prefix string) {
		var params []hookrelay.EnqueueParams
		for i := range 3 {
			params = append(params, hookrelay.EnqueueParams{EventID: fmt.Sprintf("%s%d", prefix, i), TenantID: "t",
				DestinationID: "slow", EventType: "x", Payload: []byte("{}")})
		}
		_, err := c.EnqueueMany(ctx, params)
		require.NoError(t, err)
	}
	waitStarted := func(n int) {
		t.Helper()
		select {
		case got := <-started:
			require.Equal(t, n, got)
		case <-time.After(10 * time.Second): // a hang, not a speed check
			t.Fatalf("send %d did not start", n)
		}
	}

	// Normal operation: the two claims held behind the first send have
	// less than half their lease left when it ends, and are handed back.
	enqueue("run")
	require.NoError(t, c.Start(ctx))
	waitStarted(1)
	clk.Add(leaseFor/2 + time.Second)
	close(unblock)
	for range 3 {
		select {
		case <-delivered:
		case <-time.After(10 * time.Second):
			t.Fatal("not every delivery was delivered")
		}
	}
	// Stopping: one send in flight, two claims held behind it.
	enqueue("stop")
	waitStarted(4)
	require.NoError(t, c.StopAndCancel(ctx))

	mu.Lock()
	defer mu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	var quiet, cut, held, heldAnnounced int
	for id, reasons := range released {
		require.Len(t, q.announce[id], len(reasons), "%s: one Release per release observed", id)
		for i, reason := range reasons {
			switch reason {
			case hookrelay.ReasonDestinationSaturated:
				assert.False(t, q.announce[id][i], "%s: a release for want of room is not announced", id)
				quiet++
			case hookrelay.ReasonSenderError:
				assert.True(t, q.announce[id][i], "%s: the send cut short at stop is announced", id)
				cut++
			case hookrelay.ReasonWorkerStopped:
				held++
				if q.announce[id][i] {
					heldAnnounced++
				}
			default:
				t.Errorf("%s: unexpected release reason %q", id, reason)
			}
		}
	}
	assert.Equal(t, 2, quiet, "the two stale held claims were handed back in normal operation")
	assert.Equal(t, 1, cut, "the send cut short was handed back at stop")
	assert.Equal(t, 2, held, "the two held claims were handed back at stop")
	assert.Equal(t, 1, heldAnnounced, "the held claims handed back at stop were announced once, as a batch")
}

// The claims a stopping worker holds are handed back as one batch, and the
// batch is announced once (ReleaseParams.Announce on one Release): on
// PostgreSQL one NOTIFY, not one per claim, each waking every listening
// worker.
func TestWorkerAnnouncesTheClaimsItHandsBackAtStopOnce(t *testing.T) {
	ctx := context.Background()
	store := memory.NewStore()
	dests := memory.NewDestinations()
	require.NoError(t, dests.Put(ctx, hookrelay.Destination{ID: "slow", URL: "https://example.com/hook"}))
	clk := clock.NewMock()
	clk.Set(time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC))
	q := &releaseRecorder{Queue: store, announce: map[string][]bool{}}
	started := make(chan struct{}, 1)
	unblock := make(chan struct{})
	c, err := hookrelay.New(hookrelay.Config{
		Queue: q, Ledger: store, Destinations: dests, Clock: clk,
		Concurrency: 1, PerDestinationConcurrency: 1,
		Sender: hookrelay.SenderFunc(func(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
			select {
			case started <- struct{}{}:
				<-unblock // the first send holds the worker while it stops
			default:
			}
			return hookrelay.Delivered(204)
		}),
	})
	require.NoError(t, err)
	var params []hookrelay.EnqueueParams
	for i := range 4 {
		params = append(params, hookrelay.EnqueueParams{EventID: fmt.Sprintf("evt_%d", i), TenantID: "t",
			DestinationID: "slow", EventType: "x", Payload: []byte("{}")})
	}
	_, err = c.EnqueueMany(ctx, params)
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	select {
	case <-started:
	case <-time.After(10 * time.Second): // a hang, not a speed check
		t.Fatal("the first send did not start")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(ctx) }()
	require.Eventually(t, func() bool { // the held claims are handed back before the send ends
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.announce) > 0
	}, 10*time.Second, time.Millisecond)
	close(unblock)
	require.NoError(t, <-stopped)

	q.mu.Lock()
	defer q.mu.Unlock()
	releases, announced := 0, 0
	for _, as := range q.announce {
		for _, a := range as {
			releases++
			if a {
				announced++
			}
		}
	}
	require.Greater(t, releases, 1, "the worker held several claims behind its send")
	assert.Equal(t, 1, announced, "%d claims handed back at stop, announced once", releases)
}
