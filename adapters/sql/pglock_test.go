package hooksql

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// A caller's transaction on PostgreSQL with a lock_timeout whose EnqueueTx
// waits past it for a row another transaction is inserting is refused with
// 55P03 (lock_not_available): a conflict, ErrTxConflict, as MySQL's lock
// wait timeout is. PostgreSQL has aborted the transaction: it must be
// rolled back and run again.
func TestEnqueueTxPastItsLockTimeoutIsAConflict(t *testing.T) {
	b := backends[1]
	require.Equal(t, Postgres, b.dialect)
	b.skipUnlessConfigured(t)
	ctx := context.Background()
	s := newStore(t, b, Options{})
	d := insertedUncommitted(t, s, "evt_locked")

	tx, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, "SET LOCAL lock_timeout = '200ms'")
	require.NoError(t, err)
	_, err = s.EnqueueTx(ctx, tx, []hookrelay.Delivery{d})
	require.Error(t, err)
	assert.ErrorContains(t, err, "55P03")
	assert.ErrorIs(t, err, ErrTxConflict, "lost to another transaction: run it again")
	assert.ErrorIs(t, err, ErrDatabase)
}

// insertedUncommitted inserts a delivery of event in a transaction left
// open until the test ends, so another transaction inserting the same
// delivery waits for its lock.
func insertedUncommitted(t *testing.T, s *Store, event string) hookrelay.Delivery {
	t.Helper()
	ctx := context.Background()
	d := newDelivery(event, "dst_1", t0)
	holder, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback() })
	_, err = s.EnqueueTx(ctx, holder, []hookrelay.Delivery{d})
	require.NoError(t, err)
	return d
}
