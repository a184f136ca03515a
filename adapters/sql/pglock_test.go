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
	d := newDelivery("evt_locked", "dst_1", t0)

	holder, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	_, err = s.EnqueueTx(ctx, holder, []hookrelay.Delivery{d})
	require.NoError(t, err)

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
