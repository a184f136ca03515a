package hookrelay

import (
	"context"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"
)

// batcher groups the ledger writes of attempts that finish close together
// into one BatchLedger.RecordBatch call (group commit). It is owned by the
// worker's run loop: started with the worker, closed after the last attempt
// ended.
//
// A batch is flushed as soon as the previous one committed, with whatever
// arrived meanwhile (up to max writes), after an optional linger: under load
// the batches grow by themselves while a commit is in progress, and a lone
// write is not held back waiting for company — PostgreSQL's own group commit
// works the same way (commit_delay defaults to 0). Each write's attempt
// waits for its batch's answer before it acknowledges, schedules,
// dead-letters or reports anything, so the ordering rules hold unchanged.
type batcher struct {
	ctx    context.Context
	ledger BatchLedger
	in     chan *batchedWrite
	max    int
	linger time.Duration
	clock  clock.Clock
	done   chan struct{}
}

// batchedWrite is one attempt's write on its way through the batcher. Each
// goroutine that runs attempts owns one and reuses it for every write: it
// waits for a write's answer before it makes the next, and the batcher
// lets go of a write once it answered. The params the write points to are
// kept in it too, so handing a write over allocates nothing (three
// allocations per delivery before: the write, its channel and its params).
type batchedWrite struct {
	w   LedgerWrite
	err chan error // buffered: the batcher never waits for the attempt

	delivered MarkDeliveredParams
	retry     RecordRetryParams
	dead      RecordDeadLetterParams
}

func newBatchedWrite() *batchedWrite {
	return &batchedWrite{err: make(chan error, 1)}
}

// set makes bw's write a copy of w, pointing at bw's own params.
func (bw *batchedWrite) set(w LedgerWrite) {
	switch {
	case w.Delivered != nil:
		bw.delivered = *w.Delivered
		bw.w = LedgerWrite{Delivered: &bw.delivered}
	case w.Retry != nil:
		bw.retry = *w.Retry
		bw.w = LedgerWrite{Retry: &bw.retry}
	case w.DeadLetter != nil:
		bw.dead = *w.DeadLetter
		bw.w = LedgerWrite{DeadLetter: &bw.dead}
	default:
		bw.w = LedgerWrite{}
	}
}

// newBatcher returns a batcher whose queue holds up to size writes: an
// attempt hands its write over and frees its worker slot, and when the
// store falls behind, the hand-over blocks, so finished attempts never pile
// up beyond 2 × size.
func newBatcher(ctx context.Context, l BatchLedger, size int, linger time.Duration, clk clock.Clock) *batcher {
	size = max(size, 1)
	return &batcher{
		ctx: ctx, ledger: l, in: make(chan *batchedWrite, size), max: size,
		linger: linger, clock: clk, done: make(chan struct{}),
	}
}

// write hands w to the batcher through bw (the caller's own, from
// newBatchedWrite; nil: a new one), calls queued once it is accepted, and
// returns w's result once its batch committed (or failed). w is copied:
// the caller's params may live on its stack.
func (b *batcher) write(bw *batchedWrite, w LedgerWrite, queued func()) error {
	if bw == nil {
		bw = newBatchedWrite()
	}
	bw.set(w)
	b.in <- bw
	if queued != nil {
		queued()
	}
	return <-bw.err
}

// close ends run after it flushed what it holds. No write may follow.
func (b *batcher) close() {
	close(b.in)
	<-b.done
}

func (b *batcher) run() {
	defer close(b.done)
	batch := make([]*batchedWrite, 0, b.max)
	for first := range b.in {
		batch = append(batch[:0], first)
		open := b.gather(&batch)
		b.flush(batch)
		if !open {
			return
		}
	}
}

// gather adds to batch what is already waiting, then (with a linger) what
// arrives within the linger, up to max. It reports false once in is closed
// and drained.
func (b *batcher) gather(batch *[]*batchedWrite) bool {
	var linger <-chan time.Time
	if b.linger > 0 {
		t := b.clock.Timer(b.linger)
		defer t.Stop()
		linger = t.C
	}
	for len(*batch) < b.max {
		select {
		case w, ok := <-b.in:
			if !ok {
				return false
			}
			*batch = append(*batch, w)
			continue
		default:
		}
		if linger == nil {
			return true // nothing more is waiting: flush now
		}
		select {
		case w, ok := <-b.in:
			if !ok {
				return false
			}
			*batch = append(*batch, w)
		case <-linger:
			return true
		}
	}
	return true
}

func (b *batcher) flush(batch []*batchedWrite) {
	writes := make([]LedgerWrite, len(batch))
	for i, bw := range batch {
		writes[i] = bw.w
	}
	errs, err := b.ledger.RecordBatch(b.ctx, writes)
	if err == nil && len(errs) != len(writes) {
		err = fmt.Errorf("hookrelay: ledger.record_batch returned %d results for %d writes", len(errs), len(writes))
	}
	for i, bw := range batch {
		if err != nil {
			bw.err <- err
		} else {
			bw.err <- errs[i]
		}
	}
}
