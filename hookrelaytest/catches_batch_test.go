package hookrelaytest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaytest"
)

// brokenEnv selects, in a child run of this test binary, which deliberately
// wrong store the suite's cases run against.
const brokenEnv = "HOOKRELAYTEST_BROKEN_STORE"

// brokenStores are wrong implementations of the batch and room abilities,
// each with the conformance case that must reject it.
var brokenStores = map[string]struct {
	newStore func() any
	caseName string
}{
	// Writes every row of a batch whatever its lease: a stale holder
	// overwrites a newer attempt.
	"batch-ignores-fencing": {func() any { return &unfencedBatch{Store: memory.NewStore()} },
		"BatchLedger/EachWriteIsFencedByItsOwnLease"},
	// One refused row fails the whole batch: the others' results are lost.
	"batch-fails-whole-on-one-row": {func() any { return &allOrNothingBatch{Store: memory.NewStore()} },
		"BatchLedger/EachWriteIsFencedByItsOwnLease"},
	// Applies the writes, then reports that the batch failed.
	"batch-half-written-on-failure": {func() any { return &halfWrittenBatch{Store: memory.NewStore()} },
		"BatchLedger/AFailedBatchWritesNothingAndEveryDeliveryComesBack"},
	// Declares the room ability but claims oldest first whatever the rooms.
	"claim-ignores-rooms": {func() any { return &roomBlindQueue{Store: memory.NewStore()} },
		"ClaimsByDestinationRoom/OneClaimFillsEveryDestinationsRoom"},
}

// TestSuiteRejectsBrokenBatchAndRoomStores runs each broken store through
// the suite in a child process and checks that the case meant to catch it
// fails there (and that a correct store passes the same cases).
func TestSuiteRejectsBrokenBatchAndRoomStores(t *testing.T) {
	if name := os.Getenv(brokenEnv); name != "" {
		b := brokenStores[name]
		hookrelaytest.Run(t, func(t *testing.T) hookrelaytest.Harness {
			s := b.newStore()
			return hookrelaytest.Harness{Queue: s.(hookrelay.Queue), Ledger: s.(hookrelay.Ledger), Destinations: memory.NewDestinations()}
		})
		return
	}
	if testing.Short() {
		t.Skip("runs the suite in child processes")
	}
	for name, b := range brokenStores {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteRejectsBrokenBatchAndRoomStores$", "-test.v")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed a broken store (%s): %v\n%s", name, err, tail(out))
			}
			if !strings.Contains(string(out), "--- FAIL: TestSuiteRejectsBrokenBatchAndRoomStores/"+b.caseName) {
				t.Errorf("case %s did not reject %s:\n%s", b.caseName, name, tail(out))
			}
		})
	}
}

func tail(b []byte) string {
	s := string(b)
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

type unfencedBatch struct{ *memory.Store }

// RecordBatch writes a stale row by first taking the lease over, as a store
// without per-row fencing would.
func (u *unfencedBatch) RecordBatch(ctx context.Context, ws []hookrelay.LedgerWrite) ([]error, error) {
	errs, err := u.Store.RecordBatch(ctx, ws)
	for i, e := range errs {
		if errors.Is(e, hookrelay.ErrLeaseLost) && ws[i].Delivered != nil {
			d, _ := u.Store.Get(ctx, ws[i].Delivered.ID)
			p := *ws[i].Delivered
			if cl, aerr := u.Store.AcquireLease(ctx, hookrelay.AcquireLeaseParams{ID: d.ID, Holder: "x", Now: p.Now.Add(1 << 40), LeaseFor: 1}); aerr == nil {
				p.Lease = cl.Lease
			}
			errs[i] = u.Store.MarkDelivered(ctx, p)
		}
	}
	return errs, err
}

type allOrNothingBatch struct{ *memory.Store }

func (a *allOrNothingBatch) RecordBatch(ctx context.Context, ws []hookrelay.LedgerWrite) ([]error, error) {
	errs, err := a.Store.RecordBatch(ctx, ws)
	for _, e := range errs {
		if e != nil {
			return nil, e
		}
	}
	return errs, err
}

type halfWrittenBatch struct{ *memory.Store }

func (h *halfWrittenBatch) RecordBatch(ctx context.Context, ws []hookrelay.LedgerWrite) ([]error, error) {
	errs, err := h.Store.RecordBatch(context.WithoutCancel(ctx), ws)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return errs, err
}

type roomBlindQueue struct{ *memory.Store }

func (r *roomBlindQueue) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	p.DestinationRoom, p.DefaultDestinationRoom = nil, 0
	return r.Store.Claim(ctx, p)
}
