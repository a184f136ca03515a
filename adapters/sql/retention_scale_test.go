package hooksql

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// scaleEnv names the variable that turns on TestRetentionAtScale: the
// number of delivered records (each with one attempt) to load.
const scaleEnv = "HOOKRELAY_RETENTION_SCALE"

// TestRetentionAtScale measures, on PostgreSQL, what retention costs and
// buys at scale: N delivered records with N attempt rows (loaded with
// generate_series, so the load takes seconds) beside 10,000 pending ones;
// claim latency before and after one cleaner pass with a zero retention,
// the pass's throughput, and that the tables then hold the pending rows
// only. It runs only with HOOKRELAY_RETENTION_SCALE=N (docs/operations.md
// has the figures for N = 1,000,000):
//
//	HOOKRELAY_RETENTION_SCALE=1000000 HOOKRELAY_TEST_POSTGRES_DSN=... \
//	  go test ./adapters/sql -run TestRetentionAtScale -v -timeout 10m
func TestRetentionAtScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(scaleEnv))
	if n <= 0 {
		t.Skipf("%s is not set; set it to the number of delivered records to measure retention at scale", scaleEnv)
	}
	b := backends[1]
	b.skipUnlessConfigured(t)
	ctx := context.Background()
	s := newStore(t, b, Options{})
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	const pending, dests = 10_000, 20

	start := time.Now()
	day := int64(24 * time.Hour)
	// The history's indexes are built after the load, once, rather than
	// row by row: the load takes seconds instead of a minute.
	indexes := map[string]string{
		"deliveries_destination": "{d} (destination_id, state) WHERE state <> 'delivered'",
		"deliveries_delivered":   "{d} (updated_at, id) WHERE state = 'delivered'",
		"deliveries_uncompacted": "{d} (updated_at, id) WHERE state = 'delivered' AND history_compacted = 0",
		"attempts_finished":      "{a} (finished_at)",
	}
	for name := range indexes {
		_, err := s.db.ExecContext(ctx, "DROP INDEX "+s.prefix+name)
		require.NoError(t, err)
	}
	_, err := s.db.ExecContext(ctx, s.q("ALTER TABLE {a} DROP CONSTRAINT "+s.prefix+"attempts_pkey"))
	require.NoError(t, err)
	// Delivered over the 60 days before now, one attempt each.
	_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO {d} (id, event_id, tenant_id, scope, destination_id, event_type, payload,
		envelope_version, attempt, first_queued_at, next_attempt_at, policy_version, state, last_outcome, last_reason, updated_at, lease_token)
		SELECT 'whd_old_' || g, 'evt_' || g, 'tenant_a', '{}', 'dest_' || (g % CAST(? AS INTEGER)), 'lease.payment_recorded', '\x7b7d'::bytea,
		1, 1, CAST(? AS BIGINT) - (g % 60) * CAST(? AS BIGINT), CAST(? AS BIGINT) - (g % 60) * CAST(? AS BIGINT), 'default', 'delivered', 'accepted', '', CAST(? AS BIGINT) - (g % 60) * CAST(? AS BIGINT), 1
		FROM generate_series(1, ?) g`), dests, now.UnixNano(), day, now.UnixNano(), day, now.UnixNano(), day, n)
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO {a} (delivery_id, number, started_at, finished_at, kind, outcome, reason, status_code, detail)
		SELECT 'whd_old_' || g, 1, CAST(? AS BIGINT) - (g % 60) * CAST(? AS BIGINT), CAST(? AS BIGINT) - (g % 60) * CAST(? AS BIGINT), ?, 'accepted', '', 204, '' FROM generate_series(1, ?) g`),
		now.UnixNano(), day, now.UnixNano(), day, int(hookrelay.KindDelivered), n)
	require.NoError(t, err)
	for name, on := range indexes {
		_, err := s.db.ExecContext(ctx, s.q("CREATE INDEX "+s.prefix+name+" ON "+on))
		require.NoError(t, err)
	}
	_, err = s.db.ExecContext(ctx, s.q("ALTER TABLE {a} ADD CONSTRAINT "+s.prefix+"attempts_pkey PRIMARY KEY (delivery_id, seq)"))
	require.NoError(t, err)
	var ds []hookrelay.Delivery
	for i := range pending {
		d := hookrelay.Delivery{
			ID: fmt.Sprintf("whd_new_%d", i), EventID: fmt.Sprintf("evt_new_%d", i), TenantID: "tenant_a",
			DestinationID: fmt.Sprintf("dest_%d", i%dests), EventType: "lease.payment_recorded", Payload: []byte(`{}`),
			EnvelopeVersion: hookrelay.EnvelopeVersion, Attempt: 1, FirstQueuedAt: now, NextAttemptAt: now.Add(-time.Duration(i) * time.Millisecond),
			PolicyVersion: "default", UpdatedAt: now,
		}
		ds = append(ds, d)
	}
	_, err = s.Create(ctx, ds)
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, s.q("ANALYZE {d}"))
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, s.q("ANALYZE {a}"))
	require.NoError(t, err)
	t.Logf("loaded %d delivered + %d attempt rows + %d pending in %s", n, n, pending, time.Since(start).Round(time.Millisecond))

	plan := explainClaim(t, s, hookrelay.ClaimParams{Now: now, Limit: 10, LeaseFor: time.Minute, Holder: "bench"})
	assert.Contains(t, plan, s.prefix+"deliveries_due", "a claim walks the pending-only index:\n%s", plan)
	assert.NotContains(t, plan, "Seq Scan on "+s.prefix+"deliveries", "a claim never scans the history:\n%s", plan)

	// Two measurements before the pass show the machine's noise.
	before := [2][2]time.Duration{claimLatencies(t, s, now), claimLatencies(t, s, now)}

	policy := hookrelay.RetentionPolicy{} // zero retention: every delivered record goes
	const batch = 5000
	start = time.Now()
	var removed, batches int64
	for {
		res, err := s.CleanHistory(ctx, hookrelay.CleanHistoryParams{Now: now, Policy: policy, Limit: batch})
		require.NoError(t, err)
		batches++
		for _, c := range res.Counts {
			removed += c.Removed
		}
		if !res.More {
			break
		}
	}
	took := time.Since(start)
	require.EqualValues(t, n, removed)
	t.Logf("cleaner: %d delivered records and %d attempts removed in %s, %d transactions of up to %d: %.0f records/s",
		removed, n, took.Round(time.Millisecond), batches, batch, float64(removed)/took.Seconds())

	var left, attempts, pendingLeft int
	require.NoError(t, s.db.QueryRowContext(ctx, s.q("SELECT COUNT(*), COUNT(CASE WHEN state = 'pending' THEN 1 END) FROM {d}")).Scan(&left, &pendingLeft))
	require.NoError(t, s.db.QueryRowContext(ctx, s.q("SELECT COUNT(*) FROM {a}")).Scan(&attempts))
	assert.Equal(t, pending, left, "only the pending rows are left")
	assert.Equal(t, pending, pendingLeft)
	assert.Zero(t, attempts, "no attempt row is left")

	_, err = s.db.ExecContext(ctx, s.q("VACUUM ANALYZE {d}"))
	require.NoError(t, err)
	after := claimLatencies(t, s, now)
	t.Logf("claim of 10 (p50/p90): before %s/%s and %s/%s, after %s/%s",
		before[0][0], before[0][1], before[1][0], before[1][1], after[0], after[1])
}

// claimLatencies claims 10 due deliveries, 300 times, and returns the
// claim's p50 and p90. The claims are then ended by hand, in one statement,
// so the next measurement finds the same due rows.
func claimLatencies(t *testing.T, s *Store, now time.Time) [2]time.Duration {
	t.Helper()
	ctx := context.Background()
	var ds []time.Duration
	for i := range 300 {
		at := now.Add(time.Duration(i) * time.Millisecond)
		start := time.Now()
		// 300 claims of 10 take 3,000 of the 10,000 pending rows, each
		// claim the oldest due ones left.
		cs, err := s.Claim(ctx, hookrelay.ClaimParams{Now: at, Limit: 10, LeaseFor: time.Minute, Holder: "bench"})
		ds = append(ds, time.Since(start))
		require.NoError(t, err)
		require.Len(t, cs, 10)
	}
	_, err := s.db.ExecContext(ctx, s.q("UPDATE {d} SET lease_expires_at = NULL WHERE lease_holder = 'bench'"))
	require.NoError(t, err)
	slices.Sort(ds)
	return [2]time.Duration{ds[len(ds)/2].Round(time.Microsecond), ds[len(ds)*9/10].Round(time.Microsecond)}
}
