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

// TestEnqueueBatchBeyondOneStatementsParameterLimit: EnqueueMany,
// EnqueueTx and Publish have no maximum batch size. A batch whose rows as
// one INSERT would bind more than PostgreSQL's 65535 parameters (and
// SQLite's 32766) is stored whole in one transaction, as statements of up
// to insertChunkRows rows: every delivery is stored once, and each
// result's Created says whether its record is new — for repeats within the
// batch and records stored before it, on either side of a chunk boundary.
func TestEnqueueBatchBeyondOneStatementsParameterLimit(t *testing.T) {
	const n = 65535/deliveryColCount + 100 // one statement would exceed PostgreSQL's limit
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		const dests = insertChunkRows + 1 // Publish's fan-out takes two statements
		for i := range dests {
			require.NoError(t, s.Put(ctx, hookrelay.Destination{ID: fmt.Sprintf("d%04d", i), TenantID: "t", URL: "https://a.example/h", EventTypes: []string{"order.*"}}))
		}
		c, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: s})
		require.NoError(t, err)
		params := func(prefix string, count int) []hookrelay.EnqueueParams {
			ps := make([]hookrelay.EnqueueParams, count)
			for i := range ps {
				ps[i] = hookrelay.EnqueueParams{EventID: fmt.Sprintf("%s%05d", prefix, i), TenantID: "t", DestinationID: fmt.Sprintf("d%04d", i%3), EventType: "x", Payload: []byte(`{}`)}
			}
			return ps
		}
		count := func() int {
			var got int
			require.NoError(t, s.DB().QueryRowContext(ctx, s.q("SELECT count(*) FROM {d}")).Scan(&got))
			return got
		}

		// Stored before: one record in the first chunk, one at a boundary.
		before := params("e", n)
		_, err = c.EnqueueMany(ctx, []hookrelay.EnqueueParams{before[7], before[insertChunkRows]})
		require.NoError(t, err)
		batch := append(before, before[n-1], before[0]) // repeats within the batch
		res, err := c.EnqueueMany(ctx, batch)
		require.NoError(t, err)
		require.Len(t, res, n+2)
		for i, r := range res {
			want := i < n && i != 7 && i != insertChunkRows
			require.Equal(t, want, r.Created, "result %d", i)
		}
		require.Equal(t, n, count(), "every delivery stored once")

		ds, err := c.Prepare(ctx, params("x", n))
		require.NoError(t, err)
		tx, err := s.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		created, err := s.EnqueueTx(ctx, tx, ds)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		require.Len(t, created, n)
		assert.NotContains(t, created, false)
		require.Equal(t, 2*n, count())

		pub, err := c.Publish(ctx, hookrelay.PublishParams{EventID: "evt_pub", TenantID: "t", EventType: "order.placed", Payload: []byte(`{}`)})
		require.NoError(t, err)
		require.Len(t, pub.Deliveries, dests)
		for _, d := range pub.Deliveries {
			require.True(t, d.Created, d.DestinationID)
		}
		require.Equal(t, 2*n+dests, count())
	})
}
