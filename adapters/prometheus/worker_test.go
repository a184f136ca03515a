package hookprom_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	hookprom "github.com/hookrelay/hookrelay/adapters/prometheus"
	hookslog "github.com/hookrelay/hookrelay/adapters/slog"
)

// TestCountsUnderTheRunningWorker runs the real worker (several attempt
// goroutines observing at once) with the metrics and a logger fanned out by
// hookrelay.Observers, and checks every delivery is counted exactly once.
func TestCountsUnderTheRunningWorker(t *testing.T) {
	const n = 24
	store := memory.NewStore()
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	reg := prometheus.NewRegistry()
	metrics, err := hookprom.New(hookprom.Config{Registerer: reg, Stats: store, Clock: mock})
	if err != nil {
		t.Fatal(err)
	}
	var delivered atomic.Int64
	allDone := make(chan struct{})
	counter := hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
		if e.Name == hookrelay.EventDelivered && delivered.Add(1) == n {
			close(allDone)
		}
	})
	logs := hookslog.New(hookslog.Config{Logger: slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	dests := memory.NewDestinations(
		hookrelay.Destination{ID: "acme"}, hookrelay.Destination{ID: "globex"}, hookrelay.Destination{ID: "initech"},
	)
	client, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: dests, Clock: mock,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			return hookrelay.Delivered(200)
		}),
		Concurrency: 8, PerDestinationConcurrency: 3,
		Observer: hookrelay.Observers{metrics, logs, counter},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		dest := []string{"acme", "globex", "initech"}[i%3]
		if _, err := client.Enqueue(ctx, hookrelay.EnqueueParams{
			EventID: fmt.Sprintf("evt-%d", i), TenantID: "tenant-1", DestinationID: dest, EventType: "x",
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
	case <-allDone:
	case <-guard.Done():
		t.Errorf("only %d of %d deliveries delivered", delivered.Load(), n)
	}
	if err := client.Stop(guard); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP hookrelay_attempts_total Finished attempts by destination, by the decision after them (delivered, retry_scheduled, permanently_rejected, dead_lettered) and by the attempt's reason.
# TYPE hookrelay_attempts_total counter
hookrelay_attempts_total{decision="delivered",destination="acme",reason=""} 8
hookrelay_attempts_total{decision="delivered",destination="globex",reason=""} 8
hookrelay_attempts_total{decision="delivered",destination="initech",reason=""} 8
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hookrelay_attempts_total"); err != nil {
		t.Error(err)
	}
	if got, err := testutil.GatherAndCount(reg, "hookrelay_pending_deliveries"); err != nil || got != 0 {
		t.Errorf("pending series after all delivered: %d (%v), want none", got, err)
	}
}
