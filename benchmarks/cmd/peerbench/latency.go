package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"github.com/hookrelay/hookrelay/internal/benchenv"
)

// childReady is the line a worker process prints once its worker runs.
const childReady = "ready"

// settle is how long the producer waits after the worker process is ready,
// so the worker's start-up is not in the figure.
const settle = time.Second

// arrivalWait bounds the wait for the last deliveries after the producer
// has enqueued everything.
const arrivalWait = 30 * time.Second

type latencyResult struct {
	n, missing int
	offered    float64 // enqueues per second achieved
	p50, p99   time.Duration
	max        time.Duration
	// coldP99 and coldMax are the warm-up phase's: the first deliveries
	// after the worker started, while its connections open and its
	// statements are first prepared.
	coldP99, coldMax time.Duration
}

func runLatency(ctx context.Context, o options, rcpt *receiver, payload []byte, out io.Writer) error {
	var systems []string
	for _, s := range o.systems {
		if slices.Contains(latencySystems, s) {
			systems = append(systems, s)
		}
	}
	if len(systems) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nlatency: producer here, worker in another process, PostgreSQL; %.0f enqueues/s one at a time, %s of warm-up then %s measured;\n", o.latencyRate, o.latencyWarmup, o.latencyFor)
	fmt.Fprintf(out, "enqueue call → first arrival at the receiver (both clocks in this process); missing: not arrived %s after the last enqueue;\n", arrivalWait)
	fmt.Fprintf(out, "warm-up p99/max: the first deliveries after the worker started (its connections opening, statements first prepared)\n")
	fmt.Fprintf(out, "%-28s %8s %10s %11s %11s %11s %8s %14s %14s\n", "system", "enqueued", "offered/s", "p50", "p99", "max", "missing", "warm-up p99", "warm-up max")
	for _, name := range systems {
		r, err := latencyOne(ctx, name, o, rcpt, payload)
		if err != nil {
			return fmt.Errorf("%s: latency: %w", name, err)
		}
		coldP99, coldMax := "-", "-"
		if o.latencyWarmup > 0 {
			coldP99, coldMax = formatLatency(r.coldP99), formatLatency(r.coldMax)
		}
		fmt.Fprintf(out, "%-28s %8d %10.0f %11s %11s %11s %8d %14s %14s\n", labels[name], r.n, r.offered,
			formatLatency(r.p50), formatLatency(r.p99), formatLatency(r.max), r.missing, coldP99, coldMax)
	}
	return nil
}

func latencyOne(ctx context.Context, name string, o options, rcpt *receiver, payload []byte) (res latencyResult, err error) {
	var enqueue func(context.Context, int) (string, error)
	var childArgs []string
	var closeAll func() error
	if name == "postgres" {
		enqueue, childArgs, closeAll, err = hookrelayLatency(ctx, o, rcpt.url, payload)
	} else {
		enqueue, childArgs, closeAll, err = riverLatency(ctx, name, o, payload)
	}
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, closeAll()) }()

	stopChild, err := startChild(ctx, append(childArgs, "--child-receiver", rcpt.url, "--workers", strconv.Itoa(o.workers), "--conn-lifetime", o.connLifetime.String()), o.postgresDSN)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, stopChild()) }()
	time.Sleep(settle)

	// Warm-up, then the measured phase, at the same rate: a worker opens
	// its database connections and prepares its statements as the first
	// deliveries come, which is the start of a process, not its steady
	// state. Both are reported.
	cold, err := latencyPhase(ctx, o, rcpt, enqueue, 0, int(o.latencyRate*o.latencyWarmup.Seconds()))
	if err != nil {
		return res, err
	}
	n := max(int(o.latencyRate*o.latencyFor.Seconds()), 1)
	res, err = latencyPhase(ctx, o, rcpt, enqueue, cold.n, n)
	res.coldP99, res.coldMax = cold.p99, cold.max
	res.missing += cold.missing
	return res, err
}

// latencyPhase enqueues n deliveries (events first, first+1, …) at the
// latency rate, waits for them to arrive, and returns their latencies'
// percentiles. n 0 is a phase with nothing to report.
func latencyPhase(ctx context.Context, o options, rcpt *receiver, enqueue func(context.Context, int) (string, error), first, n int) (res latencyResult, err error) {
	res.n = n
	if n == 0 {
		return res, nil
	}
	rcpt.record()
	defer rcpt.stopRecording()
	enqueued := make(map[string]time.Time, res.n)
	interval := time.Duration(float64(time.Second) / o.latencyRate)
	start := time.Now()
	for i := range res.n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		t0 := time.Now()
		id, err := enqueue(ctx, first+i)
		if err != nil {
			return res, err
		}
		enqueued[id] = t0
	}
	res.offered = float64(res.n) / time.Since(start).Seconds()
	deadline := time.Now().Add(arrivalWait)
	for rcpt.arrived() < res.n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	arrivals := rcpt.stopRecording()
	lat := make([]time.Duration, 0, res.n)
	for id, t0 := range enqueued {
		if a, ok := arrivals[id]; ok {
			lat = append(lat, a.Sub(t0))
		} else {
			// Counted as later than any arrival, so a percentile that
			// falls on one says so rather than leaving it out.
			lat = append(lat, notArrived)
			res.missing++
		}
	}
	res.p50, res.p99, res.max = percentile(lat, 0.50), percentile(lat, 0.99), slices.Max(lat)
	return res, nil
}

// notArrived is the latency of a delivery that did not arrive within
// arrivalWait of the last enqueue.
const notArrived = time.Duration(math.MaxInt64)

func formatLatency(d time.Duration) string {
	if d == notArrived {
		return "not arrived"
	}
	return d.Round(10 * time.Microsecond).String()
}

// startChild runs this binary as the worker process with args, the DSN in
// its environment, and waits until it reports ready. stop closes the
// child's stdin, which tells it to stop, and waits for it to exit; a child
// that has not exited within half a minute is killed.
func startChild(ctx context.Context, args []string, dsn string) (stop func() error, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), benchenv.PostgresDSNEnv+"="+dsn)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	ready := make(chan bool, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		sawReady := false
		for lines.Scan() {
			if !sawReady && lines.Text() == childReady {
				sawReady = true
				ready <- true
				continue
			}
			// River logs warnings to stdout by default.
			fmt.Fprintln(os.Stderr, "worker process:", lines.Text())
		}
		if !sawReady {
			ready <- false
		}
		exited <- cmd.Wait()
	}()
	stop = func() error {
		_ = stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				return fmt.Errorf("worker process: %w", err)
			}
			return nil
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			return errors.New("worker process did not stop within 30s of its stdin closing; killed")
		}
	}
	select {
	case ok := <-ready:
		if !ok {
			return nil, errors.Join(errors.New("worker process exited before it was ready"), stop())
		}
		return stop, nil
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), stop())
	case <-time.After(time.Minute):
		return nil, errors.Join(errors.New("worker process not ready within a minute"), stop())
	}
}

// runChild is the worker process: it starts the named system's worker,
// prints childReady, and stops the worker when its stdin closes.
func runChild(ctx context.Context, o options) error {
	if o.postgresDSN == "" {
		return fmt.Errorf("worker process needs %s", benchenv.PostgresDSNEnv)
	}
	var stop func() error
	var err error
	switch o.child {
	case "postgres":
		stop, err = hookrelayWorker(ctx, o)
	case "river", "river-1ms":
		stop, err = riverWorker(ctx, o)
	default:
		return fmt.Errorf("--child %q is not a latency system (%v)", o.child, latencySystems)
	}
	if err != nil {
		return err
	}
	fmt.Println(childReady)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return stop()
}
