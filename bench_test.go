package hookrelay_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// benchPayload is a typical small webhook body.
var benchPayload = []byte(`{"type":"lease.payment_recorded","data":{"property":"prop_204","lease":"lease_881","payment":"pay_7319","amount_cents":125000,"currency":"EUR"}}`)

// newBenchClient returns a client on fresh memory adapters whose sender
// answers res at once.
func newBenchClient(b *testing.B, res hookrelay.Result, obs hookrelay.Observer) (*hookrelay.Client, *memory.Store) {
	return newBenchClientLimit(b, res, obs, 16)
}

// newBenchClientLimit is newBenchClient with the given per-destination
// limit (the worker's Concurrency is 16).
func newBenchClientLimit(b *testing.B, res hookrelay.Result, obs hookrelay.Observer, perDest int, tweaks ...func(*hookrelay.Config, *hookrelay.Destination)) (*hookrelay.Client, *memory.Store) {
	b.Helper()
	store := memory.NewStore()
	dest := hookrelay.Destination{ID: "acct", URL: "https://example.com/hook"}
	cfg := hookrelay.Config{
		Queue: store, Ledger: store,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return res }),
		Policy: &hookrelay.Policy{Version: "bench", MaxAttempts: 1 << 30, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
		// Every slot is open to the one destination: the benchmark measures
		// the engine, not the per-destination limit.
		Concurrency: 16, PerDestinationConcurrency: perDest,
		Observer: obs,
	}
	for _, t := range tweaks {
		t(&cfg, &dest)
	}
	dests := []hookrelay.Destination{dest}
	for i := 1; i < benchDestinations; i++ {
		d := dest
		d.ID = fmt.Sprintf("%s_%d", dest.ID, i)
		dests = append(dests, d)
	}
	cfg.Destinations = memory.NewDestinations(dests...)
	c, err := hookrelay.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c, store
}

// benchDestinations is how many destinations newBenchClientLimit sets up
// (acct, acct_1, acct_2, …) and enqueueBench spreads deliveries over, in
// turn; 1 unless a benchmark sets it.
var benchDestinations = 1

func enqueueBench(b *testing.B, c *hookrelay.Client, n int) {
	b.Helper()
	const batch = 1000
	params := make([]hookrelay.EnqueueParams, 0, batch)
	for i := 0; i < n; i++ {
		dest := "acct"
		if k := i % benchDestinations; k > 0 {
			dest = fmt.Sprintf("acct_%d", k)
		}
		params = append(params, hookrelay.EnqueueParams{
			EventID: fmt.Sprintf("evt_%d", i), TenantID: "tenant_1", DestinationID: dest,
			EventType: "lease.payment_recorded", Payload: benchPayload,
		})
		if len(params) == batch || i == n-1 {
			if _, err := c.EnqueueMany(context.Background(), params); err != nil {
				b.Fatal(err)
			}
			params = params[:0]
		}
	}
}

