package hookrelaytest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

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

// onceEachBatch writes each delivery once per batch and answers its later
// writes as done, as a batch that judged every write on the rows as they
// were before it, and took a second write to a row for a repeat, would.
type onceEachBatch struct{ *memory.Store }

func (o *onceEachBatch) RecordBatch(ctx context.Context, ws []hookrelay.LedgerWrite) ([]error, error) {
	seen := map[string]bool{}
	var keep []int
	for i, w := range ws {
		id := w.DeliveryID()
		if !seen[id] {
			seen[id] = true
			keep = append(keep, i)
		}
	}
	some := make([]hookrelay.LedgerWrite, len(keep))
	for k, i := range keep {
		some[k] = ws[i]
	}
	errs, err := o.Store.RecordBatch(ctx, some)
	if err != nil {
		return nil, err
	}
	out := make([]error, len(ws))
	for k, i := range keep {
		out[i] = errs[k]
	}
	return out, nil
}

// roomBlindQueue declares the room ability but claims oldest first
// whatever the rooms.
type roomBlindQueue struct{ *memory.Store }

func (r *roomBlindQueue) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	p.DestinationRoom, p.DefaultDestinationRoom = nil, 0
	return r.Store.Claim(ctx, p)
}

// Broken implementations of the retention and recovery abilities.

// removesDead removes dead records whatever the policy says.
type removesDead struct{ *memory.Store }

func (r *removesDead) CleanHistory(ctx context.Context, p hookrelay.CleanHistoryParams) (hookrelay.CleanHistoryResult, error) {
	p.Policy.RemoveDead, p.Policy.Dead = true, 0
	return r.Store.CleanHistory(ctx, p)
}

// unboundedClean ignores the batch limit.
type unboundedClean struct{ *memory.Store }

func (u *unboundedClean) CleanHistory(ctx context.Context, p hookrelay.CleanHistoryParams) (hookrelay.CleanHistoryResult, error) {
	p.Limit = 1 << 30
	return u.Store.CleanHistory(ctx, p)
}

// dryRunWrites runs the cleaner for real when asked for a dry run.
type dryRunWrites struct{ *memory.Store }

func (d *dryRunWrites) CleanHistory(ctx context.Context, p hookrelay.CleanHistoryParams) (hookrelay.CleanHistoryResult, error) {
	if p.DryRun {
		p.DryRun, p.Limit = false, 1<<30
	}
	return d.Store.CleanHistory(ctx, p)
}

// compactsAtOnce compacts attempt details as soon as a record is
// delivered.
type compactsAtOnce struct{ *memory.Store }

func (c *compactsAtOnce) CleanHistory(ctx context.Context, p hookrelay.CleanHistoryParams) (hookrelay.CleanHistoryResult, error) {
	p.Policy.AttemptDetails = 0
	return c.Store.CleanHistory(ctx, p)
}

// noGrace takes every due unleased record at once.
type noGrace struct{ *memory.Store }

func (n *noGrace) TakeUnpublished(ctx context.Context, p hookrelay.RecoverUnpublishedParams) ([]hookrelay.Delivery, error) {
	p.Grace = 0
	return n.Store.TakeUnpublished(ctx, p)
}

// takesSkipped ignores the destinations the worker skips.
type takesSkipped struct{ *memory.Store }

func (s *takesSkipped) TakeUnpublished(ctx context.Context, p hookrelay.RecoverUnpublishedParams) ([]hookrelay.Delivery, error) {
	p.SkipDestinations = nil
	return s.Store.TakeUnpublished(ctx, p)
}

// rowCounter reports the rows its deletes affected — the record and its
// attempt — instead of the records removed: an easy slip when a cleaner
// sums RowsAffected over the statements of a batch.
type rowCounter struct{ *memory.Store }

func (r *rowCounter) CleanHistory(ctx context.Context, p hookrelay.CleanHistoryParams) (hookrelay.CleanHistoryResult, error) {
	res, err := r.Store.CleanHistory(ctx, p)
	for i := range res.Counts {
		res.Counts[i].Removed *= 2 // each record the suite settles has one attempt
	}
	return res, err
}

// unmarkedTake never marks what it returned as taken, so the same records
// come back on every call, to every caller.
type unmarkedTake struct {
	*memory.Store
	mu    sync.Mutex
	taken []hookrelay.Delivery
}

func (u *unmarkedTake) TakeUnpublished(ctx context.Context, p hookrelay.RecoverUnpublishedParams) ([]hookrelay.Delivery, error) {
	got, err := u.Store.TakeUnpublished(ctx, p)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	out := slices.Clone(got)
	for _, d := range u.taken {
		if cur, err := u.Store.Get(ctx, d.ID); err == nil && cur.State == hookrelay.StatePending && len(out) < p.Limit &&
			!slices.ContainsFunc(out, func(o hookrelay.Delivery) bool { return o.ID == d.ID }) {
			out = append(out, cur)
		}
	}
	u.taken = append(u.taken, got...)
	return out, nil
}
