package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
	"github.com/hookrelay/hookrelay/internal/benchenv"
	"github.com/hookrelay/hookrelay/internal/proccpu"
)

// leaseFor is the worker's LeaseFor: the library's default, named because
// the NATS backend's consumer AckWait is derived from it.
const leaseFor = hookrelay.DefaultLeaseFor

func benchBackend(ctx context.Context, name string, o options, rcpt *recipient, payload []byte, out io.Writer) (res backendResult, err error) {
	res = backendResult{name: name}
	dir, err := os.MkdirTemp("", "hookrelay-bench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	store, err := benchenv.Open(ctx, name, benchenv.Options{
		PostgresDSN: o.postgresDSN, MySQLDSN: o.mysqlDSN, Dir: dir, Drop: true,
		TablePrefix: fmt.Sprintf("bench_%d_%d_", os.Getpid(), time.Now().Unix()%1_000_000),
		NATSURL:     o.natsURL, AMQPURL: o.amqpURL,
		Concurrency: o.workers, LeaseFor: leaseFor,
	})
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := store.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close: %w", cerr)
		}
	}()
	if store.Note != "" {
		fmt.Fprintf(out, "%-9s (%s)\n", name, store.Note)
	}
	watch := &deliveredWatch{}
	client, sender, err := newClient(ctx, store, o, rcpt, watch)
	if err != nil {
		return res, err
	}
	defer sender.CloseIdleConnections()

	// Warm up: connections open, code paths and the store's caches hot.
	if _, _, err := drain(ctx, client, watch, "warm", min(o.n/10, 200), o.destinations, payload, ""); err != nil {
		return res, err
	}
	for i := range o.rounds {
		var r round
		r.ceiling, r.ceilingCPU, err = measureCeiling(ctx, rcpt.url, payload, o.workers, o.n)
		if err != nil {
			return res, err
		}
		profile := ""
		if o.cpuProfile != "" && i == 0 {
			profile = fmt.Sprintf("%s-%s.pprof", o.cpuProfile, name)
		}
		runtime.GC()
		sampler := startHeapSampler()
		elapsed, cpu, err := drain(ctx, client, watch, "drain", o.n, o.destinations, payload, profile)
		peak, _ := sampler.finish()
		if err != nil {
			return res, err
		}
		res.peakHeap = max(res.peakHeap, peak)
		r.throughput = float64(o.n) / elapsed.Seconds()
		r.cpu = cpu / time.Duration(o.n)
		res.rounds = append(res.rounds, r)
		fmt.Fprintf(out, "%-9s %-7d %10.0f %9s %12.0f %9s %6.2f\n", name, i+1, r.ceiling, r.ceilingCPU.Round(100*time.Nanosecond),
			r.throughput, r.cpu.Round(100*time.Nanosecond), r.ratio())
	}

	res.offered = o.latencyRate * res.median().throughput
	lat, err := latencyRun(ctx, client, watch, res.offered, o, payload)
	if err != nil {
		return res, err
	}
	res.p50, res.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
	delivered := float64(watch.kindCount(hookrelay.EventDelivered))
	fmt.Fprintf(out, "%-9s per delivery: %.2f Claim calls, %.2f claims, %.2f released (destination saturated or paused), %.2f worker errors\n", name,
		float64(watch.kindCount(claimCall))/delivered, float64(watch.kindCount(hookrelay.EventClaimed))/delivered, float64(watch.kindCount(hookrelay.EventReleased))/delivered,
		float64(watch.kindCount(hookrelay.EventWorkerError))/delivered)
	if n := watch.errors.Load(); n > 0 {
		return res, fmt.Errorf("%d attempts did not deliver (last: %v); the figures would not be end to end", n, watch.lastErr.Load())
	}
	return res, nil
}

