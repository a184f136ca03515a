package hooksql

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// TestRecordBatchLargerThanOneStatement: a batch of more writes than one
// statement takes (insertChunkRows), whose attempts' details together
// exceed insertChunkBytes, is recorded whole, each write still judged by its
// own lease — the MySQL batch splits its locking read, its joined update
// and its attempts' insert, and each split must neither drop nor repeat a
// row.
func TestRecordBatchLargerThanOneStatement(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		const n = 2*insertChunkRows + 100
		ds := make([]hookrelay.Delivery, n)
		for i := range ds {
			ds[i] = newDelivery(fmt.Sprintf("evt_%d", i), fmt.Sprintf("dst_%d", i%7), t0.Add(time.Duration(i)))
		}
		_, err := s.Create(ctx, ds)
		require.NoError(t, err)
		now := t0.Add(time.Hour)
		claims, err := s.Claim(ctx, hookrelay.ClaimParams{Now: now, Limit: n, LeaseFor: time.Hour, Holder: "w", DefaultDestinationRoom: n})
		require.NoError(t, err)
		require.Len(t, claims, n)

		detail := strings.Repeat("d", insertChunkBytes/300) // about 300 rows fill one insert
		writes := make([]hookrelay.LedgerWrite, 0, n+1)
		for i, cl := range claims {
			writes = append(writes, hookrelay.LedgerWrite{Delivered: &hookrelay.MarkDeliveredParams{
				ID: cl.Delivery.ID, Lease: cl.Lease, Now: now,
				Attempt: hookrelay.Attempt{DeliveryID: cl.Delivery.ID, Number: 1, StartedAt: now, FinishedAt: now,
					Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 204, Detail: fmt.Sprintf("%d:%s", i, detail)},
			}})
		}
		stale := claims[insertChunkRows] // at a chunk boundary
		stale.Lease.Token--
		writes = append(writes, hookrelay.LedgerWrite{Delivered: &hookrelay.MarkDeliveredParams{
			ID: stale.Delivery.ID, Lease: stale.Lease, Now: now,
			Attempt: hookrelay.Attempt{DeliveryID: stale.Delivery.ID, Number: 1, StartedAt: now, FinishedAt: now, Kind: hookrelay.KindDelivered},
		}})
		errs, err := s.RecordBatch(ctx, writes)
		require.NoError(t, err)
		require.Len(t, errs, n+1)
		for i := range n {
			require.NoError(t, errs[i], "write %d", i)
		}
		assert.ErrorIs(t, errs[n], hookrelay.ErrLeaseLost, "the stale token is refused")

		for i, cl := range claims {
			got, err := s.Get(ctx, cl.Delivery.ID)
			require.NoError(t, err)
			require.Equal(t, hookrelay.StateDelivered, got.State, "delivery %d", i)
			atts, err := s.Attempts(ctx, cl.Delivery.ID)
			require.NoError(t, err)
			require.Len(t, atts, 1, "delivery %d: one attempt, its own", i)
			require.Equal(t, fmt.Sprintf("%d:%s", i, detail), atts[0].Detail, "delivery %d", i)
		}
	})
}
