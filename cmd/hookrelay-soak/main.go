// Command hookrelay-soak is the chaos soak: worker processes on one
// PostgreSQL deliver to a loopback recipient that misbehaves at random,
// while the soak kills workers with SIGKILL, restarts them, and terminates
// their database sessions once. At the end it checks that nothing was lost,
// stuck or applied twice, and that the ledger agrees with what the
// recipient saw; it prints the counts and exits 1 on any violation.
//
// The recipient (in this process, on 127.0.0.1) answers each request at
// random: 503, 429 with Retry-After, applies the effect and then drops the
// connection, hangs past the sender's timeout (and applies the effect
// late), or accepts. It verifies signatures and deduplicates by webhook-id
// with the recipient kit.
//
// The workers are this binary re-executed with --worker, each a real OS
// process with its own worker client.
//
//	HOOKRELAY_TEST_POSTGRES_DSN=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	    go run ./cmd/hookrelay-soak --short
//	go run ./cmd/hookrelay-soak --duration 30m --deliveries 100000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
	"github.com/hookrelay/hookrelay/internal/benchenv"
)

// secret signs every delivery; the recipient verifies with it.
const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

type config struct {
	postgresDSN string
	deliveries  int
	duration    time.Duration
	workers     int
	killEvery   time.Duration
	window      time.Duration
	leaseFor    time.Duration
	timeout     time.Duration
	seed        uint64
	keep        bool

	// worker mode
	worker   bool
	workerID int
	runID    string
}

// policy is the retry policy of every delivery: short delays so that a run
// of a minute sees many attempts, a small budget so some deliveries die.
func (c config) policy() hookrelay.Policy {
	return hookrelay.Policy{
		Version: "soak", MaxAttempts: 8, BaseDelay: 10 * time.Millisecond, MaxDelay: 500 * time.Millisecond,
		MaxAge: c.window,
	}
}

func (c config) prefix() string { return c.runID + "_" }

func workerAppName(runID string) string { return "hookrelay-soak-worker-" + runID }

func main() {
	var c config
	var short bool
	flag.BoolVar(&short, "short", false, "the CI run: 3000 deliveries, 45s of chaos (under two minutes in all)")
	flag.StringVar(&c.postgresDSN, "postgres-dsn", os.Getenv(benchenv.PostgresDSNEnv), "PostgreSQL DSN (default $"+benchenv.PostgresDSNEnv+")")
	flag.IntVar(&c.deliveries, "deliveries", 3000, "deliveries enqueued, spread over the first 60% of the chaos phase")
	flag.DurationVar(&c.duration, "duration", 45*time.Second, "length of the chaos phase (kills, restarts, enqueueing)")
	flag.IntVar(&c.workers, "workers", 3, "worker processes")
	flag.DurationVar(&c.killEvery, "kill-every", 3*time.Second, "mean interval between SIGKILLs of a random worker")
	flag.DurationVar(&c.window, "window", 60*time.Second, "delivery window (Policy.MaxAge): a delivery still pending this long after enqueue is dead-lettered")
	flag.DurationVar(&c.leaseFor, "lease", 2*time.Second, "worker LeaseFor")
	flag.DurationVar(&c.timeout, "timeout", 500*time.Millisecond, "sender timeout (well below the lease)")
	flag.Uint64Var(&c.seed, "seed", 0, "random seed for faults and kills (0: from the clock)")
	flag.BoolVar(&c.keep, "keep", false, "keep the run's tables (default: dropped at the end)")
	flag.BoolVar(&c.worker, "worker", false, "internal: run as a worker process")
	flag.IntVar(&c.workerID, "worker-id", 0, "internal: worker number")
	flag.StringVar(&c.runID, "run-id", "", "internal: the run's ID (names its tables and sessions)")
	flag.Parse()
	if short {
		c.deliveries, c.duration = 3000, 45*time.Second
	}
	if c.postgresDSN == "" {
		fmt.Fprintf(os.Stderr, "hookrelay-soak: needs PostgreSQL: set %s or pass --postgres-dsn\n", benchenv.PostgresDSNEnv)
		os.Exit(2)
	}
	var err error
	if c.worker {
		err = runWorker(c)
	} else {
		err = runSoak(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hookrelay-soak:", err)
		os.Exit(1)
	}
}

// withAppName sets application_name in a PostgreSQL DSN (URL or key=value
// form), so the soak can find and terminate its workers' sessions only.
func withAppName(dsn, name string) string {
	if strings.Contains(dsn, "://") {
		if u, err := url.Parse(dsn); err == nil {
			q := u.Query()
			q.Set("application_name", name)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " application_name=" + name
}

// runWorker is one worker process: it delivers until SIGTERM, then drains.
// SIGKILL ends it anywhere, which is the point.
func runWorker(c config) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	store, err := openRetrying(ctx, benchenv.Options{
		PostgresDSN: withAppName(c.postgresDSN, workerAppName(c.runID)), TablePrefix: c.prefix(),
	}, 10, 100*time.Millisecond, os.Stderr)
	if err != nil {
		return err
	}
	defer store.Close()
	sender, err := benchenv.LoopbackSender(hookhttp.Config{Timeout: c.timeout})
	if err != nil {
		return err
	}
	defer sender.CloseIdleConnections()
	policy := c.policy()
	client, err := hookrelay.New(hookrelay.Config{
		Queue: store.Queue, Ledger: store.Ledger, Destinations: store.Destinations, Sender: sender,
		// The library's defaults otherwise: the pool Open sizes, the
		// per-destination limit, and the PostgreSQL wake-up instead of a
		// short poll for work other processes enqueue and schedule.
		Policy: &policy, Concurrency: 8, LeaseFor: c.leaseFor,
		Holder: fmt.Sprintf("soak-worker-%d-%d", c.workerID, os.Getpid()),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventWorkerError {
				fmt.Fprintf(os.Stderr, "%s worker_error delivery=%s: %v\n", time.Now().Format(time.RFC3339Nano), e.Delivery.ID, e.Err)
			}
		}),
	})
	if err != nil {
		return err
	}
	if err := client.Start(context.Background()); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer stopCancel()
	return client.Stop(stopCtx)
}