func newClient(_ context.Context, store *benchenv.Store, o options, rcpt *recipient, obs *deliveredWatch) (*hookrelay.Client, idleCloser, error) {
	var sender idleCloser = newPlainSender(o.workers)
	if o.sender == "hookhttp" {
		s, err := benchenv.LoopbackSender(hookhttp.Config{})
		if err != nil {
			return nil, nil, err
		}
		sender = s
	}
	for i := range o.destinations {
		if err := store.Put(context.Background(), hookrelay.Destination{
			ID: destID(i), TenantID: "tenant_bench", URL: fmt.Sprintf("%s/d/%d", rcpt.url, i),
			Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		}); err != nil {
			return nil, nil, err
		}
	}
	client, err := hookrelay.New(hookrelay.Config{
		Queue: &countingQueue{Queue: store.Queue, watch: obs}, Ledger: store.Ledger, Destinations: store.Destinations, Sender: sender,
		// Only Concurrency is set: what is measured is what a user gets.
		Concurrency: o.workers, Observer: obs,
	})
	if err != nil {
		return nil, nil, err
	}
	return client, sender, nil
}

func destID(i int) string { return fmt.Sprintf("dest_%d", i) }

var runSeq atomic.Int64

// drain enqueues n deliveries with the worker stopped, then starts it and
// waits until all n are delivered, with a CPU profile written to profile
// if it is not empty. It returns the wall-clock time and the
// process CPU time from the start to the last delivered.
func drain(ctx context.Context, client *hookrelay.Client, watch *deliveredWatch, label string, n, dests int, payload []byte, profile string) (elapsed, cpu time.Duration, err error) {
	if err := enqueueBatch(ctx, client, label, n, dests, payload); err != nil {
		return 0, 0, err
	}
	reached := watch.expect(n)
	stopProfile, err := startProfile(profile)
	if err != nil {
		return 0, 0, err
	}
	defer stopProfile()
	start, cpu0 := time.Now(), proccpu.Self()
	if err := client.Start(ctx); err != nil {
		return 0, 0, err
	}
	defer func() { _ = client.Stop(context.Background()) }()
	err = waitReached(reached, watch, n)
	return time.Since(start), proccpu.Self() - cpu0, err
}

func waitReached(reached <-chan struct{}, watch *deliveredWatch, n int) error {
	// Progress, not speed, is what the timeout checks: it only fires when
	// nothing was delivered for a whole minute.
	last := -1
	for {
		select {
		case <-reached:
			return nil
		case <-time.After(time.Minute):
			got, _ := watch.snapshot()
			if got == last {
				return fmt.Errorf("stalled at %d of %d delivered (last problem: %v)", got, n, watch.lastErr.Load())
			}
			last = got
		}
	}
}

func enqueueBatch(ctx context.Context, client *hookrelay.Client, label string, n, dests int, payload []byte) error {
	run := runSeq.Add(1)
	const batch = 500
	params := make([]hookrelay.EnqueueParams, 0, batch)
	for i := range n {
		params = append(params, enqueueParams(fmt.Sprintf("evt_%s_%d_%d", label, run, i), i%dests, payload))
		if len(params) == batch || i == n-1 {
			if _, err := client.EnqueueMany(ctx, params); err != nil {
				return err
			}
			params = params[:0]
		}
	}
	return nil
}

func enqueueParams(eventID string, dest int, payload []byte) hookrelay.EnqueueParams {
	return hookrelay.EnqueueParams{
		EventID: eventID, TenantID: "tenant_bench", DestinationID: destID(dest),
		EventType: "lease.payment_recorded", Payload: payload,
	}
}

// latencyRun enqueues one delivery at a time at rate per second for
// o.latencyFor while the worker runs, and returns each delivery's
// enqueue-to-delivered latency.
func latencyRun(ctx context.Context, client *hookrelay.Client, watch *deliveredWatch, rate float64, o options, payload []byte) ([]time.Duration, error) {
	n := max(int(rate*o.latencyFor.Seconds()), 1)
	reached := watch.expect(n)
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = client.Stop(context.Background()) }()
	run := runSeq.Add(1)
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		if _, err := client.Enqueue(ctx, enqueueParams(fmt.Sprintf("evt_latency_%d_%d", run, i), i%o.destinations, payload)); err != nil {
			return nil, err
		}
	}
	if err := waitReached(reached, watch, n); err != nil {
		return nil, err
	}
	_, lat := watch.snapshot()
	return lat, nil
}

func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
