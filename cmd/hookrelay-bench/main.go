// Command hookrelay-bench measures hookrelay end to end: deliveries enqueued
// on a backend (memory, SQLite, PostgreSQL, or a broker queue — NATS
// JetStream, RabbitMQ — whose ledger and destinations are a fresh memory
// store), delivered by the worker through
// the real HTTP sender to an in-process loopback recipient that answers 204.
//
// In the same run it measures the ceiling — a plain net/http client loop
// with the same number of goroutines posting the same payload to the same
// recipient — and prints each backend's throughput as a ratio to it.
//
// Per backend it reports:
//
//   - drain throughput: N deliveries enqueued up front, then the worker
//     started; deliveries/s from start to the last delivered;
//   - latency: a producer enqueues one delivery at a time at a fixed
//     fraction of the measured throughput while the worker runs; p50 and
//     p99 of enqueue-to-delivered (the record's FirstQueuedAt to the
//     observer's EventDelivered);
//   - peak heap in use, sampled every 10 ms (the whole process, recipient
//     included).
//
// With memory among the backends it also measures the memory adapter's
// bytes per pending delivery and the heap while the worker drains
// --pending deliveries.
//
//	go run ./cmd/hookrelay-bench --backends memory,sqlite,postgres
//	go run ./cmd/hookrelay-bench --backends memory,nats,rabbitmq
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
	"github.com/hookrelay/hookrelay/internal/benchenv"
)

type options struct {
	backends     []string
	n            int
	workers      int
	destinations int
	payloadBytes int
	latencyRate  float64
	latencyFor   time.Duration
	rounds       int
	perDest      int
	sender       string
	pending      int
	postgresDSN  string
	natsURL      string
	amqpURL      string
	cpuProfile   string
}

