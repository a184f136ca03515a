package hookrelaytest_test

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// Broken implementations of the batch and room abilities, listed in
// brokenStores with the cases that reject them.

// unfencedBatch writes every row of a batch whatever its lease: a stale
// holder overwrites a newer attempt.
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

// reorderedBatch returns the results of the Delivered writes in the order
// the rows were stored (by delivery ID), not the order of the writes, as a
// multi-row statement without an ordering would.
type reorderedBatch struct{ *memory.Store }

func (r *reorderedBatch) RecordBatch(ctx context.Context, ws []hookrelay.LedgerWrite) ([]error, error) {
	errs, err := r.Store.RecordBatch(ctx, ws)
	var at []int
	for i, w := range ws {
		if w.Delivered != nil {
			at = append(at, i)
		}
	}
	sorted := slices.Clone(at)
	slices.SortFunc(sorted, func(a, b int) int { return strings.Compare(ws[a].Delivered.ID, ws[b].Delivered.ID) })
	out := slices.Clone(errs)
	for n, i := range at {
		if err == nil {
			out[i] = errs[sorted[n]]
		}
	}
	return out, err
}

// allOrNothingBatch fails the whole batch when one row is refused: the
// others' results are lost.
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

// halfWrittenBatch applies the writes, then reports that the batch failed.
type halfWrittenBatch struct{ *memory.Store }

func (h *halfWrittenBatch) RecordBatch(ctx context.Context, ws []hookrelay.LedgerWrite) ([]error, error) {
	errs, err := h.Store.RecordBatch(context.WithoutCancel(ctx), ws)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return errs, err
}

// roomBlindQueue declares the room ability but claims oldest first
// whatever the rooms.
type roomBlindQueue struct{ *memory.Store }

func (r *roomBlindQueue) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	p.DestinationRoom, p.DefaultDestinationRoom = nil, 0
	return r.Store.Claim(ctx, p)
}
