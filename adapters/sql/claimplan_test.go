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

// explainClaim returns the plan the database would run for a claim with
// p, under the claim's own settings.
func explainClaim(t *testing.T, s *Store, p hookrelay.ClaimParams) string {
	t.Helper()
	ctx := context.Background()
	now, err := encTime("Now", p.Now)
	require.NoError(t, err)
	expires, err := encTime("lease expiry", p.Now.Add(p.LeaseFor))
	require.NoError(t, err)
	from, args := s.claimCandidates(p, now)
	query, args := s.claimStatement(from, args, p, expires)
	explain := "EXPLAIN "
	if s.dialect == SQLite {
		explain = "EXPLAIN QUERY PLAN "
	}
	var plan []string
	require.NoError(t, s.inTx(ctx, "explain claim", func(q querier) error {
		if err := s.claimPlanSettings(ctx, q); err != nil {
			return err
		}
		rows, err := q.QueryContext(ctx, explain+query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			return err
		}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			plan = append(plan, fmt.Sprint(vals...))
		}
		return rows.Err()
	}))
	return strings.Join(plan, "\n")
}

// A claim walks the due index in claim order and stops at its limit, even
// on a table whose statistics predate its backlog (here: never analyzed).
// A plan that reads every pending row and sorts them instead costs time
// in proportion to the backlog on every claim: measured on PostgreSQL with
// 8,000 queued, most claims took that plan and the worker delivered about
// a quarter less.
func TestClaimWalksTheDueIndexWhateverTheBacklog(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		if b.dialect == MySQL {
			t.Skip("MySQL claims in a transaction of plain SELECTs (pickByRoom); its index is (state, next_attempt_at, seq)")
		}
		s := newStore(t, b, Options{})
		ctx := context.Background()
		const backlog = 3000
		batch := make([]hookrelay.Delivery, 0, 500)
		for i := range backlog {
			batch = append(batch, newDelivery(fmt.Sprintf("evt_%d", i), fmt.Sprintf("dest_%d", i%10), t0.Add(time.Duration(i))))
			if len(batch) == cap(batch) {
				_, err := s.Create(ctx, batch)
				require.NoError(t, err)
				require.NoError(t, s.Enqueue(ctx, batch))
				batch = batch[:0]
			}
		}
		plan := explainClaim(t, s, hookrelay.ClaimParams{
			Now: t0.Add(time.Hour), Limit: 50, LeaseFor: time.Minute, Holder: "test", DefaultDestinationRoom: 10,
		})
		assert.Contains(t, plan, s.prefix+"deliveries_due", "the claim must read the due index:\n%s", plan)
		assert.NotContains(t, plan, "Bitmap", "a bitmap scan reads every pending row:\n%s", plan)
	})
}

// On PostgreSQL the deliveries table leaves room on its pages, so a claim
// or a lease's end (unindexed columns only) can update a row in place
// instead of adding an entry to every index.
func TestDeliveriesTableLeavesRoomForInPlaceUpdates(t *testing.T) {
	b := backends[1]
	require.Equal(t, Postgres, b.dialect)
	b.skipUnlessConfigured(t)
	s := newStore(t, b, Options{})
	var raw string
	require.NoError(t, s.db.QueryRow("SELECT COALESCE(array_to_string(reloptions, ','), '') FROM pg_class WHERE relname = $1",
		s.prefix+"deliveries").Scan(&raw))
	assert.Contains(t, strings.Split(raw, ","), "fillfactor=70")
}
