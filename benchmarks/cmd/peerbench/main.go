// Command peerbench measures hookrelay side by side with its peer, River (a
// PostgreSQL job queue), configured as each project's README tells users
// to, in one run, against one in-process loopback receiver that answers 204
// after reading the body.
//
// Throughput (--mode throughput): every system delivers N deliveries per
// round (fewer for a system too slow to deliver N within --round-limit),
// queued before its worker starts, with W workers, spread over 10
// destinations (URL paths on the one receiver), 512-byte JSON payload:
//
//   - ceiling: a plain net/http client loop, W goroutines;
//   - river, river-1ms: River on PostgreSQL, MaxWorkers W, with its default
//     config and with FetchCooldown 1 ms; the worker POSTs each job's
//     payload with a plain net/http client; its tables in a fresh schema;
//   - memory, sqlite, postgres, mysql: hookrelay on memory.NewStore,
//     hooksql.OpenSQLite and hooksql.Open (mysql only when named in
//     --systems, with --mysql-dsn), with the real hookhttp sender
//     (its SSRF guard opened for loopback only) and the library's defaults
//     for everything but Concurrency (W);
//   - memory-tuned, sqlite-tuned, postgres-tuned (only when named): the
//     same with the settings a user might tune by hand — every slot open to
//     any destination (PerDestinationConcurrency W) and, on SQL, a pool of
//     4W connections instead of the adapter's default — to check the
//     defaults against them;
//   - sender, fasthttp (only when named): the HTTP send alone, to split
//     the gap between the ceiling and hookrelay memory — hookhttp.Sender's
//     Send from W goroutines with no worker or store, and the same headers
//     and signature sent with github.com/valyala/fasthttp's client (only
//     the benchmark module uses it), which writes and reads each request on
//     the calling goroutine.
//
// The systems take turns within each round, so a change in the machine's
// other load reaches all of them; the summary is the median over rounds,
// with the ratios to the ceiling and to River (FetchCooldown 1 ms) taken
// within each round. Each round also reports the CPU time per delivery:
// this process's (workers and receiver) and, for the systems on
// PostgreSQL or MySQL, that of the database server's processes on this
// machine. On a
// shared machine whose other tenants take CPU time (steal) the rates swing
// from round to round; the CPU per delivery, and the ratios taken from it,
// move far less, and are the throughput ratios an otherwise idle machine
// with every system CPU-bound would show.
//
// Latency (--mode latency): a producer in this process enqueues one
// delivery at a time at a fixed rate on PostgreSQL while a worker in
// another process (this binary, spawned with --child) delivers; the
// receiver, in this process, keeps each delivery's first arrival, and the
// figure is enqueue call → first arrival, p50 and p99.
//
//	cd benchmarks
//	HOOKRELAY_TEST_POSTGRES_DSN='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go run ./cmd/peerbench
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/hookrelay/hookrelay/internal/benchenv"
)

type options struct {
	systems      []string
	mode         string
	workers      int
	destinations int
	n            int
	rounds       int
	roundLimit   time.Duration
	payloadBytes int
	postgresDSN  string
	mysqlDSN     string
	latencyRate  float64
	latencyFor   time.Duration
	// latencyWarmup is enqueued at the same rate before the measured
	// phase and reported apart (warm-up p99 and max).
	latencyWarmup time.Duration
	// connLifetime is hooksql's ConnMaxLifetime for hookrelay on SQL
	// (zero: the library's default), for the connection-lifetime
	// experiment in docs/benchmarks.md; a default run leaves it alone.
	connLifetime time.Duration

	probe bool

	// The worker process of the latency mode.
	child          string
	childNamespace string
	childReceiver  string
}

// allSystems lists the systems in the order each round runs them.
var allSystems = []string{"ceiling", "river", "river-1ms", "memory", "sqlite", "postgres", "mysql",
	"memory-tuned", "sqlite-tuned", "postgres-tuned", "sender", "fasthttp"}

// defaultSystems are the systems a run without --systems measures: all but
// MySQL, which a run measures when asked to (it needs a MySQL or MariaDB
// server), and the hand-tuned variants.
var defaultSystems = allSystems[:6:6]

// latencySystems are the systems the latency mode runs: those on
// PostgreSQL, where a producer and a worker can be separate processes.
var latencySystems = []string{"river", "river-1ms", "postgres"}

