package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
	hooksql "github.com/hookrelay/hookrelay/adapters/sql"
	"github.com/hookrelay/hookrelay/internal/proccpu"
)

// probedStore is a SQL store whose Claim and RecordBatch are timed
// (--probe). It embeds the store, so the worker finds the same abilities
// (BatchLedger, ClaimsByDestinationRoom, DueNotifier) on it.
type probedStore struct {
	*hooksql.Store
	mu              sync.Mutex
	claims, claimed int
	claimTime       time.Duration
	batches, rows   int
	batchTime       time.Duration
	serverCPU0      time.Duration // at begin
	selfCPU0        time.Duration
	serverSeen0     bool
}

func (p *probedStore) Claim(ctx context.Context, cp hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	start := time.Now()
	cs, err := p.Store.Claim(ctx, cp)
	d := time.Since(start)
	p.mu.Lock()
	p.claims++
	p.claimed += len(cs)
	p.claimTime += d
	p.mu.Unlock()
	return cs, err
}

func (p *probedStore) RecordBatch(ctx context.Context, ws []hookrelay.LedgerWrite) ([]error, error) {
	start := time.Now()
	errs, err := p.Store.RecordBatch(ctx, ws)
	d := time.Since(start)
	p.mu.Lock()
	p.batches++
	p.rows += len(ws)
	p.batchTime += d
	p.mu.Unlock()
	return errs, err
}

// cpu returns the CPU time used so far by this process and, on PostgreSQL
// on this machine, by the server backends of connections whose
// application_name is "peerbench" (set it in the DSN). seen is false when
// no such backend could be read: the server's figure is then unknown, not
// zero.
func (p *probedStore) cpu() (server, self time.Duration, seen bool) {
	self = proccpu.Self()
	if p.Dialect() != hooksql.Postgres {
		return 0, self, false
	}
	rows, err := p.DB().Query("SELECT pid FROM pg_stat_activity WHERE application_name = 'peerbench'")
	if err != nil {
		return 0, self, false
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) != nil {
			continue
		}
		if _, used, ok := proccpu.Stat("/proc/" + strconv.Itoa(pid) + "/stat"); ok {
			server += used
			seen = true
		}
	}
	return server, self, seen
}

// begin marks the start of a timed drain.
func (p *probedStore) begin() {
	p.mu.Lock()
	p.claims, p.claimed, p.claimTime, p.batches, p.rows, p.batchTime = 0, 0, 0, 0, 0, 0
	p.mu.Unlock()
	p.serverCPU0, p.selfCPU0, p.serverSeen0 = p.cpu()
}

// report prints what happened since begin, for n deliveries.
func (p *probedStore) report(w io.Writer, n int) {
	server, self, seen := p.cpu()
	p.mu.Lock()
	defer p.mu.Unlock()
	serverCPU := "unknown (no backend seen: add application_name=peerbench to the PostgreSQL DSN, and run on the server's machine)"
	if seen && p.serverSeen0 {
		serverCPU = per(server-p.serverCPU0, n).String()
	}
	if p.Dialect() != hooksql.Postgres {
		serverCPU = "not measured (PostgreSQL only)"
	}
	fmt.Fprintf(w, "probe: %d claims, %.1f deliveries each, %v each; %d batches, %.1f writes each, %v each; CPU per delivery: server backends %s, this process %v\n",
		p.claims, ratio(p.claimed, p.claims), per(p.claimTime, p.claims),
		p.batches, ratio(p.rows, p.batches), per(p.batchTime, p.batches),
		serverCPU, per(self-p.selfCPU0, n))
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func per(d time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return (d / time.Duration(n)).Round(time.Microsecond / 4)
}

// probedSender is the HTTP sender with its sends in flight counted
// (--probe), so a round can show how often the worker's slots had nothing
// to send: a slot waits for a claim when the worker's held claims run out
// before the next claim returns. It embeds the sender, so the client still
// finds its SendTimeout.
type probedSender struct {
	*hookhttp.Sender
	slots    int // the worker's Concurrency
	inFlight atomic.Int64
}

func (p *probedSender) Send(ctx context.Context, sp hookrelay.SendParams) hookrelay.Result {
	p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	return p.Sender.Send(ctx, sp)
}

// occupancy is what sampling the sends in flight saw: every sample in
// order, so a round can show where its idle slots fell as well as how
// many there were (at its start, the first claim; at its end, the last
// deliveries; or throughout).
type occupancy struct {
	slots int
	seen  []int32
}

// tally sums the samples and counts those with no send and with every
// slot sending.
func (o occupancy) tally() (sum, none, full int64) {
	for _, n := range o.seen {
		sum += int64(n)
		if n == 0 {
			none++
		}
		if int(n) >= o.slots {
			full++
		}
	}
	return sum, none, full
}

// sampleEvery is how often a probed round reads the sends in flight.
const sampleEvery = time.Millisecond

// startSampling reads the sends in flight every sampleEvery until the
// returned function is called, which returns what was seen.
func (p *probedSender) startSampling() (stop func() occupancy) {
	done, out := make(chan struct{}), make(chan occupancy, 1)
	go func() {
		o := occupancy{slots: p.slots}
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				out <- o
				return
			case <-t.C:
				o.seen = append(o.seen, int32(p.inFlight.Load()))
			}
		}
	}()
	return func() occupancy {
		close(done)
		return <-out
	}
}

// byTenth is the average of the samples in each tenth of the round, in
// order; nil with fewer than ten samples.
func (o occupancy) byTenth() []float64 {
	if len(o.seen) < 10 {
		return nil
	}
	out := make([]float64, 10)
	for i := range out {
		part := o.seen[i*len(o.seen)/10 : (i+1)*len(o.seen)/10]
		var sum int64
		for _, n := range part {
			sum += int64(n)
		}
		out[i] = float64(sum) / float64(len(part))
	}
	return out
}

func (o occupancy) String() string {
	samples := len(o.seen)
	if samples == 0 {
		return "sends in flight: no sample"
	}
	sum, none, full := o.tally()
	pct := func(k int64) float64 { return 100 * float64(k) / float64(samples) }
	s := fmt.Sprintf("sends in flight: %.1f of %d on average, none in %.1f%% of %d samples (every %v), all %d in %.1f%%",
		float64(sum)/float64(samples), o.slots, pct(none), samples, sampleEvery, o.slots, pct(full))
	if tenths := o.byTenth(); tenths != nil {
		s += "; by tenth of the round:"
		for _, v := range tenths {
			s += fmt.Sprintf(" %.1f", v)
		}
	}
	return s
}
