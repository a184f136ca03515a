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

// RecentOutcomes reads no more than the attempts since Since: on a table of
// 2,000 delivered rows — every attempt kept in its row (an empty attempts
// table, as where every first attempt succeeds), or one in ten an attempts
// row — the plan of its statement for a recent Since finds the kept
// attempts through the index of delivered rows by updated_at and never
// reads the whole deliveries table (PostgreSQL and SQLite; MySQL's plan
// output is not read here). Joined to an empty attempts table, the records
// were read whole, every call.
func TestRecentOutcomesFindsKeptAttemptsThroughTheDeliveredIndex(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		if b.dialect == MySQL {
			t.Skip("MySQL's EXPLAIN is not read by this test")
		}
		for _, rowsEvery := range []int{0, 10} {
			t.Run(fmt.Sprintf("an attempts row every %d", rowsEvery), func(t *testing.T) {
				s := newStore(t, b, Options{})
				deliverMany(t, s, 2000, rowsEvery)
				plan := explainRecentOutcomes(t, s, t0.Add(time.Hour))
				text := strings.Join(plan, "\n")
				assert.Contains(t, text, s.prefix+"deliveries_delivered", "plan:\n%s", text)
				for _, line := range plan {
					line = strings.TrimSpace(line)
					assert.NotContains(t, line, "Seq Scan on "+s.prefix+"deliveries", "plan:\n%s", text)
					assert.NotRegexp(t, `^SCAN (d|`+s.prefix+`deliveries)\b`, line, "plan:\n%s", text)
				}
			})
		}
	})
}

// deliverMany creates n deliveries over 10 destinations and marks them all
// delivered, finished a second after t0; every rowsEvery-th write (none
// for 0) is recorded before its attempt finished, so its attempt is an
// attempts row.
func deliverMany(t *testing.T, s *Store, n, rowsEvery int) {
	t.Helper()
	ctx := context.Background()
	ds := make([]hookrelay.Delivery, n)
	for i := range ds {
		ds[i] = newDelivery(fmt.Sprintf("evt_%d", i), fmt.Sprintf("dst_%d", i%10), t0)
	}
	_, err := s.Create(ctx, ds)
	require.NoError(t, err)
	finished := t0.Add(time.Second)
	for delivered := 0; delivered < n; {
		cs := claimAll(t, s, t0)
		require.NotEmpty(t, cs)
		writes := make([]hookrelay.LedgerWrite, len(cs))
		for i, c := range cs {
			now := finished
			if rowsEvery > 0 && (delivered+i)%rowsEvery == 0 {
				now = t0
			}
			writes[i] = hookrelay.LedgerWrite{Delivered: &hookrelay.MarkDeliveredParams{ID: c.Delivery.ID, Lease: c.Lease, Now: now,
				Attempt: hookrelay.Attempt{DeliveryID: c.Delivery.ID, Number: 1, StartedAt: t0, FinishedAt: finished,
					Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 204}}}
		}
		errs, err := s.RecordBatch(ctx, writes)
		require.NoError(t, err)
		for _, err := range errs {
			require.NoError(t, err)
		}
		delivered += len(cs)
	}
}

// explainRecentOutcomes returns the plan of RecentOutcomes' statement for
// since, after the tables' statistics are gathered: PostgreSQL's EXPLAIN
// lines, SQLite's EXPLAIN QUERY PLAN details.
func explainRecentOutcomes(t *testing.T, s *Store, since time.Time) []string {
	t.Helper()
	ctx := context.Background()
	explain := "EXPLAIN "
	if s.dialect == SQLite {
		explain = "EXPLAIN QUERY PLAN "
	}
	_, err := s.db.ExecContext(ctx, "ANALYZE")
	require.NoError(t, err)
	at, err := encTime("Since", since)
	require.NoError(t, err)
	rows, err := s.db.QueryContext(ctx, explain+s.recentOutcomesQuery(), at, at, at)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var plan []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		plan = append(plan, fmt.Sprint(vals[len(vals)-1])) // the detail column on SQLite
	}
	require.NoError(t, rows.Err())
	return plan
}
