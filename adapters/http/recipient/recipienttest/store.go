// Package recipienttest is the conformance suite of recipient.IdempotencyStore:
// the memory store and any SQL or user implementation run the same tests
// by handing RunIdempotencyStore a constructor of fresh, empty stores.
//
//	func TestStore(t *testing.T) {
//		recipienttest.RunIdempotencyStore(t, func(t *testing.T) recipient.IdempotencyStore {
//			return recipient.NewMemoryStore()
//		})
//	}
//
// RunPurge does the same for the stores' Purge methods, which are not part
// of the interface: it takes a store and its Purge.
package recipienttest

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay/adapters/http/recipient"
)

// NewStore returns a fresh, empty store for one test and registers any
// cleanup with t.Cleanup.
type NewStore func(t *testing.T) recipient.IdempotencyStore

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const stale = time.Minute

func begin(t *testing.T, s recipient.IdempotencyStore, key string, now time.Time) recipient.BeginResult {
	t.Helper()
	r, err := s.Begin(context.Background(), recipient.BeginParams{Key: key, Now: now, StaleAfter: stale})
	require.NoError(t, err)
	return r
}

// RunIdempotencyStore runs every store test against the stores newStore
// builds.
func RunIdempotencyStore(t *testing.T, newStore NewStore) {
	ctx := context.Background()

	t.Run("ConcurrentBeginHasOneWinner", func(t *testing.T) {
		s := newStore(t)
		results := make([]recipient.BeginResult, 16)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				r, err := s.Begin(ctx, recipient.BeginParams{Key: "k", Now: t0, StaleAfter: stale})
				assert.NoError(t, err)
				results[i] = r
			})
		}
		wg.Wait()
		started := 0
		for _, r := range results {
			switch r.State {
			case recipient.StateStarted:
				started++
				assert.NotEmpty(t, r.Token)
			case recipient.StateInProgress:
			default:
				t.Errorf("unexpected state %d", r.State)
			}
		}
		assert.Equal(t, 1, started)
	})

	t.Run("KeysAreIndependent", func(t *testing.T) {
		s := newStore(t)
		assert.Equal(t, recipient.StateStarted, begin(t, s, "a", t0).State)
		assert.Equal(t, recipient.StateStarted, begin(t, s, "b", t0).State)
		assert.Equal(t, recipient.StateInProgress, begin(t, s, "a", t0).State)
	})

	t.Run("CompletedRecordReplaysItsResponse", func(t *testing.T) {
		s := newStore(t)
		r := begin(t, s, "k", t0)
		resp := recipient.StoredResponse{Status: 201, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("booked")}
		require.NoError(t, s.Complete(ctx, recipient.CompleteParams{Key: "k", Token: r.Token, Response: resp, Now: t0}))
		resp.Body[0] = 'X' // the store keeps its own copy
		resp.Header.Set("Content-Type", "changed")

		got := begin(t, s, "k", t0.Add(24*time.Hour))
		assert.Equal(t, recipient.StateCompleted, got.State, "completed records never go stale")
		assert.Equal(t, 201, got.Response.Status)
		assert.Equal(t, "booked", string(got.Response.Body))
		assert.Equal(t, "text/plain", got.Response.Header.Get("Content-Type"))
		assert.ErrorIs(t, s.Complete(ctx, recipient.CompleteParams{Key: "k", Token: r.Token, Now: t0}), recipient.ErrRecordLost, "completing twice")
		assert.ErrorIs(t, s.Abandon(ctx, recipient.AbandonParams{Key: "k", Token: r.Token}), recipient.ErrRecordLost, "completed records are not abandoned")
	})

	t.Run("AbandonedRecordRunsAgain", func(t *testing.T) {
		s := newStore(t)
		r := begin(t, s, "k", t0)
		require.NoError(t, s.Abandon(ctx, recipient.AbandonParams{Key: "k", Token: r.Token}))
		again := begin(t, s, "k", t0)
		assert.Equal(t, recipient.StateStarted, again.State)
		assert.NotEqual(t, r.Token, again.Token)
	})

	t.Run("WrongTokenIsRefused", func(t *testing.T) {
		s := newStore(t)
		begin(t, s, "k", t0)
		assert.ErrorIs(t, s.Complete(ctx, recipient.CompleteParams{Key: "k", Token: "other", Now: t0}), recipient.ErrRecordLost)
		assert.ErrorIs(t, s.Abandon(ctx, recipient.AbandonParams{Key: "k", Token: "other"}), recipient.ErrRecordLost)
		assert.ErrorIs(t, s.Complete(ctx, recipient.CompleteParams{Key: "missing", Token: "x", Now: t0}), recipient.ErrRecordLost)
		assert.Equal(t, recipient.StateInProgress, begin(t, s, "k", t0).State, "still held")
	})

	t.Run("StaleRunIsTakenOverAndFencedOut", func(t *testing.T) {
		s := newStore(t)
		old := begin(t, s, "k", t0)
		assert.Equal(t, recipient.StateInProgress, begin(t, s, "k", t0.Add(stale-time.Second)).State)
		taken := begin(t, s, "k", t0.Add(stale))
		require.Equal(t, recipient.StateStarted, taken.State)
		assert.NotEqual(t, old.Token, taken.Token)
		assert.ErrorIs(t, s.Complete(ctx, recipient.CompleteParams{Key: "k", Token: old.Token, Now: t0.Add(stale)}), recipient.ErrRecordLost)
		assert.ErrorIs(t, s.Abandon(ctx, recipient.AbandonParams{Key: "k", Token: old.Token}), recipient.ErrRecordLost)
		require.NoError(t, s.Complete(ctx, recipient.CompleteParams{Key: "k", Token: taken.Token, Response: recipient.StoredResponse{Status: 200}, Now: t0.Add(stale)}))
		assert.Equal(t, recipient.StateCompleted, begin(t, s, "k", t0.Add(stale)).State)
	})

	t.Run("BodyHashIsKeptWithTheRecord", func(t *testing.T) {
		s := newStore(t)
		hashA, hashB := bytes.Repeat([]byte{0xa1}, 32), bytes.Repeat([]byte{0xb2}, 32)
		begin := func(key string, now time.Time, hash []byte) recipient.BeginResult {
			t.Helper()
			r, err := s.Begin(ctx, recipient.BeginParams{Key: key, Now: now, StaleAfter: stale, BodyHash: hash})
			require.NoError(t, err)
			return r
		}
		r := begin("k", t0, hashA)
		require.Equal(t, recipient.StateStarted, r.State)
		inProgress := begin("k", t0, hashB)
		assert.Equal(t, recipient.StateInProgress, inProgress.State)
		assert.Equal(t, hashA, inProgress.BodyHash, "the first request's hash, not the caller's")
		require.NoError(t, s.Complete(ctx, recipient.CompleteParams{Key: "k", Token: r.Token, Response: recipient.StoredResponse{Status: 200}, Now: t0}))
		done := begin("k", t0.Add(time.Hour), hashB)
		assert.Equal(t, recipient.StateCompleted, done.State)
		assert.Equal(t, hashA, done.BodyHash)

		// A stale run taken over keeps the new request's hash.
		begin("s", t0, hashA)
		taken := begin("s", t0.Add(stale), hashB)
		require.Equal(t, recipient.StateStarted, taken.State)
		assert.Equal(t, hashB, begin("s", t0.Add(stale), hashA).BodyHash)

		// A record begun without a hash reports none.
		begin("n", t0, nil)
		assert.Empty(t, begin("n", t0, hashA).BodyHash)
	})
}
