package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// system is one thing that delivers: the ceiling, a River client or a
// hookrelay client.
type system interface {
	// drain queues n deliveries with the worker stopped, then starts it and
	// returns the time from the start to the last delivery recorded.
	// It also returns the CPU time spent meanwhile.
	drain(ctx context.Context, n int) (measured, error)
	close() error
}

var labels = map[string]string{
	"ceiling":   "net/http ceiling",
	"sender":    "hookhttp.Sender alone",
	"fasthttp":  "fasthttp, hookrelay's headers",
	"river":     "River, default config",
	"river-1ms": "River, FetchCooldown 1 ms",
	"memory":    "hookrelay memory",
	"sqlite":    "hookrelay SQLite",
	"postgres":  "hookrelay PostgreSQL",
	"mysql":     "hookrelay MySQL",

	"memory-tuned":   "hookrelay memory, tuned",
	"sqlite-tuned":   "hookrelay SQLite, tuned",
	"postgres-tuned": "hookrelay PostgreSQL, tuned",
}

// serverUsed is the database server (proccpu.ServerOf's kinds) whose CPU time
// counts towards a system's; the others' own housekeeping is not theirs.
var serverUsed = map[string]string{"river": "postgres", "river-1ms": "postgres", "postgres": "postgres", "mysql": "mysql",
	"postgres-tuned": "postgres"}

func openSystem(ctx context.Context, name string, o options, rcpt *receiver, payload []byte) (system, error) {
	switch name {
	case "ceiling":
		return newCeiling(rcpt.url, payload, o.workers, o.destinations), nil
	case "sender":
		return newSenderOnly(rcpt.url, payload, o.workers, o.destinations)
	case "fasthttp":
		return newFasthttpClient(rcpt.url, payload, o.workers, o.destinations), nil
	case "river", "river-1ms":
		return openRiver(ctx, name, o, rcpt.url, payload)
	default:
		return openHookrelay(ctx, name, o, rcpt.url, payload)
	}
}

func runThroughput(ctx context.Context, o options, rcpt *receiver, payload []byte, out io.Writer) (err error) {
	systems := make(map[string]system, len(o.systems))
	defer func() {
		for name, s := range systems {
			if cerr := s.close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("%s: close: %w", name, cerr))
			}
		}
	}()
	unseen := map[string]bool{}
	warm := min(o.n, 200)
	perRound := make(map[string]int, len(o.systems))
	for _, name := range o.systems {
		s, err := openSystem(ctx, name, o, rcpt, payload)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		systems[name] = s
		// Warm up: connections open, code paths and caches hot.
		m, err := drainLabelled(ctx, s, name, warm)
		if err != nil {
			return fmt.Errorf("%s: warm-up: %w", name, err)
		}
		perRound[name] = roundSize(o, float64(warm)/m.elapsed.Seconds())
	}

	fmt.Fprintf(out, "\nthroughput: N=%d deliveries per system per round (fewer where the warm-up rate says N would take over %s), queued before the worker starts; %d rounds, systems in turn\n",
		o.n, o.roundLimit, o.rounds)
	fmt.Fprintf(out, "%-5s %-28s %6s %12s %17s %16s\n", "round", "system", "n", "deliveries/s", "connections opened", "CPU µs/delivery")
	perSec := make(map[string][]float64)
	toCeiling := make(map[string][]float64)
	toRiver := make(map[string][]float64)
	cpu := make(map[string][]float64)
	cpuToCeiling := make(map[string][]float64)
	cpuToRiver := make(map[string][]float64)
	for r := range o.rounds {
		round := make(map[string]float64)
		roundCPU := make(map[string]float64)
		for _, name := range o.systems {
			n := perRound[name]
			before, conns := rcpt.requests.Load(), rcpt.conns.Load()
			m, err := drainLabelled(ctx, systems[name], name, n)
			if err != nil {
				return fmt.Errorf("%s: round %d: %w", name, r+1, err)
			}
			if got := rcpt.requests.Load() - before; got < int64(n) {
				return fmt.Errorf("%s: round %d: %d deliveries reported but the receiver saw %d requests", name, r+1, n, got)
			}
			round[name] = float64(n) / m.elapsed.Seconds()
			perSec[name] = append(perSec[name], round[name])
			var seen bool
			roundCPU[name], seen = m.cpuPer(n, serverUsed[name])
			if !seen {
				unseen[serverUsed[name]] = true
			}
			cpu[name] = append(cpu[name], roundCPU[name])
			fmt.Fprintf(out, "%-5d %-28s %6d %12.0f %17d %16.1f\n", r+1, labels[name], n, round[name], rcpt.conns.Load()-conns, roundCPU[name])
		}
		for name, v := range round {
			if c, ok := round["ceiling"]; ok {
				toCeiling[name] = append(toCeiling[name], v/c)
				cpuToCeiling[name] = append(cpuToCeiling[name], roundCPU["ceiling"]/roundCPU[name])
			}
			if c, ok := round["river-1ms"]; ok {
				toRiver[name] = append(toRiver[name], v/c)
				cpuToRiver[name] = append(cpuToRiver[name], roundCPU["river-1ms"]/roundCPU[name])
			}
		}
	}

	fmt.Fprintf(out, "\nsummary: median over %d rounds; each ratio is the median of the ratios within a round\n", o.rounds)
	fmt.Fprintf(out, "%-28s %12s %17s %10s %14s %16s %14s %12s\n", "system", "deliveries/s", "rounds min–max", "× ceiling", "× River 1 ms",
		"CPU µs/delivery", "CPU × ceiling", "CPU × River")
	ratio := func(xs []float64) string {
		if len(xs) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", median(xs))
	}
	for _, name := range o.systems {
		fmt.Fprintf(out, "%-28s %12.0f %8.0f–%-8.0f %10s %14s %16.1f %14s %12s\n", labels[name], median(perSec[name]),
			slicesMin(perSec[name]), slicesMax(perSec[name]), ratio(toCeiling[name]), ratio(toRiver[name]),
			median(cpu[name]), ratio(cpuToCeiling[name]), ratio(cpuToRiver[name]))
	}
	fmt.Fprintf(out, "CPU µs/delivery: this process (workers and receiver) plus, for the systems on PostgreSQL or MySQL, the local server's processes;\n"+
		"CPU × ceiling / × River: the ceiling's (River's) CPU per delivery over the system's, within each round — the throughput ratio\n"+
		"a machine with no other load and every system CPU-bound would show\n")
	for _, server := range slices.Sorted(maps.Keys(unseen)) {
		fmt.Fprintf(out, "(no local %s process could be read: the figures of the systems on it are this process only)\n", server)
	}
	return nil
}

