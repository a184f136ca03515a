package hookrelaytest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hookrelay/hookrelay"
)

// FixedRandom is a hookrelay.Random that always returns its value, which
// makes full-jitter delays exact: FixedRandom(0.5) gives 500 ms, then 1 s.
type FixedRandom float64

// Float64 returns r.
func (r FixedRandom) Float64() float64 { return float64(r) }

// Request is what a Recipient saw of one attempt.
type Request struct {
	DeliveryID    string
	EventID       string
	DestinationID string
	Attempt       int
	// At is when the worker sent it, by its clock (SendParams.Now).
	At time.Time
	// Applied reports whether this request applied the business effect
	// (false for a repeat the recipient deduplicated).
	Applied bool
}

// Recipient is a fake recipient and hookrelay.Sender in one: it deduplicates
// by delivery ID like a well-behaved webhook consumer, records every request
// and answers from a script. It is safe for concurrent use.
type Recipient struct {
	mu       sync.Mutex
	requests []Request
	effects  map[string]int
	// Script decides each answer from the 1-based number of the request to
	// this recipient for the delivery and whether it applied the effect.
	// Nil accepts everything.
	Script func(d hookrelay.Delivery, n int) RecipientAnswer
}

// RecipientAnswer is one scripted answer.
type RecipientAnswer struct {
	// Result is what the sender reports.
	Result hookrelay.Result
	// Apply says whether the recipient applies the business effect before
	// answering (a timeout after applying is the ambiguous case).
	Apply bool
	// Block, if set, makes Send wait until it is closed or ctx ends.
	Block <-chan struct{}
}

// Accept applies the effect and answers 204.
func Accept() RecipientAnswer {
	return RecipientAnswer{Result: hookrelay.Delivered(204), Apply: true}
}

// Reject answers with res without applying the effect.
func Reject(res hookrelay.Result) RecipientAnswer { return RecipientAnswer{Result: res} }

// ApplyThenTimeout applies the effect, then the sender sees a timeout.
func ApplyThenTimeout() RecipientAnswer {
	return RecipientAnswer{Result: hookrelay.Unknown(hookrelay.ReasonTimeout), Apply: true}
}

// Send implements hookrelay.Sender.
func (r *Recipient) Send(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
	r.mu.Lock()
	n := 1
	for _, q := range r.requests {
		if q.DeliveryID == p.Delivery.ID {
			n++
		}
	}
	r.mu.Unlock()
	ans := Accept()
	if r.Script != nil {
		ans = r.Script(p.Delivery, n)
	}
	if ans.Block != nil {
		select {
		case <-ans.Block:
		case <-ctx.Done():
			r.record(p, false)
			return hookrelay.Unknown(hookrelay.ReasonTimeout)
		}
	}
	r.record(p, ans.Apply)
	return ans.Result
}

func (r *Recipient) record(p hookrelay.SendParams, apply bool) {
	d := p.Delivery
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.effects == nil {
		r.effects = map[string]int{}
	}
	applied := false
	if apply && r.effects[d.ID] == 0 {
		r.effects[d.ID]++
		applied = true
	}
	r.requests = append(r.requests, Request{DeliveryID: d.ID, EventID: d.EventID, DestinationID: d.DestinationID, Attempt: d.Attempt, At: p.Now, Applied: applied})
}

// Requests returns every request seen, in order.
func (r *Recipient) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

// RequestsFor returns the requests seen for one delivery ID.
func (r *Recipient) RequestsFor(id string) []Request {
	var out []Request
	for _, q := range r.Requests() {
		if q.DeliveryID == id {
			out = append(out, q)
		}
	}
	return out
}

// Effects returns how many times the business effect of a delivery was
// applied: at most one for a deduplicating recipient.
func (r *Recipient) Effects(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.effects[id]
}

// errCrash stands for the process dying at a boundary.
var errCrash = errors.New("hookrelaytest: injected crash")

// faults wraps a Queue and a Ledger and fails the named operation once,
// standing in for a process that dies at that point.
type faults struct {
	mu     sync.Mutex
	failOn map[string]int // operation → remaining failures
}

func (f *faults) hit(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failOn[op] > 0 {
		f.failOn[op]--
		return errCrash
	}
	return nil
}

type faultyLedger struct {
	hookrelay.Ledger
	f *faults
}

func (l faultyLedger) MarkDelivered(ctx context.Context, p hookrelay.MarkDeliveredParams) error {
	if err := l.f.hit("ledger.mark_delivered"); err != nil {
		return err
	}
	return l.Ledger.MarkDelivered(ctx, p)
}

func (l faultyLedger) RecordRetry(ctx context.Context, p hookrelay.RecordRetryParams) error {
	if err := l.f.hit("ledger.record_retry"); err != nil {
		return err
	}
	return l.Ledger.RecordRetry(ctx, p)
}

func (l faultyLedger) RecordDeadLetter(ctx context.Context, p hookrelay.RecordDeadLetterParams) error {
	if err := l.f.hit("ledger.record_dead_letter"); err != nil {
		return err
	}
	return l.Ledger.RecordDeadLetter(ctx, p)
}

func (l faultyLedger) WasDelivered(ctx context.Context, id string) (bool, error) {
	if err := l.f.hit("ledger.was_delivered"); err != nil {
		return false, err
	}
	return l.Ledger.WasDelivered(ctx, id)
}

type faultyQueue struct {
	hookrelay.Queue
	f *faults
}

func (q faultyQueue) Acknowledge(ctx context.Context, p hookrelay.AckParams) error {
	if err := q.f.hit("queue.acknowledge"); err != nil {
		return err
	}
	return q.Queue.Acknowledge(ctx, p)
}

func (q faultyQueue) RetryAt(ctx context.Context, p hookrelay.RetryAtParams) error {
	if err := q.f.hit("queue.retry_at"); err != nil {
		return err
	}
	return q.Queue.RetryAt(ctx, p)
}

func (q faultyQueue) DeadLetter(ctx context.Context, p hookrelay.DeadLetterParams) error {
	if err := q.f.hit("queue.dead_letter"); err != nil {
		return err
	}
	return q.Queue.DeadLetter(ctx, p)
}

type faultyDestinations struct {
	DestinationStore
	f *faults
}

func (d faultyDestinations) Destination(ctx context.Context, id string) (hookrelay.Destination, error) {
	if err := d.f.hit("destinations.get"); err != nil {
		return hookrelay.Destination{}, err
	}
	return d.DestinationStore.Destination(ctx, id)
}

// base is the suite's start time: whole seconds, so every store can
// round-trip it exactly.
var base = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
