package hooksql

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// A batch of MarkDelivered writes on PostgreSQL reaches its rows through
// the primary key, whatever the table's statistics say. pgx runs it as a
// prepared statement, and after a few runs PostgreSQL plans it once for
// any values (a generic plan, with no idea how many IDs come): on a table
// whose last ANALYZE saw few pending rows, that plan found the batch's rows
// by reading every pending row through the due index, and read every
// batch row's record a second time to find the refused writes' (in
// peerbench mostly by reading the whole table) — work in proportion to the
// backlog and to the table, on every batch.
func TestDeliveredBatchReadsOnlyItsOwnRows(t *testing.T) {
	b := backends[1]
	require.Equal(t, Postgres, b.dialect)
	b.skipUnlessConfigured(t)
	s := newStore(t, b, Options{})
	ctx := context.Background()

	// Statistics taken when the table was young (600 records delivered,
	// 3 pending); then a backlog of 3,000 arrives and is leased, unknown
	// to them — as in peerbench, and in a new deployment's first burst.
	insert := func(from, to int, state string) {
		t.Helper()
		_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO {d} (id, event_id, tenant_id, scope, destination_id, event_type, payload,
			envelope_version, attempt, first_queued_at, next_attempt_at, policy_version, state, last_outcome, last_reason, updated_at,
			lease_token, lease_holder, lease_expires_at)
			SELECT 'whd_' || g, 'evt_' || g, 'tenant_a', '{}', 'dest_' || (g % 10), 'lease.payment_recorded', '\x7b7d'::bytea,
			1, 1, g, g, 'default', $1, '', '', g, 1, 'w', CASE WHEN $1 = 'pending' THEN 9000000000000000000 END
			FROM generate_series($2::bigint, $3::bigint) g`), state, from, to)
		require.NoError(t, err)
	}
	insert(1, 600, "delivered")
	insert(601, 603, "pending")
	_, err := s.db.ExecContext(ctx, s.q("ANALYZE {d}"))
	require.NoError(t, err)
	insert(604, 3603, "pending")

	ops := make([]*fencedOp, 50)
	idx := make([]int, 50)
	for i := range ops {
		o, err := markDeliveredOp(hookrelay.MarkDeliveredParams{
			ID: fmt.Sprintf("whd_%d", 2000+i), Lease: hookrelay.Lease{Token: 1, Holder: "w"}, Now: time.Unix(100, 0),
			Attempt: hookrelay.Attempt{Number: 1, StartedAt: time.Unix(99, 0), FinishedAt: time.Unix(100, 0),
				Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 204},
		})
		require.NoError(t, err)
		ops[i], idx[i] = &o, i
	}
	query, args := s.deliveredManyPostgres(ops, idx)

	// The plan PostgreSQL settles on for the prepared statement.
	tx, err := s.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, "SET LOCAL plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "PREPARE delivered_batch AS "+query)
	require.NoError(t, err)
	params := make([]string, len(args))
	for i, a := range args {
		params[i] = arrayLiteral(t, a)
	}
	plan := strings.Join(queryColumnOn[string](t, tx, "EXPLAIN EXECUTE delivered_batch("+strings.Join(params, ", ")+")"), "\n")
	assert.Contains(t, plan, s.prefix+"deliveries_pkey", plan)
	assert.NotContains(t, plan, "Seq Scan on "+s.prefix+"deliveries", plan)
	assert.NotContains(t, plan, s.prefix+"deliveries_due", plan)
	// The record of a write its fence refused is read once more, to say
	// why; a written row is not read again (the lookup is gated on it).
	assert.Contains(t, plan, "One-Time Filter: (u.id IS NULL)", plan)
}

// The store's statements raise no warning on the server: a warning per
// claim or batch fills the database's log (a busy worker claims hundreds
// of times a second). The claim's plan setting was sent as SET LOCAL in a
// pipeline, which PostgreSQL answers with "SET LOCAL can only be used in
// transaction blocks" every time.
func TestPostgresClaimsAndBatchesRaiseNoWarnings(t *testing.T) {
	b := backends[1]
	require.Equal(t, Postgres, b.dialect)
	b.skipUnlessConfigured(t)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(os.Getenv(b.envVar))
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		notices []string
	)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Severity+": "+n.Message)
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = db.Close() })
	s, err := New(db, Options{Dialect: Postgres, TablePrefix: randomPrefix()})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	t.Cleanup(func() { dropTables(t, s) })

	var ds []hookrelay.Delivery
	for i := range 20 {
		ds = append(ds, newDelivery(fmt.Sprintf("evt_%d", i), fmt.Sprintf("dest_%d", i%4), t0))
	}
	_, err = s.Create(ctx, ds)
	require.NoError(t, err)
	mu.Lock()
	notices = nil // migrations may say "already exists, skipping"
	mu.Unlock()

	claims, err := s.Claim(ctx, hookrelay.ClaimParams{Now: t0, Limit: 20, LeaseFor: time.Minute, Holder: "w", DefaultDestinationRoom: 5})
	require.NoError(t, err)
	require.Len(t, claims, 20)
	writes := make([]hookrelay.LedgerWrite, len(claims))
	for i, c := range claims {
		writes[i] = hookrelay.LedgerWrite{Delivered: &hookrelay.MarkDeliveredParams{
			ID: c.Delivery.ID, Lease: c.Lease, Now: t0.Add(time.Second),
			Attempt: hookrelay.Attempt{Number: 1, StartedAt: t0, FinishedAt: t0.Add(time.Second),
				Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 204},
		}}
	}
	errs, err := s.RecordBatch(ctx, writes)
	require.NoError(t, err)
	for _, e := range errs {
		require.NoError(t, e)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, notices)
}

// arrayLiteral writes a typed slice as an SQL array literal (EXPLAIN
// EXECUTE takes no bound parameters).
func arrayLiteral(t *testing.T, v any) string {
	t.Helper()
	var elems []string
	switch v := v.(type) {
	case []string:
		for _, e := range v {
			elems = append(elems, "'"+strings.ReplaceAll(e, "'", "''")+"'")
		}
		return "ARRAY[" + strings.Join(elems, ",") + "]::text[]"
	case []int64:
		for _, e := range v {
			elems = append(elems, fmt.Sprint(e))
		}
		return "ARRAY[" + strings.Join(elems, ",") + "]::bigint[]"
	case []int:
		for _, e := range v {
			elems = append(elems, fmt.Sprint(e))
		}
		return "ARRAY[" + strings.Join(elems, ",") + "]::integer[]"
	}
	t.Fatalf("no literal for %T", v)
	return ""
}
