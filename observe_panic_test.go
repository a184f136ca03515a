package hookrelay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// An Observer that panics (a metrics or logging bug) must not take the
// worker, and with it the process, down: the transition it was told about
// is already recorded, the worker goes on delivering, and the panic is
// reported as a worker error (op observer.observe) to the observers.
func TestAPanickingObserverDoesNotStopTheWorker(t *testing.T) {
	const n = 4
	store := memory.NewStore()
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	delivered, panicsReported := 0, 0
	allDone := make(chan struct{})
	counter := hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Name {
		case hookrelay.EventDelivered:
			delivered++
		case hookrelay.EventWorkerError:
			var oe *hookrelay.OpError
			if errors.As(e.Err, &oe) && oe.Op == "observer.observe" {
				panicsReported++
			}
		}
		if delivered == n && panicsReported >= 2*n && allDone != nil {
			close(allDone)
			allDone = nil
		}
	})
	done := allDone
	buggy := hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
		if e.Name == hookrelay.EventClaimed || e.Name == hookrelay.EventDelivered {
			panic(fmt.Sprintf("observer bug on %s", e.Name))
		}
	})
	client, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: memory.NewDestinations(hookrelay.Destination{ID: "acme"}), Clock: mock,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			return hookrelay.Delivered(200)
		}),
		Concurrency: 2,
		Observer:    hookrelay.Observers{counter, buggy},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		if _, err := client.Enqueue(ctx, hookrelay.EnqueueParams{
			EventID: fmt.Sprintf("evt-%d", i), TenantID: "t", DestinationID: "acme", EventType: "x",
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The deadline only bounds a hang; nothing is timed.
	guard, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	select {
	case <-done:
	case <-guard.Done():
		mu.Lock()
		t.Errorf("%d of %d delivered, %d panics reported", delivered, n, panicsReported)
		mu.Unlock()
	}
	if err := client.Stop(guard); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		d, err := client.Delivery(ctx, hookrelay.DeliveryID(fmt.Sprintf("evt-%d", i), "acme"))
		if err != nil {
			t.Fatal(err)
		}
		if d.Delivery.State != hookrelay.StateDelivered {
			t.Errorf("evt-%d: state %s, want delivered", i, d.Delivery.State)
		}
	}
}

// Observers fans out to every observer even when one panics (a metrics
// bug must not silence the logs of the same event); the panic is passed on
// once they all ran, so the client reports it.
func TestObserversReachEveryObserverWhenOnePanics(t *testing.T) {
	var seen []string
	record := func(name string) hookrelay.Observer {
		return hookrelay.ObserverFunc(func(context.Context, hookrelay.Event) { seen = append(seen, name) })
	}
	boom := hookrelay.ObserverFunc(func(context.Context, hookrelay.Event) { panic("metrics bug") })
	obs := hookrelay.Observers{record("first"), boom, record("logs"), boom, record("traces")}
	var got any
	func() {
		defer func() { got = recover() }()
		obs.Observe(context.Background(), hookrelay.Event{Name: hookrelay.EventDelivered})
	}()
	if got != "metrics bug" {
		t.Errorf("recovered %v, want the observer's panic passed on", got)
	}
	if fmt.Sprint(seen) != "[first logs traces]" {
		t.Errorf("observers reached: %v, want all three that do not panic", seen)
	}
}