// roundSize is a system's deliveries per round: N, unless its warm-up rate
// says N would take longer than --round-limit, then what that rate
// delivers in the limit, but at least 100. It keeps a run short when a
// system is slow without shrinking the rounds of the fast ones.
func roundSize(o options, warmRate float64) int {
	if o.roundLimit <= 0 || float64(o.n)/warmRate <= o.roundLimit.Seconds() {
		return o.n
	}
	return min(o.n, max(100, int(warmRate*o.roundLimit.Seconds())))
}

func slicesMin(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

func slicesMax(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// drainLabelled runs one measured round of s with the profiler label
// system=name, which the goroutines it starts (a hookrelay worker's claim
// loop, attempts and batcher, River's workers) inherit: a --cpuprofile of a
// run of several systems then splits by system (go tool pprof -tagfocus
// system=postgres), so two systems' costs are compared in one run rather
// than across runs on a machine whose speed drifts. The receiver's
// goroutines are started by its listener and carry no label.
func drainLabelled(ctx context.Context, s system, name string, n int) (m measured, err error) {
	pprof.Do(ctx, pprof.Labels("system", name), func(ctx context.Context) {
		m, err = s.drain(ctx, n)
	})
	return m, err
}

func destPath(i int) string { return fmt.Sprintf("/d/%d", i) }

// ceiling posts the payload with a plain net/http client from W goroutines,
// keeping W connections open.
type ceiling struct {
	url     string
	payload []byte
	w, dest int
	tr      *http.Transport
	client  *http.Client
}

func newCeiling(url string, payload []byte, w, dests int) *ceiling {
	tr := newTransport(w)
	return &ceiling{url: url, payload: payload, w: w, dest: dests, tr: tr, client: &http.Client{Transport: tr}}
}

// newTransport is the plain client's transport: keep-alive connections for
// w requests in flight to the one receiver.
func newTransport(w int) *http.Transport {
	return &http.Transport{MaxIdleConns: w, MaxIdleConnsPerHost: w, IdleConnTimeout: time.Minute}
}

func (c *ceiling) drain(ctx context.Context, n int) (measured, error) {
	return clientLoop(n, c.w, func(i int) error {
		return post(ctx, c.client, c.url+destPath(i%c.dest), "", c.payload)
	})
}

func (c *ceiling) close() error {
	c.tr.CloseIdleConnections()
	return nil
}

// post sends body to url with a plain net/http client and reads the answer,
// which must be 2xx.
func post(ctx context.Context, client *http.Client, url, webhookID string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if webhookID != "" {
		req.Header.Set("webhook-id", webhookID)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("receiver answered %d", resp.StatusCode)
	}
	return nil
}

// progress counts deliveries recorded towards a target and failures.
type progress struct {
	mu      sync.Mutex
	count   int
	target  int
	reached chan struct{}

	failures    atomic.Int64
	lastFailure atomic.Value // string
}

// expect resets the count and returns a channel closed when n are counted.
func (p *progress) expect(n int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count, p.target = 0, n
	p.reached = make(chan struct{})
	return p.reached
}

func (p *progress) delivered() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count++
	if p.count == p.target {
		close(p.reached)
	}
}

func (p *progress) failed(what string) {
	p.failures.Add(1)
	p.lastFailure.Store(what)
}

func (p *progress) counted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// wait returns when the target is reached, or with an error when a delivery
// failed or nothing was recorded for a whole minute: it checks progress, not
// speed.
func (p *progress) wait(ctx context.Context, reached <-chan struct{}) error {
	last := -1
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastChange := time.Now()
	for {
		select {
		case <-reached:
			return p.failure()
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if err := p.failure(); err != nil {
				return err
			}
			if got := p.counted(); got != last {
				last, lastChange = got, time.Now()
			} else if time.Since(lastChange) > time.Minute {
				return fmt.Errorf("stalled at %d of %d delivered", got, p.target)
			}
		}
	}
}

// failure is an error naming the last failure, nil when there was none:
// a figure with a failed attempt in it is not end to end.
func (p *progress) failure() error {
	if n := p.failures.Load(); n > 0 {
		return fmt.Errorf("%d attempts did not deliver (last: %v)", n, p.lastFailure.Load())
	}
	return nil
}
