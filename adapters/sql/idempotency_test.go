package hooksql

import (
	"context"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/adapters/http/recipient"
	"github.com/hookrelay/hookrelay/adapters/http/recipient/recipienttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIdempotencyStoreConformance runs the recipient kit's store suite on
// every configured backend.
func TestIdempotencyStoreConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		recipienttest.RunIdempotencyStore(t, func(t *testing.T) recipient.IdempotencyStore {
			return newStore(t, b, Options{}).IdempotencyStore()
		})
	})
}

// TestIdempotencyStorePurgeConformance runs the recipient kit's purge
// cases, which the memory store runs too, on every configured backend.
func TestIdempotencyStorePurgeConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		recipienttest.RunPurge(t, func(t *testing.T) (recipient.IdempotencyStore, recipienttest.Purge) {
			st := newStore(t, b, Options{}).IdempotencyStore()
			st.purgeBatch = 2 // several batches over the cases' records
			return st, st.Purge
		})
	})
}

func TestIdempotencyStorePurgeAndBadKeys(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := newStore(t, b, Options{}).IdempotencyStore()
		r, err := st.Begin(ctx, recipient.BeginParams{Key: "msg_1", Now: t0, StaleAfter: time.Minute})
		require.NoError(t, err)
		require.NoError(t, st.Complete(ctx, recipient.CompleteParams{Key: "msg_1", Token: r.Token, Response: recipient.StoredResponse{Status: 204}, Now: t0}))
		_, err = st.Begin(ctx, recipient.BeginParams{Key: "msg_2", Now: t0, StaleAfter: time.Minute})
		require.NoError(t, err)

		n, err := st.Purge(ctx, t0.Add(time.Hour))
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "only completed records are purged")
		r, err = st.Begin(ctx, recipient.BeginParams{Key: "msg_1", Now: t0.Add(time.Hour), StaleAfter: time.Minute})
		require.NoError(t, err)
		assert.Equal(t, recipient.StateStarted, r.State)

		_, err = st.Begin(ctx, recipient.BeginParams{Key: "bad\xff", Now: t0, StaleAfter: time.Minute})
		require.Error(t, err)
		_, err = st.Begin(ctx, recipient.BeginParams{Key: "", Now: t0, StaleAfter: time.Minute})
		require.Error(t, err)
	})
}

// seedIdempotency stores a completed record per key in done (completed at
// at) and an in-progress one per key in running (begun at t0).
func seedIdempotency(t *testing.T, st *IdempotencyStore, at time.Time, done []string, running ...string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range done {
		r, err := st.Begin(ctx, recipient.BeginParams{Key: k, Now: at, StaleAfter: time.Minute})
		require.NoError(t, err)
		require.NoError(t, st.Complete(ctx, recipient.CompleteParams{Key: k, Token: r.Token, Response: recipient.StoredResponse{Status: 204}, Now: at}))
	}
	for _, k := range running {
		r, err := st.Begin(ctx, recipient.BeginParams{Key: k, Now: t0, StaleAfter: time.Minute})
		require.NoError(t, err)
		require.Equal(t, recipient.StateStarted, r.State)
	}
}

func idempotencyRows(t *testing.T, st *IdempotencyStore) int {
	t.Helper()
	var n int
	require.NoError(t, st.s.db.QueryRowContext(context.Background(), st.s.q("SELECT COUNT(*) FROM {i}")).Scan(&n))
	return n
}

// A receiver that has not purged for months holds millions of records:
// one DELETE of them all was one huge transaction, holding its locks and
// growing the WAL or undo log until it committed. Purge removes them in
// batches of a bounded size, each committed on its own.
func TestIdempotencyPurgeRunsInBatches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := newStore(t, b, Options{}).IdempotencyStore()
		old := []string{"k00", "k01", "k02", "k03", "k04", "k05", "k06", "k07", "k08", "k09"}
		seedIdempotency(t, st, t0, old, "k03r", "k07r")
		seedIdempotency(t, st, t0.Add(2*time.Hour), []string{"k05z"})
		var batches []int64
		st.purgeBatch, st.purgeCommitted = 3, func(n int64) { batches = append(batches, n) }

		n, err := st.Purge(context.Background(), t0.Add(time.Hour))
		require.NoError(t, err)
		assert.EqualValues(t, len(old), n)
		assert.GreaterOrEqual(t, len(batches), 4, "10 records in batches of 3: %v", batches)
		sum := int64(0)
		for _, c := range batches {
			assert.LessOrEqual(t, c, int64(3), "batches %v", batches)
			sum += c
		}
		assert.Equal(t, n, sum, "the batches add up to the total")
		assert.Equal(t, 3, idempotencyRows(t, st), "the in-progress records and the recent one are kept")
	})
}

// Purge honours its context between batches, and a purge that stops part
// way returns, with the error, how many records its committed batches
// removed: those are gone, and the caller cannot learn it otherwise.
func TestIdempotencyPurgeCanceledPartWayReportsWhatCommitted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := newStore(t, b, Options{}).IdempotencyStore()
		seedIdempotency(t, st, t0, []string{"k00", "k01", "k02", "k03", "k04", "k05", "k06", "k07", "k08", "k09"})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var first int64 = -1
		st.purgeBatch, st.purgeCommitted = 3, func(n int64) {
			if first < 0 {
				first = n
				cancel()
			}
		}

		n, err := st.Purge(ctx, t0.Add(time.Hour))
		require.ErrorIs(t, err, context.Canceled)
		assert.EqualValues(t, 3, first)
		assert.Equal(t, first, n, "the first batch committed before the cancellation")
		assert.EqualValues(t, 10-n, idempotencyRows(t, st), "exactly what was reported is gone")
	})
}