func main() {
	var o options
	var systems string
	flag.StringVar(&systems, "systems", strings.Join(defaultSystems, ","), "comma-separated systems: "+strings.Join(allSystems, ", ")+" (mysql only when named)")
	flag.StringVar(&o.mode, "mode", "all", "throughput, latency, or all (both)")
	flag.IntVar(&o.workers, "workers", 50, "W: goroutines of the ceiling, River's MaxWorkers, hookrelay's Concurrency")
	flag.IntVar(&o.destinations, "destinations", 10, "destinations (URL paths on the one receiver)")
	flag.IntVar(&o.n, "n", 2000, "throughput: deliveries per system per round")
	flag.IntVar(&o.rounds, "rounds", 3, "throughput: rounds; the summary is the median")
	flag.DurationVar(&o.roundLimit, "round-limit", 20*time.Second, "throughput: a system whose warm-up rate says N would take longer gets fewer deliveries per round (at least 100); 0 keeps N for all")
	flag.IntVar(&o.payloadBytes, "payload", 512, "payload size in bytes")
	flag.StringVar(&o.postgresDSN, "postgres-dsn", os.Getenv(benchenv.PostgresDSNEnv), "PostgreSQL DSN (default $"+benchenv.PostgresDSNEnv+")")
	flag.StringVar(&o.mysqlDSN, "mysql-dsn", os.Getenv(benchenv.MySQLDSNEnv), "MySQL/MariaDB DSN, go-sql-driver form (default $"+benchenv.MySQLDSNEnv+")")
	flag.Float64Var(&o.latencyRate, "latency-rate", 200, "latency: deliveries enqueued per second, one at a time")
	flag.DurationVar(&o.latencyFor, "latency-for", 5*time.Second, "latency: how long the producer enqueues in the measured phase")
	flag.DurationVar(&o.latencyWarmup, "latency-warmup", time.Second, "latency: how long the producer enqueues before the measured phase (reported apart; 0: none)")
	flag.DurationVar(&o.connLifetime, "conn-lifetime", 0, "hookrelay on SQL: the pool's ConnMaxLifetime (0: the library's default, 30m); an experiment's setting, not a tuning")
	flag.BoolVar(&o.probe, "probe", false, "throughput: after each hookrelay round, print on stderr how many sends were in flight (sampled every millisecond) and, on SQLite/PostgreSQL/MySQL, the store's claims and batches timed with the CPU per delivery (on PostgreSQL, of backends whose application_name is peerbench)")
	flag.StringVar(&o.child, "child", "", "internal: run as the latency mode's worker process for this system")
	flag.StringVar(&o.childNamespace, "child-namespace", "", "internal: the child's table prefix or schema")
	flag.StringVar(&o.childReceiver, "child-receiver", "", "internal: the receiver's URL")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile of the whole run to this file (every allocation sampled)")
	flag.Parse()
	o.systems = strings.Split(systems, ",")
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "peerbench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 1
		defer func() {
			f, err := os.Create(*memProfile)
			if err == nil {
				err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "peerbench:", err)
			}
		}()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	if o.child != "" {
		err = runChild(ctx, o)
	} else {
		err = run(ctx, o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	for _, s := range o.systems {
		if !slices.Contains(allSystems, s) {
			return fmt.Errorf("unknown system %q (known: %s)", s, strings.Join(allSystems, ", "))
		}
	}
	if o.mode != "all" && o.mode != "throughput" && o.mode != "latency" {
		return fmt.Errorf("--mode must be throughput, latency or all, not %q", o.mode)
	}
	if o.n < 1 || o.workers < 1 || o.destinations < 1 || o.rounds < 1 || o.payloadBytes < 0 || o.latencyRate <= 0 || o.latencyWarmup < 0 || o.connLifetime < 0 {
		return errors.New("--n, --workers, --destinations, --rounds and --latency-rate must be positive, --payload, --latency-warmup and --conn-lifetime not negative")
	}
	needsPostgres := slices.ContainsFunc(o.systems, func(s string) bool { return serverUsed[s] == "postgres" })
	if needsPostgres && o.postgresDSN == "" {
		return fmt.Errorf("river and postgres need PostgreSQL: set %s or pass --postgres-dsn (or leave them out of --systems)", benchenv.PostgresDSNEnv)
	}
	if slices.Contains(o.systems, "mysql") && o.mysqlDSN == "" {
		return fmt.Errorf("mysql needs MySQL or MariaDB: set %s or pass --mysql-dsn (or leave it out of --systems)", benchenv.MySQLDSNEnv)
	}
	rcpt, err := startReceiver()
	if err != nil {
		return err
	}
	defer rcpt.close()
	payload := makePayload(o.payloadBytes)

	fmt.Fprintf(out, "peerbench: %s, GOMAXPROCS=%d, W=%d, %d destinations, %d-byte payload, receiver %s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), o.workers, o.destinations, len(payload), rcpt.url)
	fmt.Fprintf(out, "%s\n", versions())
	fmt.Fprintf(out, "load average at start: %s\n", loadAverage())
	defer func() { fmt.Fprintf(out, "load average at end: %s\n", loadAverage()) }()

	if o.mode != "latency" {
		if err := runThroughput(ctx, o, rcpt, payload, out); err != nil {
			return err
		}
	}
	if o.mode != "throughput" {
		if err := runLatency(ctx, o, rcpt, payload, out); err != nil {
			return err
		}
	}
	return nil
}

// versions names River's and hookrelay's versions as built into this binary.
func versions() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "versions unknown"
	}
	var parts []string
	for _, d := range bi.Deps {
		switch d.Path {
		case "github.com/riverqueue/river", "github.com/hookrelay/hookrelay":
			v := d.Version
			if d.Replace != nil {
				v = "replaced by " + d.Replace.Path
			}
			parts = append(parts, d.Path+" "+v)
		}
	}
	return strings.Join(parts, ", ")
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

// makePayload returns a JSON object of exactly n bytes (at least the
// smallest such object).
func makePayload(n int) []byte {
	head := `{"type":"lease.payment_recorded","pad":"`
	tail := `"}`
	return []byte(head + strings.Repeat("x", max(n-len(head)-len(tail), 0)) + tail)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(int(p*float64(len(s))), len(s)-1)]
}