func main() {
	var o options
	var backends string
	flag.StringVar(&backends, "backends", "memory", "comma-separated backends: "+strings.Join(benchenv.Backends, ", "))
	flag.IntVar(&o.n, "n", 20000, "deliveries per backend in the drain phase (and requests in the ceiling)")
	flag.IntVar(&o.workers, "workers", 50, "W: worker Concurrency, and goroutines in the ceiling loop")
	flag.IntVar(&o.destinations, "destinations", 10, "destinations the deliveries are spread over (all on the one recipient)")
	flag.IntVar(&o.payloadBytes, "payload", 512, "payload size in bytes")
	flag.Float64Var(&o.latencyRate, "latency-rate", 0.5, "latency phase: offered enqueue rate as a fraction of the backend's drain throughput")
	flag.IntVar(&o.perDest, "per-destination", 0, "worker PerDestinationConcurrency, for experiments (0: the library's default)")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of (ceiling, drain) per backend; the machine's other load makes single rounds noisy")
	flag.StringVar(&o.sender, "sender", "hookhttp", "the worker's sender: hookhttp (the real one) or plain (a bare net/http POST, to separate the engine's cost from the sender's)")
	flag.DurationVar(&o.latencyFor, "latency-for", 5*time.Second, "latency phase: how long the producer enqueues")
	flag.IntVar(&o.pending, "pending", 100000, "memory footprint: pending deliveries held by the memory adapter (0 skips)")
	flag.StringVar(&o.postgresDSN, "postgres-dsn", os.Getenv(benchenv.PostgresDSNEnv), "PostgreSQL DSN (default $"+benchenv.PostgresDSNEnv+")")
	flag.StringVar(&o.natsURL, "nats-url", benchenv.EnvOr(benchenv.NATSURLEnv, benchenv.DefaultNATSURL), "NATS server for the nats backend (default $"+benchenv.NATSURLEnv+" or "+benchenv.DefaultNATSURL+")")
	flag.StringVar(&o.amqpURL, "amqp-url", benchenv.EnvOr(benchenv.AMQPURLEnv, benchenv.DefaultAMQPURL), "RabbitMQ server for the rabbitmq backend (default $"+benchenv.AMQPURLEnv+" or the local guest account)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of each backend's drain phase to PREFIX-<backend>.pprof")
	flag.Parse()
	o.backends = strings.Split(backends, ",")
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "hookrelay-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	for _, b := range o.backends {
		if !slices.Contains(benchenv.Backends, b) {
			return fmt.Errorf("unknown backend %q (known: %s)", b, strings.Join(benchenv.Backends, ", "))
		}
	}
	if o.sender != "hookhttp" && o.sender != "plain" {
		return fmt.Errorf("--sender must be hookhttp or plain, not %q", o.sender)
	}
	if o.n < 1 || o.workers < 1 || o.destinations < 1 || o.rounds < 1 || o.payloadBytes < 0 {
		return errors.New("--n, --workers, --destinations and --rounds must be positive")
	}
	rcpt, err := startRecipient()
	if err != nil {
		return err
	}
	defer rcpt.close()
	payload := makePayload(o.payloadBytes)

	perDest := "the library's default"
	if o.perDest > 0 {
		perDest = fmt.Sprint(o.perDest)
	}
	fmt.Fprintf(out, "hookrelay-bench: %s, GOMAXPROCS=%d, W=%d, PerDestinationConcurrency %s, N=%d, %d destinations, %d-byte payload, %s sender, recipient %s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), o.workers, perDest, o.n, o.destinations, len(payload), o.sender, rcpt.url)
	fmt.Fprintf(out, "SQL stores open as the README shows (the adapter's connection pool defaults)\n")

	fmt.Fprintf(out, "load average at start: %s\n", loadAverage())
	defer func() { fmt.Fprintf(out, "load average at end: %s\n", loadAverage()) }()
	fmt.Fprintf(out, "\nEach round measures the ceiling (net/http, %d goroutines, %d requests) and then the backend's drain of %d deliveries;\n", o.workers, o.n, o.n)
	fmt.Fprintf(out, "the summary takes the median round by ratio. CPU is process CPU time (user+system) per request or delivery.\n\n")
	fmt.Fprintf(out, "%-9s %-7s %10s %9s %12s %9s %6s\n", "backend", "round", "ceiling/s", "CPU/req", "deliveries/s", "CPU/dlv", "ratio")
	var results []backendResult
	for _, name := range o.backends {
		r, err := benchBackend(ctx, name, o, rcpt, payload, out)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		results = append(results, r)
	}
	fmt.Fprintf(out, "\nsummary (median round; latency: one enqueue at a time at the offered rate, enqueue to delivered)\n")
	fmt.Fprintf(out, "%-9s %10s %12s %6s %10s %10s %10s %14s\n", "backend", "ceiling/s", "deliveries/s", "ratio", "offered/s", "p50", "p99", "peak heap inuse")
	for _, r := range results {
		m := r.median()
		fmt.Fprintf(out, "%-9s %10.0f %12.0f %6.2f %10.0f %10s %10s %10.1f MiB\n", r.name, m.ceiling, m.throughput, m.ratio(),
			r.offered, r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), mib(r.peakHeap))
	}

	if slices.Contains(o.backends, "memory") && o.pending > 0 {
		f, err := memoryFootprint(ctx, o, rcpt, payload)
		if err != nil {
			return fmt.Errorf("memory footprint: %w", err)
		}
		fmt.Fprintf(out, "\nmemory adapter, %d pending deliveries with %d-byte payloads:\n", o.pending, len(payload))
		fmt.Fprintf(out, "  bytes per pending delivery (live heap after GC): %.0f\n", f.bytesPerPending)
		fmt.Fprintf(out, "  live heap holding them, worker stopped: %.1f MiB\n", mib(f.heldLive))
		fmt.Fprintf(out, "  worker draining them: peak live heap %.1f MiB, peak heap in use %.1f MiB, %.0f deliveries/s\n",
			mib(f.drainPeakLive), mib(f.drainPeakInuse), f.drainThroughput)
	}
	return nil
}

// loadAverage is the machine's 1, 5 and 15 minute load: the benchmark
// shares its cores with whatever else runs, and says so.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// makePayload returns a JSON object of exactly n bytes (at least the
// smallest such object).
func makePayload(n int) []byte {
	head := `{"type":"lease.payment_recorded","pad":"`
	tail := `"}`
	pad := max(n-len(head)-len(tail), 0)
	return []byte(head + strings.Repeat("x", pad) + tail)
}

// recipient is the loopback HTTP server every request goes to. It answers
// 204 after reading the body.
type recipient struct {
	url      string
	srv      *http.Server
	done     chan struct{}
	requests atomic.Int64
}

func startRecipient() (*recipient, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &recipient{url: "http://" + ln.Addr().String(), done: make(chan struct{})}
	r.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			_, _ = io.Copy(io.Discard, req.Body)
			r.requests.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln) // returns ErrServerClosed on close
	}()
	return r, nil
}

func (r *recipient) close() {
	_ = r.srv.Close()
	<-r.done
}

