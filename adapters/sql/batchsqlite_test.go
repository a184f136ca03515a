package hooksql

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// countingQuerier counts the statements run on a querier.
type countingQuerier struct {
	querier
	n int
}

func (c *countingQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	c.n++
	return c.querier.ExecContext(ctx, query, args...)
}

func (c *countingQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c.n++
	return c.querier.QueryContext(ctx, query, args...)
}

func (c *countingQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	c.n++
	return c.querier.QueryRowContext(ctx, query, args...)
}

// A SQLite ledger batch runs at most two statements per write made (the
// fenced update, the attempt row; one for a delivered write, whose attempt
// the update keeps in the row) instead of three (a read, the update, the
// attempt); only a write its fence refuses costs the read, which gives it
// the error it would get alone while the others commit.
func TestSQLiteBatchRunsTwoStatementsPerWrite(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backend{dialect: SQLite}, Options{})
	cs := createAndClaimAll(t, s, 8)
	attempt := func(c hookrelay.Claim) hookrelay.Attempt {
		return hookrelay.Attempt{DeliveryID: c.Delivery.ID, Number: c.Delivery.Attempt, StartedAt: t0, FinishedAt: t0,
			Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 204}
	}
	stale := cs[1].Lease
	stale.Token--
	// A lease its holder ended (released) fences its writes out too.
	require.NoError(t, s.Release(ctx, hookrelay.ReleaseParams{ID: cs[7].Delivery.ID, Lease: cs[7].Lease, At: t0, Now: t0}))
	writes := []hookrelay.LedgerWrite{
		{Delivered: &hookrelay.MarkDeliveredParams{ID: cs[0].Delivery.ID, Lease: cs[0].Lease, Attempt: attempt(cs[0]), Now: t0}},
		{Delivered: &hookrelay.MarkDeliveredParams{ID: cs[1].Delivery.ID, Lease: stale, Attempt: attempt(cs[1]), Now: t0}},
		{Retry: &hookrelay.RecordRetryParams{ID: cs[2].Delivery.ID, Lease: cs[2].Lease, Attempt: attempt(cs[2]),
			NextAttempt: 2, NextAttemptAt: t0.Add(time.Minute), Now: t0}},
		{DeadLetter: &hookrelay.RecordDeadLetterParams{ID: cs[3].Delivery.ID, Lease: cs[3].Lease, Reason: "test", Now: t0}},
		{Delivered: &hookrelay.MarkDeliveredParams{ID: "whd_missing", Lease: cs[4].Lease, Attempt: attempt(cs[4]), Now: t0}},
		// Again with the lease that delivered it: a no-op.
		{Delivered: &hookrelay.MarkDeliveredParams{ID: cs[0].Delivery.ID, Lease: cs[0].Lease, Attempt: attempt(cs[0]), Now: t0}},
		{Delivered: &hookrelay.MarkDeliveredParams{ID: cs[5].Delivery.ID, Lease: cs[5].Lease, Attempt: attempt(cs[5]), Now: t0}},
		{Delivered: &hookrelay.MarkDeliveredParams{ID: cs[6].Delivery.ID, Lease: cs[6].Lease, Attempt: attempt(cs[6]), Now: t0}},
		{Delivered: &hookrelay.MarkDeliveredParams{ID: cs[7].Delivery.ID, Lease: cs[7].Lease, Attempt: attempt(cs[7]), Now: t0}},
	}
	ops := make([]*fencedOp, len(writes))
	for i, w := range writes {
		var (
			o   fencedOp
			err error
		)
		switch {
		case w.Delivered != nil:
			o, err = markDeliveredOp(*w.Delivered)
		case w.Retry != nil:
			o, err = recordRetryOp(*w.Retry)
		default:
			o, err = recordDeadLetterOp(*w.DeadLetter)
		}
		require.NoError(t, err)
		ops[i] = &o
	}
	errs := make([]error, len(ops))
	var counted int
	require.NoError(t, s.inTx(ctx, "record batch", func(q querier) error {
		cq := &countingQuerier{querier: q}
		err := s.recordBatchSQLite(ctx, cq, ops, errs)
		counted = cq.n
		return err
	}))
	// Made: 0, 6 and 7 (update, its attempt kept in the row), 2 (update,
	// attempt), 3 (update; no attempt). Refused: 1, 4, 8 and the no-op 5
	// (update, read).
	assert.Equal(t, 3+2+1+4*2, counted)
	assert.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], hookrelay.ErrLeaseLost)
	assert.NoError(t, errs[2])
	assert.NoError(t, errs[3])
	assert.ErrorIs(t, errs[4], hookrelay.ErrNotFound)
	assert.NoError(t, errs[5])
	assert.NoError(t, errs[6])
	assert.NoError(t, errs[7])
	assert.ErrorIs(t, errs[8], hookrelay.ErrLeaseLost)

	states := map[string]hookrelay.State{}
	for _, c := range cs {
		d, err := s.Get(ctx, c.Delivery.ID)
		require.NoError(t, err)
		states[c.Delivery.ID] = d.State
	}
	assert.Equal(t, map[string]hookrelay.State{cs[0].Delivery.ID: hookrelay.StateDelivered, cs[1].Delivery.ID: hookrelay.StatePending,
		cs[2].Delivery.ID: hookrelay.StatePending, cs[3].Delivery.ID: hookrelay.StateDead, cs[4].Delivery.ID: hookrelay.StatePending,
		cs[5].Delivery.ID: hookrelay.StateDelivered, cs[6].Delivery.ID: hookrelay.StateDelivered, cs[7].Delivery.ID: hookrelay.StatePending}, states)
	for i, want := range []int{1, 0, 1, 0, 0, 1, 1, 0} {
		as, err := s.Attempts(ctx, cs[i].Delivery.ID)
		require.NoError(t, err)
		assert.Len(t, as, want, "attempts of %d", i)
	}
}
