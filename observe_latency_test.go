package hookrelay_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// clockedDestinations takes lookup of the clock's time for every read, as a
// busy store does.
type clockedDestinations struct {
	hookrelay.Destinations
	clock  *clock.Mock
	lookup time.Duration
}

func (s clockedDestinations) Destination(ctx context.Context, id string) (hookrelay.Destination, error) {
	s.clock.Add(s.lookup)
	return s.Destinations.Destination(ctx, id)
}

// EventAttemptFinished's Latency is the send's duration, what the latency
// histograms report as the recipient's: the port calls made before the
// send (here a destination read that takes 2s) are not part of it.
func TestAttemptLatencyIsTheSendAlone(t *testing.T) {
	ctx := context.Background()
	store := memory.NewStore()
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var latencies []time.Duration
	client, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Clock: mock,
		Destinations: clockedDestinations{memory.NewDestinations(hookrelay.Destination{ID: "acme"}), mock, 2 * time.Second},
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			mock.Add(150 * time.Millisecond)
			return hookrelay.Delivered(200)
		}),
		DestinationCacheTTL: -1,
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventAttemptFinished {
				latencies = append(latencies, e.Latency)
			}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "evt-1", TenantID: "t", DestinationID: "acme", EventType: "x"}); err != nil {
		t.Fatal(err)
	}
	claims, err := store.Claim(ctx, hookrelay.ClaimParams{Now: mock.Now(), Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v, %d claims", err, len(claims))
	}
	if err := client.Process(ctx, claims[0]); err != nil {
		t.Fatal(err)
	}
	if len(latencies) != 1 || latencies[0] != 150*time.Millisecond {
		t.Errorf("latencies %v, want [150ms]: the send alone", latencies)
	}
}
