package recipienttest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay/adapters/http/recipient"
)

// Purge deletes a store's records completed before before and returns how
// many it deleted: recipient.MemoryStore's Purge or hooksql's
// IdempotencyStore.Purge, adapted.
type Purge func(ctx context.Context, before time.Time) (int64, error)

// NewPurgingStore returns a fresh, empty store and its Purge, and registers
// any cleanup with t.Cleanup.
type NewPurgingStore func(t *testing.T) (recipient.IdempotencyStore, Purge)

// RunPurge runs the purge tests against the stores newStore builds: every
// store removes the same records for the same calls.
func RunPurge(t *testing.T, newStore NewPurgingStore) {
	ctx := context.Background()
	complete := func(t *testing.T, s recipient.IdempotencyStore, key string, at time.Time) {
		t.Helper()
		r := begin(t, s, key, at)
		require.Equal(t, recipient.StateStarted, r.State)
		require.NoError(t, s.Complete(ctx, recipient.CompleteParams{Key: key, Token: r.Token, Response: recipient.StoredResponse{Status: 200}, Now: at}))
	}

	t.Run("RemovesWhatCompletedBeforeTheCutoff", func(t *testing.T) {
		s, purge := newStore(t)
		complete(t, s, "a", t0)
		complete(t, s, "b", t0.Add(time.Second))
		complete(t, s, "c", t0.Add(time.Hour))

		n, err := purge(ctx, t0)
		require.NoError(t, err)
		assert.Zero(t, n, "nothing completed before t0")
		n, err = purge(ctx, t0.Add(time.Hour))
		require.NoError(t, err)
		assert.EqualValues(t, 2, n, "a and b; c completed at the cutoff, not before")
		assert.Equal(t, recipient.StateStarted, begin(t, s, "a", t0.Add(time.Hour)).State, "purged: a new run")
		assert.Equal(t, recipient.StateCompleted, begin(t, s, "c", t0.Add(time.Hour)).State, "kept")
		n, err = purge(ctx, t0.Add(time.Hour))
		require.NoError(t, err)
		assert.Zero(t, n, "already purged")
	})

	t.Run("NeverRemovesARecordInProgress", func(t *testing.T) {
		s, purge := newStore(t)
		running := begin(t, s, "running", t0)
		require.Equal(t, recipient.StateStarted, running.State)
		begin(t, s, "taken", t0)
		taken := begin(t, s, "taken", t0.Add(stale))
		require.Equal(t, recipient.StateStarted, taken.State, "taken over")
		complete(t, s, "done", t0)

		// Long past StaleAfter: the handlers may still be running.
		late := t0.Add(365 * 24 * time.Hour)
		n, err := purge(ctx, late)
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "only the completed record")
		assert.NoError(t, s.Complete(ctx, recipient.CompleteParams{Key: "running", Token: running.Token, Response: recipient.StoredResponse{Status: 200}, Now: late}),
			"a handler that outlived its StaleAfter still completes its record")
		assert.NoError(t, s.Complete(ctx, recipient.CompleteParams{Key: "taken", Token: taken.Token, Response: recipient.StoredResponse{Status: 200}, Now: late}))
		assert.Equal(t, recipient.StateCompleted, begin(t, s, "running", late).State)
	})
}
