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