// measureCeiling posts payload n times from w goroutines with a plain
// net/http client and returns requests/s. A short warm-up opens the
// connections first, as the worker's sender has them open by the time it
// is measured.
func measureCeiling(ctx context.Context, url string, payload []byte, w, n int) (perSec float64, cpu time.Duration, err error) {
	tr := &http.Transport{MaxIdleConns: w, MaxIdleConnsPerHost: w, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	post := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/ceiling", strings.NewReader(string(payload)))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("ceiling: recipient answered %d", resp.StatusCode)
		}
		return nil
	}
	loop := func(total int) (time.Duration, error) {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, w)
		start := time.Now()
		for range w {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(total) {
					if err := post(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(errs)
		return elapsed, <-errs
	}
	if _, err := loop(min(n, 10*w)); err != nil {
		return 0, 0, err
	}
	cpu0 := processCPU()
	elapsed, err := loop(n)
	if err != nil {
		return 0, 0, err
	}
	return float64(n) / elapsed.Seconds(), (processCPU() - cpu0) / time.Duration(n), nil
}

// processCPU returns the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapSampler samples the heap every 10 ms until stopped and keeps the
// peaks. It reads runtime/metrics, which does not stop the world.
type heapSampler struct {
	stop      chan struct{}
	done      chan struct{}
	peakInuse uint64
	peakLive  uint64
}

func startHeapSampler() *heapSampler {
	s := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			inuse, live := readHeap()
			s.peakInuse, s.peakLive = max(s.peakInuse, inuse), max(s.peakLive, live)
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops sampling and returns the peaks: heap in use (HeapInuse:
// spans holding objects) and live heap (marked live by the last GC).
func (s *heapSampler) finish() (inuse, live uint64) {
	close(s.stop)
	<-s.done
	return s.peakInuse, s.peakLive
}

// round is one measurement of the ceiling followed by one drain.
type round struct {
	ceiling    float64       // requests/s
	ceilingCPU time.Duration // process CPU per request
	throughput float64       // deliveries/s
	cpu        time.Duration // process CPU per delivery
}

func (r round) ratio() float64 { return r.throughput / r.ceiling }

type backendResult struct {
	name     string
	rounds   []round
	offered  float64
	p50, p99 time.Duration
	peakHeap uint64 // peak heap in use over the drains
}

// median returns the round with the median ratio.
func (b backendResult) median() round {
	rs := slices.Clone(b.rounds)
	slices.SortFunc(rs, func(x, y round) int {
		switch {
		case x.ratio() < y.ratio():
			return -1
		case x.ratio() > y.ratio():
			return 1
		}
		return 0
	})
	return rs[len(rs)/2]
}

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

// leaseFor is the worker's LeaseFor, hookrelay's default, set explicitly
// because the NATS backend's consumer AckWait is derived from it.
const leaseFor = 2 * time.Minute

func benchBackend(ctx context.Context, name string, o options, rcpt *recipient, payload []byte, out io.Writer) (res backendResult, err error) {
	res = backendResult{name: name}
	dir, err := os.MkdirTemp("", "hookrelay-bench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	store, err := benchenv.Open(ctx, name, benchenv.Options{
		PostgresDSN: o.postgresDSN, Dir: dir, Drop: true,
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

// idleCloser is a sender that keeps connections.
type idleCloser interface {
	hookrelay.Sender
	CloseIdleConnections()
}

// plainSender posts the payload as the ceiling loop does, with no signing,
// headers or classification beyond 2xx: with --sender plain the difference
// to the ceiling is the engine and the store alone.
type plainSender struct {
	client *http.Client
	tr     *http.Transport
}

func newPlainSender(w int) *plainSender {
	tr := &http.Transport{MaxIdleConns: w, MaxIdleConnsPerHost: w, IdleConnTimeout: time.Minute}
	return &plainSender{client: &http.Client{Transport: tr}, tr: tr}
}

func (s *plainSender) CloseIdleConnections() { s.tr.CloseIdleConnections() }

func (s *plainSender) Send(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Destination.URL, bytes.NewReader(p.Delivery.Payload))
	if err != nil {
		return hookrelay.Permanent(hookhttp.ReasonInvalidURL)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return hookrelay.Unknown(hookrelay.ReasonNetworkError)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return hookrelay.Retryable(hookrelay.ReasonUnexpectedStatus).WithStatus(resp.StatusCode)
	}
	return hookrelay.Delivered(resp.StatusCode)
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
		Concurrency: o.workers, LeaseFor: leaseFor,
		// The library's default unless --per-destination says otherwise:
		// what is measured is what a user gets.
		PerDestinationConcurrency: o.perDest,
		Observer:                  obs,
	})
	if err != nil {
		return nil, nil, err
	}
	return client, sender, nil
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
	start, cpu0 := time.Now(), processCPU()
	if err := client.Start(ctx); err != nil {
		return 0, 0, err
	}
	defer func() { _ = client.Stop(context.Background()) }()
	err = waitReached(reached, watch, n)
	return time.Since(start), processCPU() - cpu0, err
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

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(int(p*float64(len(s))), len(s)-1)]
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
