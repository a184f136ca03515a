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
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

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
	sender       string
	pending      int
	postgresDSN  string
	mysqlDSN     string
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
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of (ceiling, drain) per backend; the machine's other load makes single rounds noisy")
	flag.StringVar(&o.sender, "sender", "hookhttp", "the worker's sender: hookhttp (the real one) or plain (a bare net/http POST, to separate the engine's cost from the sender's)")
	flag.DurationVar(&o.latencyFor, "latency-for", 5*time.Second, "latency phase: how long the producer enqueues")
	flag.IntVar(&o.pending, "pending", 100000, "memory footprint: pending deliveries held by the memory adapter (0 skips)")
	flag.StringVar(&o.postgresDSN, "postgres-dsn", os.Getenv(benchenv.PostgresDSNEnv), "PostgreSQL DSN (default $"+benchenv.PostgresDSNEnv+")")
	flag.StringVar(&o.mysqlDSN, "mysql-dsn", os.Getenv(benchenv.MySQLDSNEnv), "MySQL/MariaDB DSN (default $"+benchenv.MySQLDSNEnv+")")
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

	fmt.Fprintf(out, "hookrelay-bench: %s, GOMAXPROCS=%d, W=%d (Concurrency; every other setting is the library's default), N=%d, %d destinations, %d-byte payload, %s sender, recipient %s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), o.workers, o.n, o.destinations, len(payload), o.sender, rcpt.url)
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
