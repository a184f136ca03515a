// Package brokerbench is the end-to-end throughput benchmark shared by the
// broker queue adapters: deliveries per second through a running worker
// with a no-op sender, so that each broker is measured the same way.
package brokerbench

import (
	"cmp"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// Option changes what Run measures.
type Option func(*setting)

type setting struct {
	cfg   hookrelay.Config
	tuned bool
}

// Concurrency sets the worker's Concurrency, and nothing else: the
// per-destination limit stays the library's default, as users run it, and
// Run spreads the deliveries over enough destinations to fill the worker.
func Concurrency(n int) Option {
	return func(s *setting) { s.cfg.Concurrency = n }
}

// Tuned is the hand-tuned setting the library's defaults are compared
// with: every delivery to one destination and PerDestinationConcurrency
// equal to Concurrency, so no per-destination limit ever holds a claim
// back. Users do not run this; it is the best a worker of that
// Concurrency does. Measured on 2026-12-07 (docs/benchmarks.md,
// twenty-fifth session), the defaults delivered 0.94–1.09× of it on
// RabbitMQ and 1.02–1.03× on NATS, so it is not worth a default.
func Tuned() Option {
	return func(s *setting) { s.tuned = true }
}

// DefaultsVsTuned runs Run with the library's defaults (only Concurrency
// set) and with the hand-tuned setting (Tuned), at concurrency 16 and 64,
// as sub-benchmarks concurrency-N/defaults and concurrency-N/tuned. ports
// makes a fresh queue and ledger for one run at that concurrency.
func DefaultsVsTuned(b *testing.B, ports func(b *testing.B, concurrency int) (hookrelay.Queue, hookrelay.Ledger)) {
	for _, conc := range []int{16, 64} {
		for _, tuned := range []bool{false, true} {
			name, opts := "defaults", []Option{Concurrency(conc)}
			if tuned {
				name, opts = "tuned", append(opts, Tuned())
			}
			b.Run(fmt.Sprintf("concurrency-%d/%s", conc, name), func(b *testing.B) {
				Run(b, func(b *testing.B) (hookrelay.Queue, hookrelay.Ledger) { return ports(b, conc) }, opts...)
			})
		}
	}
}

// destinations is how many destinations Run spreads its deliveries over:
// with the default PerDestinationConcurrency (a quarter of Concurrency, at
// least 4), 16 keep every slot busy at the concurrencies the broker
// benchmarks ask for (16 and 64).
const destinations = 16

// Run enqueues b.N deliveries, then runs one worker until every one is
// delivered, and reports deliveries/s (worker only) and enqueues/s.
func Run(b *testing.B, ports func(b *testing.B) (hookrelay.Queue, hookrelay.Ledger), opts ...Option) {
	ctx := context.Background()
	q, ledger := ports(b)
	dests := memory.NewDestinations()
	for i := range destinations {
		if err := dests.Put(ctx, hookrelay.Destination{ID: fmt.Sprintf("dest_%d", i), TenantID: "t", URL: "https://bench.example/"}); err != nil {
			b.Fatal(err)
		}
	}
	var delivered atomic.Int64
	s := setting{cfg: hookrelay.Config{
		Queue: q, Ledger: ledger, Destinations: dests,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventDelivered {
				delivered.Add(1)
			}
		}),
	}}
	for _, o := range opts {
		o(&s)
	}
	cfg, spread := s.cfg, destinations
	if s.tuned {
		cfg.PerDestinationConcurrency = cmp.Or(cfg.Concurrency, hookrelay.DefaultConcurrency)
		spread = 1
	}
	c, err := hookrelay.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	const batch = 100
	for i := 0; i < b.N; i += batch {
		ps := make([]hookrelay.EnqueueParams, 0, batch)
		for j := i; j < min(i+batch, b.N); j++ {
			ps = append(ps, hookrelay.EnqueueParams{
				EventID: fmt.Sprintf("evt_%d", j), TenantID: "t", DestinationID: fmt.Sprintf("dest_%d", j%spread),
				EventType: "bench", Payload: []byte(`{"n":1}`),
			})
		}
		if _, err := c.EnqueueMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	enqueued := time.Since(start)
	start = time.Now()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for delivered.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if err := c.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(b.N)/enqueued.Seconds(), "enqueues/s")
}
