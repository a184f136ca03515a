package hooksql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// TestClaimReadsEveryColumnAsGetDoes claims, in one claim, deliveries that
// differ in every column a claim reads — payload nil or empty, scope nil,
// empty or set, labels that repeat across rows and labels that do not, a
// last outcome and reason, budget and window starts — and checks that each
// claimed delivery is the record Get reads. On PostgreSQL a claim decodes
// its rows on its own path (pgxDeliveryReader), which shares repeated
// labels between deliveries; Get reads through scanDelivery.
func TestClaimReadsEveryColumnAsGetDoes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		var ds []hookrelay.Delivery
		for i := range 12 {
			d := newDelivery(fmt.Sprintf("evt_%02d", i), fmt.Sprintf("dst_%d", i%3), t0.Add(time.Duration(i)))
			d.TenantID = fmt.Sprintf("tenant_%d", i%2)
			d.EventType = fmt.Sprintf("type.%d", i%4)
			d.PolicyVersion = fmt.Sprintf("policy_%d", i%5)
			d.Payload = []byte(fmt.Sprintf(`{"n":%d}`, i))
			switch i % 3 {
			case 0:
				d.Payload, d.Scope = nil, nil
			case 1:
				d.Payload, d.Scope = []byte{}, map[string]string{}
			default:
				d.Scope = map[string]string{"k": fmt.Sprint(i), "shared": "x"}
			}
			if i%4 == 3 {
				d.LastOutcome, d.LastReason = hookrelay.OutcomeRejected, fmt.Sprintf("reason %d", i%2)
			}
			ds = append(ds, d)
		}
		_, err := s.Create(ctx, ds)
		require.NoError(t, err)
		_, err = s.db.ExecContext(ctx, s.q("UPDATE {d} SET budget_start = 2, window_start = ? WHERE id = ?"), t0.Add(-time.Hour).UnixNano(), ds[5].ID)
		require.NoError(t, err)

		cs, err := s.Claim(ctx, hookrelay.ClaimParams{Now: t0.Add(time.Minute), Limit: 100, LeaseFor: time.Minute, Holder: "test",
			DefaultDestinationRoom: 100})
		require.NoError(t, err)
		require.Len(t, cs, len(ds))
		for i, c := range cs {
			assert.Equal(t, ds[i].ID, c.Delivery.ID, "oldest first")
			want, err := s.Get(ctx, c.Delivery.ID)
			require.NoError(t, err)
			assert.Equal(t, want, c.Delivery, "claim %d reads the record as Get does", i)
			if i%3 == 0 {
				assert.Nil(t, c.Delivery.Payload)
			} else {
				assert.NotNil(t, c.Delivery.Payload)
			}
		}
		assert.Equal(t, 2, cs[5].Delivery.BudgetStart)
		assert.True(t, cs[5].Delivery.WindowStart.Equal(t0.Add(-time.Hour)))
	})
}

// TestBatchStoresDeliveredAttemptsAsWritten marks several deliveries
// delivered in one RecordBatch (on PostgreSQL: one statement for all of
// them, its values sent as arrays) and reads their attempts back: every
// field as written, and a zero NextAttemptAt stored as NULL.
func TestBatchStoresDeliveredAttemptsAsWritten(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		var ds []hookrelay.Delivery
		for i := range 3 {
			ds = append(ds, newDelivery(fmt.Sprintf("evt_%d", i), "dst_1", t0.Add(time.Duration(i))))
		}
		_, err := s.Create(ctx, ds)
		require.NoError(t, err)
		now := t0.Add(time.Minute)
		cs := claimAll(t, s, now)
		require.Len(t, cs, len(ds))
		var ws []hookrelay.LedgerWrite
		want := map[string]hookrelay.Attempt{}
		for i, c := range cs {
			a := hookrelay.Attempt{DeliveryID: c.Delivery.ID, Number: c.Delivery.Attempt, StartedAt: now.Add(time.Duration(i)),
				FinishedAt: now.Add(time.Second + time.Duration(i)), Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted,
				Reason: fmt.Sprintf("http_20%d", i), StatusCode: 200 + i, Detail: fmt.Sprintf("detail %d", i)}
			if i == 1 {
				a.NextAttemptAt = now.Add(time.Hour) // not what a delivered attempt carries, but stored as given
			}
			want[c.Delivery.ID] = a
			ws = append(ws, hookrelay.LedgerWrite{Delivered: &hookrelay.MarkDeliveredParams{ID: c.Delivery.ID, Lease: c.Lease, Attempt: a, Now: now}})
		}
		errs, err := s.RecordBatch(ctx, ws)
		require.NoError(t, err)
		for i, err := range errs {
			require.NoError(t, err, "write %d", i)
		}
		for id, a := range want {
			got, err := s.Attempts(ctx, id)
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.True(t, got[0].StartedAt.Equal(a.StartedAt) && got[0].FinishedAt.Equal(a.FinishedAt) && got[0].NextAttemptAt.Equal(a.NextAttemptAt),
				"times of %s: %+v", id, got[0])
			got[0].StartedAt, got[0].FinishedAt, got[0].NextAttemptAt = a.StartedAt, a.FinishedAt, a.NextAttemptAt
			assert.Equal(t, a, got[0])
			d, err := s.Get(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, hookrelay.StateDelivered, d.State)
			assert.Equal(t, a.Reason, d.LastReason)
		}
		var nulls int
		require.NoError(t, s.db.QueryRowContext(ctx, s.q("SELECT COUNT(*) FROM {a} WHERE next_attempt_at IS NULL")).Scan(&nulls))
		assert.Equal(t, len(ds)-1, nulls, "a zero NextAttemptAt is stored as NULL")
	})
}
