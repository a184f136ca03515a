package hooksql

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// A worker's MarkDelivered (its attempt delivered, recorded when it
// finished) keeps the attempt in the record's own row and writes no
// attempts row, alone and in a batch, on every backend: the insert and its
// index entries were about a fifth of PostgreSQL's work per delivery. An
// attempt that does not qualify (recorded before it finished, or one that
// scheduled a retry) is an attempts row as before. The conformance suite
// checks that both read back the same; this checks where they went.
func TestAWorkersDeliveredWriteKeepsItsAttemptInTheRow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		cs := createAndClaimAll(t, s, 5)
		finished := t0.Add(time.Second)
		attempt := func(c hookrelay.Claim) hookrelay.Attempt {
			return hookrelay.Attempt{DeliveryID: c.Delivery.ID, Number: c.Delivery.Attempt, StartedAt: t0, FinishedAt: finished,
				Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 204, Detail: "ok"}
		}
		delivered := func(c hookrelay.Claim, now time.Time) hookrelay.LedgerWrite {
			return hookrelay.LedgerWrite{Delivered: &hookrelay.MarkDeliveredParams{ID: c.Delivery.ID, Lease: c.Lease, Attempt: attempt(c), Now: now}}
		}
		// Alone: kept.
		require.NoError(t, s.MarkDelivered(ctx, *delivered(cs[0], finished).Delivered))
		// In a batch: two kept, one recorded before it finished (an
		// attempts row), one retry (an attempts row).
		retry := attempt(cs[3])
		retry.Kind, retry.Outcome, retry.StatusCode, retry.NextAttemptAt = hookrelay.KindRetryable, hookrelay.OutcomeRejected, 503, finished.Add(time.Minute)
		errs, err := s.RecordBatch(ctx, []hookrelay.LedgerWrite{
			delivered(cs[1], finished), delivered(cs[2], finished),
			{Retry: &hookrelay.RecordRetryParams{ID: cs[3].Delivery.ID, Lease: cs[3].Lease, Attempt: retry, NextAttempt: 2,
				NextAttemptAt: retry.NextAttemptAt, Now: finished}},
			delivered(cs[4], t0),
		})
		require.NoError(t, err)
		for _, err := range errs {
			require.NoError(t, err)
		}

		rows := queryColumn[string](t, s, "SELECT delivery_id FROM {a} ORDER BY seq")
		assert.ElementsMatch(t, []string{cs[3].Delivery.ID, cs[4].Delivery.ID}, rows,
			"attempts rows only for the retry and the write recorded before its attempt finished")
		kept := queryColumn[string](t, s, "SELECT id FROM {d} WHERE delivering_attempt IS NOT NULL")
		assert.ElementsMatch(t, []string{cs[0].Delivery.ID, cs[1].Delivery.ID, cs[2].Delivery.ID}, kept)
		for _, c := range cs {
			got, err := s.Attempts(ctx, c.Delivery.ID)
			require.NoError(t, err)
			require.Len(t, got, 1, "one attempt each, wherever it is kept")
		}
	})
}