// openRetrying opens and migrates the store, and tries again while that
// fails, up to tries times in all, pausing pause, 2·pause, … between them:
// a worker whose session is terminated while it migrates (the soak's
// pg_terminate_backend can land there) would otherwise exit before it
// delivers anything, which is what a process supervisor restarts, not a
// fault of the running worker that the soak looks for. Each failure but
// the last is written to log as a startup_error line.
func openRetrying(ctx context.Context, o benchenv.Options, tries int, pause time.Duration, log io.Writer) (*benchenv.Store, error) {
	for try := 1; ; try++ {
		store, err := benchenv.Open(ctx, "postgres", o)
		if err == nil || try >= tries || ctx.Err() != nil {
			return store, err
		}
		fmt.Fprintf(log, "%s startup_error try=%d: %v\n", time.Now().Format(time.RFC3339Nano), try, err)
		time.Sleep(time.Duration(try) * pause)
	}
}

// workerProc is one running worker process.
type workerProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	log  *os.File
}

func (c config) spawn(id, generation int, logDir string) (*workerProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(logDir, fmt.Sprintf("worker-%d-%03d.log", id, generation)))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "--worker", "--worker-id", strconv.Itoa(id), "--run-id", c.runID,
		"--postgres-dsn", c.postgresDSN, "--window", c.window.String(),
		"--lease", c.leaseFor.String(), "--timeout", c.timeout.String())
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, err
	}
	p := &workerProc{cmd: cmd, done: make(chan struct{}), log: log}
	go func() {
		_ = cmd.Wait() // the exit status is judged by who ended it
		_ = log.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *workerProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the worker to drain and exit, and kills it if it has not
// within grace.
func (p *workerProc) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// chaosCounts are what the chaos phase did.
type chaosCounts struct {
	kills              int
	unexpectedExits    int
	sessionsTerminated int64
}

func runSoak(c config) error {
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	c.runID = fmt.Sprintf("soak_%d_%d", os.Getpid(), time.Now().Unix()%1_000_000)
	rng := rand.New(rand.NewPCG(c.seed, c.seed>>1|1))
	ctx := context.Background()
	fmt.Printf("hookrelay-soak: run %s, seed %d: %d deliveries, %d workers, %s of chaos (SIGKILL every ~%s), lease %s, sender timeout %s, window %s\n",
		c.runID, c.seed, c.deliveries, c.workers, c.duration, c.killEvery, c.leaseFor, c.timeout, c.window)

	rcpt, err := startRecipient(secret, 2*c.timeout, c.seed, defaultOdds)
	if err != nil {
		return err
	}
	defer rcpt.close()
	store, err := benchenv.Open(ctx, "postgres", benchenv.Options{
		PostgresDSN: withAppName(c.postgresDSN, "hookrelay-soak-"+c.runID), TablePrefix: c.prefix(),
		Drop: !c.keep,
	})
	if err != nil {
		return err
	}
	defer store.Close()
	const destinations = 3
	for i := range destinations {
		if err := store.Put(ctx, hookrelay.Destination{
			ID: fmt.Sprintf("dest_%d", i), TenantID: "tenant_soak", URL: fmt.Sprintf("%s/d/%d", rcpt.url, i),
			Secrets: []string{secret},
		}); err != nil {
			return err
		}
	}
	policy := c.policy()
	producer, err := hookrelay.New(hookrelay.Config{
		Queue: store.Queue, Ledger: store.Ledger, Destinations: store.Destinations, Policy: &policy,
	})
	if err != nil {
		return err
	}
	logDir, err := os.MkdirTemp("", "hookrelay-soak-")
	if err != nil {
		return err
	}

	// Workers.
	procs := make([]*workerProc, c.workers)
	generation := 0
	for i := range procs {
		if procs[i], err = c.spawn(i, generation, logDir); err != nil {
			return err
		}
		generation++
	}
	defer func() {
		for _, p := range procs {
			if p != nil && !p.exited() {
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
	}()

	// Producer: batches spread over the first 60% of the chaos phase.
	var (
		idsMu      sync.Mutex
		ids        []string
		lastQueued time.Time
	)
	produced := make(chan error, 1)
	go func() {
		const batch = 50
		batches := (c.deliveries + batch - 1) / batch
		interval := time.Duration(float64(c.duration) * 0.6 / float64(batches))
		start := time.Now()
		for b := range batches {
			time.Sleep(time.Until(start.Add(time.Duration(b) * interval)))
			var params []hookrelay.EnqueueParams
			for i := b * batch; i < min((b+1)*batch, c.deliveries); i++ {
				dest := fmt.Sprintf("dest_%d", i%destinations)
				event := fmt.Sprintf("evt_%s_%06d", c.runID, i)
				params = append(params, hookrelay.EnqueueParams{
					EventID: event, TenantID: "tenant_soak", DestinationID: dest, EventType: "soak.effect",
					Payload: fmt.Appendf(nil, `{"event":%q,"destination":%q}`, event, dest),
				})
			}
			res, err := producer.EnqueueMany(ctx, params)
			if err != nil {
				produced <- fmt.Errorf("enqueue: %w", err)
				return
			}
			idsMu.Lock()
			for _, r := range res {
				ids = append(ids, r.ID)
			}
			lastQueued = time.Now()
			idsMu.Unlock()
		}
		produced <- nil
	}()

	// Chaos: SIGKILL a random worker now and then and restart it; terminate
	// the workers' database sessions once, 40% into the run.
	var chaos chaosCounts
	end := time.Now().Add(c.duration)
	terminateAt := time.Now().Add(c.duration * 4 / 10)
	terminated := false
	nextKill := time.Now().Add(jitter(rng, c.killEvery))
	for time.Now().Before(end) {
		time.Sleep(50 * time.Millisecond)
		for i, p := range procs {
			if p.exited() {
				chaos.unexpectedExits++
				fmt.Printf("worker %d exited by itself (%s; log: %s)\n", i, p.cmd.ProcessState, p.log.Name())
				printTail(p.log.Name(), 20)
				if procs[i], err = c.spawn(i, generation, logDir); err != nil {
					return err
				}
				generation++
			}
		}
		if !terminated && time.Now().After(terminateAt) {
			terminated = true
			n, err := terminateSessions(ctx, store, workerAppName(c.runID))
			if err != nil {
				return fmt.Errorf("pg_terminate_backend: %w", err)
			}
			chaos.sessionsTerminated = n
			fmt.Printf("%s: terminated %d worker database sessions\n", time.Now().Format(time.TimeOnly), n)
		}
		if time.Now().After(nextKill) {
			i := rng.IntN(len(procs))
			_ = procs[i].cmd.Process.Kill() // SIGKILL
			<-procs[i].done
			chaos.kills++
			time.Sleep(time.Duration(rng.Int64N(int64(500 * time.Millisecond))))
			if procs[i], err = c.spawn(i, generation, logDir); err != nil {
				return err
			}
			generation++
			nextKill = time.Now().Add(jitter(rng, c.killEvery))
		}
	}
	if err := <-produced; err != nil {
		return err
	}
	fmt.Printf("%s: chaos over (%d kills); waiting for every delivery to be delivered or dead\n", time.Now().Format(time.TimeOnly), chaos.kills)

	// Drain: everything must leave pending within its window (plus a lease
	// and some slack for the last claims).
	idsMu.Lock()
	deadline := lastQueued.Add(c.window + c.leaseFor + 15*time.Second)
	idsMu.Unlock()
	pending, err := waitNoPending(ctx, store, deadline)
	if err != nil {
		return err
	}
	for _, p := range procs {
		p.stop(15 * time.Second)
	}

	reqs, applied, rcptViolations := rcpt.snapshot()
	t, violations := check(ctx, store.Ledger, ids, reqs, applied)
	violations = append(rcptViolations, violations...)
	if pending > 0 {
		violations = append(violations, fmt.Sprintf("%d deliveries still pending at %s, past their window", pending, deadline.Format(time.TimeOnly)))
	}
	if chaos.unexpectedExits > 0 {
		violations = append(violations, fmt.Sprintf("%d worker processes exited by themselves (logs in %s)", chaos.unexpectedExits, logDir))
	}
	if chaos.sessionsTerminated == 0 {
		violations = append(violations, "pg_terminate_backend found no worker session to terminate: the fault was not injected")
	}
	logged, err := countWorkerErrors(logDir)
	if err != nil {
		return err
	}
	t.print(chaos, logged, logDir)
	if len(violations) > 0 {
		fmt.Printf("\n%d VIOLATIONS:\n", len(violations))
		for i, v := range violations {
			if i == 50 {
				fmt.Printf("  … and %d more\n", len(violations)-50)
				break
			}
			fmt.Println("  " + v)
		}
		if prefix := store.KeepTables(); prefix != "" {
			fmt.Printf("the run's tables are kept for inspection: prefix %s\n", prefix)
		}
		return errors.New("violations found")
	}
	fmt.Println("\nOK: every delivery delivered or dead, each effect applied at most once and exactly once when delivered, one ID per delivery, ledger consistent with the recipient")
	_ = os.RemoveAll(logDir)
	return nil
}

// jitter returns a duration uniform in [mean/2, 3·mean/2).
func jitter(rng *rand.Rand, mean time.Duration) time.Duration {
	return mean/2 + time.Duration(rng.Int64N(int64(mean)))
}

// terminateSessions ends every database session of the workers.
func terminateSessions(ctx context.Context, store *benchenv.Store, appName string) (int64, error) {
	var n int64
	err := store.DB.QueryRowContext(ctx,
		`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) t`,
		appName).Scan(&n)
	return n, err
}

// waitNoPending polls the ledger's stats until no delivery is pending or
// the deadline passes; it returns how many are still pending.
func waitNoPending(ctx context.Context, store *benchenv.Store, deadline time.Time) (int64, error) {
	stats, ok := hookrelay.As[hookrelay.LedgerStats](store.Ledger)
	if !ok {
		return 0, errors.New("the ledger has no LedgerStats")
	}
	for {
		ds, err := stats.Stats(ctx, hookrelay.StatsParams{Now: time.Now()})
		if err != nil {
			return 0, err
		}
		var pending int64
		for _, d := range ds {
			pending += d.Pending
		}
		if pending == 0 || time.Now().After(deadline) {
			return pending, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// printTail prints how a worker's log ends (logEnding), so CI's output
// shows why a worker exited even when the log directory is gone.
func printTail(name string, n int) {
	b, err := os.ReadFile(name)
	if err != nil {
		fmt.Printf("  (log unreadable: %v)\n", err)
		return
	}
	for _, l := range logEnding(string(b), n) {
		fmt.Println("  | " + l)
	}
}

// logEnding returns a worker log from its panic or fatal error on (2n lines
// at most), if it has one, else its last n lines other than worker_error
// lines (those are survived; what ended the process is after them).
func logEnding(log string, n int) []string {
	all := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	for i, l := range all {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			return all[i:min(len(all), i+2*n)]
		}
	}
	var show []string
	for _, l := range all {
		if !strings.Contains(l, " worker_error ") {
			show = append(show, l)
		}
	}
	if len(show) == 0 {
		show = all
	}
	return show[max(0, len(show)-n):]
}

// loggedErrors are the errors the workers logged and survived.
type loggedErrors struct {
	worker  int // worker_error: the store unreachable after pg_terminate_backend, leases lost to a re-claim after a kill, …
	startup int // startup_error: opening or migrating the store failed and was tried again
}

// countWorkerErrors counts the worker_error and startup_error lines in the
// workers' logs.
func countWorkerErrors(dir string) (loggedErrors, error) {
	var n loggedErrors
	files, err := filepath.Glob(filepath.Join(dir, "worker-*.log"))
	if err != nil {
		return n, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return n, err
		}
		n.worker += strings.Count(string(b), " worker_error ")
		n.startup += strings.Count(string(b), " startup_error ")
	}
	return n, nil
}
