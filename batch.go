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

type batchedWrite struct {
	w   LedgerWrite
	err chan error // buffered: the batcher never waits for the attempt
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

// write hands w to the batcher, calls queued once it is accepted, and
// returns w's result once its batch committed (or failed).
func (b *batcher) write(w LedgerWrite, queued func()) error {
	bw := &batchedWrite{w: w, err: make(chan error, 1)}
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