// BenchmarkProcess measures one run of the state machine (Client.Process)
// on memory adapters with a sender that answers at once: the engine's own
// cost per attempt, without I/O. Deliveries are enqueued and claimed before
// the timer starts.
func BenchmarkProcess(b *testing.B) {
	for _, tc := range []struct {
		name string
		res  hookrelay.Result
	}{
		{"delivered", hookrelay.Delivered(204)},
		{"retry_scheduled", hookrelay.Retryable("server_error").WithStatus(503)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			c, store := newBenchClient(b, tc.res, nil)
			enqueueBench(b, c, b.N)
			claims, err := store.Claim(ctx, hookrelay.ClaimParams{
				Now: c.Clock().Now(), Limit: b.N, LeaseFor: time.Hour, Holder: "bench",
			})
			if err != nil {
				b.Fatal(err)
			}
			if len(claims) != b.N {
				b.Fatalf("claimed %d of %d", len(claims), b.N)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := c.Process(ctx, claims[i]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWorker measures the whole worker on memory adapters with a
// sender that answers at once: claim loop, per-destination accounting,
// Process and acknowledgement. ns/op is per delivered delivery. All
// deliveries go to one destination: with a per-destination limit of 16 (the
// worker's Concurrency) it never saturates; with the default 4 it does, and
// the claim loop must not spin on the backlog it cannot run.
func BenchmarkWorker(b *testing.B) {
	for _, perDest := range []int{16, 4} {
		b.Run(fmt.Sprintf("per_destination=%d", perDest), func(b *testing.B) { benchmarkWorker(b, perDest) })
	}
}

// BenchmarkWorkerManyDestinations is BenchmarkWorker with the deliveries
// spread over many destinations in turn, each with the default
// per-destination limit of 4 against the worker's 16 slots: the worker then
// holds claims for many destinations at once, and its per-slot bookkeeping
// (which held claim to start next) looks at each of them. With 5,000, more
// destinations are in use within the destination cache's TTL than its
// sweep size (expiring). The own_limit cases give every destination a
// MaxConcurrency of its own (3), which the worker learns at send time.
func BenchmarkWorkerManyDestinations(b *testing.B) {
	for _, n := range []int{10, 200, 5000} {
		b.Run(fmt.Sprintf("destinations=%d", n), func(b *testing.B) {
			benchDestinations = n
			defer func() { benchDestinations = 1 }()
			benchmarkWorker(b, 4)
		})
		b.Run(fmt.Sprintf("destinations=%d/own_limit", n), func(b *testing.B) {
			benchDestinations = n
			defer func() { benchDestinations = 1 }()
			benchmarkWorker(b, 4, func(_ *hookrelay.Config, d *hookrelay.Destination) { d.MaxConcurrency = 3 })
		})
	}
}

// BenchmarkWorkerGuarded is BenchmarkWorker's per_destination=16 case
// with every guard on but never tripped: a rate limit far above the
// benchmark's pace (a token taken in the store on every send), a circuit
// breaker and auto-disable. Against BenchmarkWorker it is the guard's cost
// per delivery when a limit is set; BenchmarkWorker itself is the cost when
// none is.
func BenchmarkWorkerGuarded(b *testing.B) {
	benchmarkWorker(b, 16, func(cfg *hookrelay.Config, d *hookrelay.Destination) {
		d.MaxPerSecond = 1e9
		cfg.CircuitFailureThreshold, cfg.DisableAfterFailingFor = 5, 24*time.Hour
	})
}

func benchmarkWorker(b *testing.B, perDest int, tweaks ...func(*hookrelay.Config, *hookrelay.Destination)) {
	defer goleak.VerifyNone(b, goleak.IgnoreCurrent())
	var delivered atomic.Int64
	done := make(chan struct{})
	var target int64
	obs := hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
		if e.Name == hookrelay.EventDelivered && delivered.Add(1) == atomic.LoadInt64(&target) {
			close(done)
		}
	})
	claims := &claimCounter{}
	tweaks = append(tweaks, func(cfg *hookrelay.Config, _ *hookrelay.Destination) {
		claims.Queue = cfg.Queue
		cfg.Queue = claims
	})
	c, _ := newBenchClientLimit(b, hookrelay.Delivered(204), obs, perDest, tweaks...)
	enqueueBench(b, c, b.N)
	atomic.StoreInt64(&target, int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatalf("delivered %d of %d within a minute", delivered.Load(), b.N)
	}
	b.StopTimer()
	if err := c.Stop(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/float64(max(claims.calls.Load(), 1)), "deliveries/claim")
}

// claimCounter counts a Queue's Claim calls; it unwraps to the Queue, so
// the client still finds the store's abilities.
type claimCounter struct {
	hookrelay.Queue
	calls atomic.Int64
}

func (q *claimCounter) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	q.calls.Add(1)
	return q.Queue.Claim(ctx, p)
}

func (q *claimCounter) Unwrap() hookrelay.Queue { return q.Queue }
