package hooksql

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"slices"
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
	b := postgresBackend(t)
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

	plan := explainDeliveredBatch(t, s, deliveredOps(t, 2000, 50), "force_generic_plan", false)
	assert.Contains(t, plan, s.prefix+"deliveries_pkey", plan)
	assert.NotContains(t, plan, "Seq Scan on "+s.prefix+"deliveries", plan)
	assert.NotContains(t, plan, s.prefix+"deliveries_due", plan)
	// The record of a write its fence refused is read once more, to say
	// why; a written row is not read again (the lookup is gated on it).
	assert.Contains(t, plan, "One-Time Filter: (NOT ", plan)
}

// A batch of MarkDelivered writes on PostgreSQL reads its input once,
// whatever the statistics say and whichever plan PostgreSQL settles on.
// Statistics almost never see a leased row (a batch's rows are leased only
// while they are written), so a fence check on the record's row alone was
// estimated to leave one row, and the planner joined that row to the input
// by reading all of the input for each: for every row in fact, n² input
// rows for a batch of n (at 200, 40,000 rows and about 13 ms of server time
// instead of about 2).
func TestDeliveredBatchReadsItsInputOnce(t *testing.T) {
	b := postgresBackend(t)
	s := newStore(t, b, Options{})
	ctx := context.Background()

	// A backlog of 20,000 analyzed before any was leased; then a worker
	// leases 200 of them.
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO {d} (id, event_id, tenant_id, scope, destination_id, event_type, payload,
		envelope_version, attempt, first_queued_at, next_attempt_at, policy_version, state, last_outcome, last_reason, updated_at)
		SELECT 'whd_' || g, 'evt_' || g, 'tenant_a', '{}', 'dest_' || (g % 10), 'lease.payment_recorded', '\x7b7d'::bytea,
		1, 1, g, g, 'default', 'pending', '', '', g FROM generate_series(1, 20000) g`))
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, s.q("ANALYZE {d}"))
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, s.q(`UPDATE {d} SET lease_token = 1, lease_holder = 'w', lease_expires_at = 9000000000000000000
		WHERE id IN (SELECT 'whd_' || g FROM generate_series(2000, 2199) g)`))
	require.NoError(t, err)

	ops := deliveredOps(t, 2000, 200)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plan := explainDeliveredBatch(t, s, ops, mode, true)
		scans := regexp.MustCompile(`CTE Scan on \w+.*loops=(\d+)`).FindAllStringSubmatch(plan, -1)
		require.NotEmpty(t, scans, plan)
		for _, m := range scans {
			assert.Equal(t, "1", m[1], "%s: %s\n%s", mode, m[0], plan)
		}
		assert.Contains(t, plan, "Update on "+s.prefix+"deliveries d (actual rows=200 loops=1)", plan)
	}
}

// deliveredOps are n MarkDelivered writes, of whd_from … whd_{from+n-1}
// leased with token 1 by "w".
func deliveredOps(t *testing.T, from, n int) []*fencedOp {
	t.Helper()
	ops := make([]*fencedOp, n)
	for i := range ops {
		o, err := markDeliveredOp(hookrelay.MarkDeliveredParams{
			ID: fmt.Sprintf("whd_%d", from+i), Lease: hookrelay.Lease{Token: 1, Holder: "w"}, Now: time.Unix(100, 0),
			Attempt: hookrelay.Attempt{Number: 1, StartedAt: time.Unix(99, 0), FinishedAt: time.Unix(100, 0),
				Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 204},
		})
		require.NoError(t, err)
		ops[i] = &o
	}
	return ops
}

// explainDeliveredBatch is the plan of deliveredManyPostgres for ops, as
// PostgreSQL prepares it in plan_cache_mode mode with the batch's plan
// settings; with analyze, run (in a transaction rolled back) and with each
// node's row and loop counts.
func explainDeliveredBatch(t *testing.T, s *Store, ops []*fencedOp, mode string, analyze bool) string {
	t.Helper()
	ctx := context.Background()
	idx := make([]int, len(ops))
	for i := range idx {
		idx[i] = i
	}
	query, args := s.deliveredManyPostgres(ops, idx)
	tx, err := s.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, "SET LOCAL plan_cache_mode = "+mode)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, pgWriteSettings) // as RecordBatch runs it
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "PREPARE delivered_batch AS "+query)
	require.NoError(t, err)
	defer func() { _, _ = tx.ExecContext(ctx, "DEALLOCATE delivered_batch") }()
	params := make([]string, len(args))
	for i, a := range args {
		params[i] = arrayLiteral(t, a)
	}
	explain := "EXPLAIN "
	if analyze {
		explain = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "
	}
	return strings.Join(queryColumnOn[string](t, tx, explain+"EXECUTE delivered_batch("+strings.Join(params, ", ")+")"), "\n")
}

// The store's statements raise no warning on the server: a warning per
// claim or batch fills the database's log (a busy worker claims hundreds
// of times a second). The claim's plan setting was sent as SET LOCAL in a
// pipeline, which PostgreSQL answers with "SET LOCAL can only be used in
// transaction blocks" every time.
func TestPostgresClaimsAndBatchesRaiseNoWarnings(t *testing.T) {
	b := postgresBackend(t)
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
	case []bool:
		for _, e := range v {
			elems = append(elems, fmt.Sprint(e))
		}
		return "ARRAY[" + strings.Join(elems, ",") + "]::boolean[]"
	}
	t.Fatalf("no literal for %T", v)
	return ""
}

// A ledger write, and Enqueue's check that every record exists, find their
// records by key even when the server planned them while the table was
// young, as a claim's update still reads only the rows it picked
// (TestClaimPlannedOnAYoungTableStillUpdatesByAddress).
// Planned on three records, Enqueue's check read the whole table for every
// chunk of IDs enqueued. Planned on three
// records never analyzed, a retry's write (or a dead letter's, or any write
// of a batch other than its MarkDelivered ones) found its row by reading
// every pending record through the due index; planned after an ANALYZE of
// those three, by reading the whole table, twice. Either way on every write
// until the statistics change, in proportion to the backlog — the retries
// of a burst to a failing destination.
func TestLedgerWritePlannedOnAYoungTableFindsItsRowByKey(t *testing.T) {
	b := postgresBackend(t)
	attempt := hookrelay.Attempt{Number: 1, StartedAt: time.Unix(99, 0), FinishedAt: time.Unix(100, 0),
		Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeRejected, StatusCode: 503}
	retry, err := recordRetryOp(hookrelay.RecordRetryParams{ID: "whd_1", Lease: hookrelay.Lease{Token: 1, Holder: "w"},
		Now: time.Unix(100, 0), NextAttemptAt: time.Unix(200, 0), NextAttempt: 2, Attempt: attempt})
	require.NoError(t, err)
	ops := make([]*fencedOp, 20)
	idx := make([]int, len(ops))
	for i := range ops {
		o, err := markDeliveredOp(hookrelay.MarkDeliveredParams{ID: fmt.Sprintf("whd_%d", i), Lease: hookrelay.Lease{Token: 1, Holder: "w"},
			Now: time.Unix(100, 0), Attempt: attempt})
		require.NoError(t, err)
		ops[i], idx[i] = &o, i
	}
	for _, analyzed := range []bool{false, true} {
		t.Run(fmt.Sprintf("analyzed=%v", analyzed), func(t *testing.T) {
			t.Run("single write", func(t *testing.T) {
				s := newStore(t, b, Options{})
				query, args := s.fencedQueryPostgres(retry)
				plan := planKeptFromAYoungTable(t, s, analyzed, pgWriteSettings, query, args)
				// The update, and the read of the record that says why a
				// refused write was refused.
				assert.Len(t, regexp.MustCompile(`Index Scan using `+s.prefix+`deliveries_pkey .*\n\s*Index Cond: \(id = \$\d+\)`).FindAllString(plan, -1), 2, plan)
				assert.NotContains(t, plan, s.prefix+"deliveries_due", "reading every pending record on every write:\n%s", plan)
				assert.NotContains(t, plan, "Seq Scan on "+s.prefix+"deliveries ", "reading the whole table on every write:\n%s", plan)
				assert.NotContains(t, plan, "JIT", plan)
			})
			t.Run("enqueue check", func(t *testing.T) {
				s := newStore(t, b, Options{})
				plan := planKeptFromAYoungTable(t, s, analyzed, pgWriteSettings, s.enqueueCheckPostgres(),
					[]any{[]string{"whd_1", "whd_2", "whd_3"}})
				// By key: an index scan, or a bitmap of the key's entries.
				assert.Regexp(t, `Index (Only )?Scan (using|on) `+s.prefix+`deliveries_pkey .*\n\s*Index Cond: \(id = ANY`, plan)
				assert.NotContains(t, plan, "Seq Scan on "+s.prefix+"deliveries ", "reading the whole table on every enqueue:\n%s", plan)
				assert.NotContains(t, plan, "JIT", plan)
			})
			t.Run("delivered batch", func(t *testing.T) {
				s := newStore(t, b, Options{})
				query, args := s.deliveredManyPostgres(ops, idx)
				plan := planKeptFromAYoungTable(t, s, analyzed, pgWriteSettings, query, args)
				assert.Contains(t, plan, s.prefix+"deliveries_pkey", plan)
				assert.NotContains(t, plan, s.prefix+"deliveries_due", plan)
				assert.NotContains(t, plan, "Seq Scan on "+s.prefix+"deliveries ", plan)
				assert.NotContains(t, plan, "JIT", plan)
			})
		})
	}
}

// statementLog records the statements a pgx connection sends, each with
// the unit it was sent in: a pipeline (batch) or, outside one, the
// connection's current transaction (BEGIN … COMMIT) or the statement alone.
type statementLog struct {
	mu    sync.Mutex
	units [][]string
	open  map[*pgx.Conn]int // the unit in progress on a connection, +1
}

func (l *statementLog) add(c *pgx.Conn, sql string, startUnit, endUnit bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == nil {
		l.open = map[*pgx.Conn]int{}
	}
	if l.open[c] == 0 || startUnit {
		l.units = append(l.units, nil)
		l.open[c] = len(l.units)
	}
	u := l.open[c] - 1
	if sql != "" {
		l.units[u] = append(l.units[u], sql)
	}
	if endUnit {
		l.open[c] = 0
	}
}

func (l *statementLog) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	word := strings.ToLower(strings.TrimSpace(d.SQL))
	switch {
	case strings.HasPrefix(word, "begin"):
		l.add(c, d.SQL, true, false)
	case strings.HasPrefix(word, "commit"), strings.HasPrefix(word, "rollback"):
		l.add(c, d.SQL, false, true)
	default:
		l.mu.Lock()
		inUnit := l.open[c] != 0
		l.mu.Unlock()
		l.add(c, d.SQL, false, !inUnit) // a statement alone is its own unit
	}
	return ctx
}
func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (l *statementLog) TraceBatchStart(ctx context.Context, c *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	l.add(c, "", true, false)
	return ctx
}
func (l *statementLog) TraceBatchQuery(_ context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.add(c, d.SQL, false, false)
}
func (l *statementLog) TraceBatchEnd(_ context.Context, c *pgx.Conn, _ pgx.TraceBatchEndData) {
	l.add(c, "", false, true)
}

// Every claim, every ledger write, a broker's lease and Enqueue's check on
// PostgreSQL run under the plan settings (planSettings): sent first in its
// pipeline on pgx, first in its transaction on another driver. The plan tests above check what the
// settings do; this checks that the store sends them wherever it claims or
// writes a record.
func TestClaimsAndLedgerWritesRunUnderThePlanSettings(t *testing.T) {
	b := postgresBackend(t)
	for _, driverName := range []string{"pgx", "hookrelay-other-postgres"} {
		t.Run(driverName, func(t *testing.T) {
			ctx := context.Background()
			cfg, err := pgx.ParseConfig(os.Getenv(b.envVar))
			require.NoError(t, err)
			log := &statementLog{}
			cfg.Tracer = log
			db, err := sql.Open(driverName, stdlib.RegisterConnConfig(cfg))
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			s, err := New(db, Options{Dialect: Postgres, TablePrefix: randomPrefix()})
			require.NoError(t, err)
			require.NoError(t, s.Migrate(ctx))
			t.Cleanup(func() { dropTables(t, s) })
			queueSpread(t, s, 6, 2)
			queued := make([]hookrelay.Delivery, 6) // as queueSpread made them
			for i := range queued {
				queued[i] = newDelivery(fmt.Sprintf("evt_%d", i), fmt.Sprintf("dest_%d", i%2), t0)
			}
			require.NoError(t, s.Enqueue(ctx, queued))

			claims, err := s.Claim(ctx, hookrelay.ClaimParams{Now: t0.Add(time.Hour), Limit: 6, LeaseFor: time.Minute, Holder: "w", DefaultDestinationRoom: 3})
			require.NoError(t, err)
			require.Len(t, claims, 6)
			a := func(c hookrelay.Claim) hookrelay.Attempt {
				return hookrelay.Attempt{Number: c.Delivery.Attempt, StartedAt: t0, FinishedAt: t0.Add(time.Second),
					Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 204}
			}
			delivered := func(c hookrelay.Claim) *hookrelay.MarkDeliveredParams {
				return &hookrelay.MarkDeliveredParams{ID: c.Delivery.ID, Lease: c.Lease, Now: t0.Add(time.Hour), Attempt: a(c)}
			}
			errs, err := s.RecordBatch(ctx, []hookrelay.LedgerWrite{
				{Delivered: delivered(claims[0])}, {Delivered: delivered(claims[1])},
				{DeadLetter: &hookrelay.RecordDeadLetterParams{ID: claims[2].Delivery.ID, Lease: claims[2].Lease, Reason: hookrelay.ReasonBadRequest, Now: t0.Add(time.Hour)}},
			})
			require.NoError(t, err)
			require.Equal(t, []error{nil, nil, nil}, errs)
			require.NoError(t, s.MarkDelivered(ctx, *delivered(claims[3])))
			require.NoError(t, s.RecordRetry(ctx, hookrelay.RecordRetryParams{ID: claims[4].Delivery.ID, Lease: claims[4].Lease,
				Now: t0.Add(time.Hour), NextAttemptAt: t0.Add(2 * time.Hour), NextAttempt: 2, Attempt: a(claims[4])}))
			require.NoError(t, s.RecordDeadLetter(ctx, hookrelay.RecordDeadLetterParams{ID: claims[5].Delivery.ID, Lease: claims[5].Lease,
				Reason: hookrelay.ReasonBadRequest, Now: t0.Add(time.Hour)}))
			// A broker worker's lease of a delivery it was handed.
			handed := newDelivery("evt_handed", "dest_0", t0)
			_, err = s.Create(ctx, []hookrelay.Delivery{handed})
			require.NoError(t, err)
			_, err = s.AcquireLease(ctx, hookrelay.AcquireLeaseParams{ID: handed.ID, Now: t0.Add(time.Hour), LeaseFor: time.Minute, Holder: "broker"})
			require.NoError(t, err)

			log.mu.Lock()
			defer log.mu.Unlock()
			kinds := map[string]int{}
			for _, unit := range log.units {
				for i, stmt := range unit {
					kind, settings := "", pgWriteSettings
					switch {
					case strings.HasPrefix(stmt, "WITH cand"):
						kind, settings = "claim", pgClaimSettings
					case strings.HasPrefix(stmt, "WITH input"):
						kind = "delivered batch"
					case strings.HasPrefix(stmt, "WITH upd"):
						kind = "single write"
					case strings.HasPrefix(stmt, "WITH cur"):
						kind = "acquire lease"
					case strings.HasPrefix(stmt, "SELECT COUNT(*) FROM "+s.prefix+"deliveries WHERE id"):
						kind = "enqueue check"
					default:
						continue
					}
					kinds[kind]++
					assert.True(t, slices.Contains(unit[:i], settings), "%s sent without its plan settings before it: %q", kind, unit)
				}
			}
			// One claim; the batch's two MarkDelivered as one statement (on
			// pgx; one each otherwise) and its dead letter; then three single
			// writes.
			want := map[string]int{"enqueue check": 1, "claim": 1, "delivered batch": 1, "single write": 4, "acquire lease": 1}
			if driverName != "pgx" {
				want = map[string]int{"enqueue check": 1, "claim": 1, "single write": 6, "acquire lease": 1}
			}
			assert.Equal(t, want, kinds)
		})
	}
}
