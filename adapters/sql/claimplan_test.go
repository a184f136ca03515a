package hooksql

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"

	"github.com/hookrelay/hookrelay"
)

// claimClauses is what Claim works out for p before its statements: the
// candidates' FROM … LIMIT clause with its values, and the lease expiry.
func claimClauses(t *testing.T, s *Store, p hookrelay.ClaimParams) (from string, args []any, expires int64) {
	t.Helper()
	now, err := encTime("Now", p.Now)
	require.NoError(t, err)
	expires, err = encTime("lease expiry", p.Now.Add(p.LeaseFor))
	require.NoError(t, err)
	from, args = s.claimCandidates(p, now)
	return from, args, expires
}

// explainClaim returns the plan the database would run for a claim with
// p, under the claim's own settings.
func explainClaim(t *testing.T, s *Store, p hookrelay.ClaimParams) string {
	t.Helper()
	ctx := context.Background()
	from, args, expires := claimClauses(t, s, p)
	var query string
	if s.dialect == SQLite && (p.DefaultDestinationRoom > 0 || len(p.DestinationRoom) > 0) {
		// The candidates' statement: the update then finds each picked ID
		// by key (TestSQLiteClaimStatementIsPreparedOnce).
		query, _ = s.claimStatementsSQLite(from)
	} else {
		query, args = s.claimStatement(from, args, p, expires)
	}
	explain := "EXPLAIN "
	if s.dialect == SQLite {
		explain = "EXPLAIN QUERY PLAN "
	}
	var plan []string
	require.NoError(t, s.inTx(ctx, "explain claim", func(q querier) error {
		if err := s.planSettings(ctx, q, pgClaimSettings, "explain claim"); err != nil {
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

// explainGenericClaim returns PostgreSQL's generic plan for a claim with p
// (the plan it uses for any values once it has run the prepared statement a
// few times), under the claim's own settings.
func explainGenericClaim(t *testing.T, s *Store, p hookrelay.ClaimParams) string {
	t.Helper()
	ctx := context.Background()
	from, args, expires := claimClauses(t, s, p)
	query, args := s.claimStatement(from, args, p, expires)
	values := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			values[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		default:
			values[i] = fmt.Sprint(v)
		}
	}
	var plan []string
	require.NoError(t, s.inTx(ctx, "explain generic claim", func(q querier) error {
		if err := s.planSettings(ctx, q, pgClaimSettings, "explain claim"); err != nil {
			return err
		}
		for _, stmt := range []string{"SET LOCAL plan_cache_mode = force_generic_plan", "PREPARE generic_claim AS " + query} {
			if _, err := q.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		rows, err := q.QueryContext(ctx, "EXPLAIN EXECUTE generic_claim("+strings.Join(values, ", ")+")")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = q.ExecContext(ctx, "DEALLOCATE generic_claim")
		return err
	}))
	return strings.Join(plan, "\n")
}

// queueSpread queues n deliveries for dests destinations in turn (dest_0,
// dest_1, …), each due a nanosecond after the last from t0.
func queueSpread(t testing.TB, s *Store, n, dests int) {
	t.Helper()
	ds := make([]hookrelay.Delivery, 0, n)
	for i := range n {
		ds = append(ds, newDelivery(fmt.Sprintf("evt_%d", i), fmt.Sprintf("dest_%d", i%dests), t0.Add(time.Duration(i))))
	}
	_, err := s.Create(context.Background(), ds)
	require.NoError(t, err)
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
		for _, p := range []hookrelay.ClaimParams{
			{Now: t0.Add(time.Hour), Limit: 50, LeaseFor: time.Minute, Holder: "test", DefaultDestinationRoom: 10},
			// As a worker claims: rooms, a destination without room, skips.
			{Now: t0.Add(time.Hour), Limit: 50, LeaseFor: time.Minute, Holder: "test", DefaultDestinationRoom: 10,
				DestinationRoom: map[string]int{"dest_1": 3, "dest_2": 0}, SkipDestinations: []string{"dest_3"}},
		} {
			plan := explainClaim(t, s, p)
			assert.Contains(t, plan, s.prefix+"deliveries_due", "the claim must read the due index:\n%s", plan)
			assert.NotContains(t, plan, "Bitmap", "a bitmap scan reads every pending row:\n%s", plan)
			if b.dialect == Postgres {
				// The statement's text is the same for every claim, so the
				// server soon plans it once for any values.
				plan := explainGenericClaim(t, s, p)
				// In claim order, stopping at the limit: no sort between.
				walk := regexp.MustCompile(`CTE cand\n\s*->\s+Limit\b.*\n\s*->\s+LockRows\b.*\n\s*->\s+Index Scan using ` + s.prefix + `deliveries_due\b`)
				assert.Regexp(t, walk, plan, "the generic plan must walk the due index in claim order")
				assert.Regexp(t, `Tid Scan on `+s.prefix+`deliveries .*\n\s*TID Cond: \(ctid = ANY`, plan,
					"the update must fetch the picked rows by their addresses, as one array")
				assert.NotContains(t, plan, "Bitmap", "a bitmap scan reads every pending row:\n%s", plan)
			}
		}
	})
}

// On SQLite a claim's two statements (the candidates, the update of the
// picked IDs) do not vary with the rooms and the skipped destinations
// (they are JSON values), so each is prepared once and not parsed again at
// every claim; a claim still honours them; and the update finds each
// picked ID by key.
func TestSQLiteClaimStatementIsPreparedOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backend{dialect: SQLite}, Options{})
	queueSpread(t, s, 12, 4)
	now, err := encTime("Now", t0)
	require.NoError(t, err)
	texts := map[string]bool{}
	for _, p := range []hookrelay.ClaimParams{
		{Limit: 8, DefaultDestinationRoom: 2, DestinationRoom: map[string]int{"dest_0": 1}},
		{Limit: 8, DefaultDestinationRoom: 2, DestinationRoom: map[string]int{"dest_0": 1, "dest_1": 0, "dest_9": 5}, SkipDestinations: []string{"dest_2"}},
		{Limit: 3, DefaultDestinationRoom: 1, SkipDestinations: []string{"dest_0", "dest_1", "dest_2"}},
	} {
		p.Now, p.LeaseFor, p.Holder = t0, time.Minute, "test"
		from, _ := s.claimCandidates(p, now)
		candidates, update := s.claimStatementsSQLite(from)
		texts[candidates+"\n"+update] = true
	}
	require.Len(t, texts, 1, "the same two claim statements whatever the rooms and skips")
	var candidates, update string
	for q := range texts {
		candidates, update, _ = strings.Cut(q, "\n")
	}
	var plan []string
	rows, err := s.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+update, "test", now, `["a","b"]`)
	require.NoError(t, err)
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	assert.Contains(t, strings.Join(plan, "\n"), "INDEX sqlite_autoindex_"+s.prefix+"deliveries_1 (id=?)",
		"the update finds each picked ID by key, not by reading the table")

	claim := func(p hookrelay.ClaimParams) map[string]int {
		p.Now, p.LeaseFor, p.Holder = t0.Add(time.Hour), time.Minute, "test"
		cs, err := s.Claim(ctx, p)
		require.NoError(t, err)
		per := map[string]int{}
		for _, c := range cs {
			per[c.Delivery.DestinationID]++
		}
		return per
	}
	assert.Equal(t, map[string]int{"dest_0": 1, "dest_1": 2, "dest_2": 2, "dest_3": 2},
		claim(hookrelay.ClaimParams{Limit: 8, DefaultDestinationRoom: 2, DestinationRoom: map[string]int{"dest_0": 1}}))
	for _, query := range []string{candidates, update} {
		assert.NotNil(t, s.prepared(query), "prepared after the first claim: %s", query)
	}
	stc, stu := s.prepared(candidates), s.prepared(update)
	assert.Equal(t, map[string]int{"dest_0": 1, "dest_3": 1},
		claim(hookrelay.ClaimParams{Limit: 8, DefaultDestinationRoom: 2, DestinationRoom: map[string]int{"dest_0": 1, "dest_1": 0, "dest_9": 5},
			SkipDestinations: []string{"dest_2"}}))
	assert.Same(t, stc, s.prepared(candidates), "the next claim, with other rooms and skips, runs the same statements")
	assert.Same(t, stu, s.prepared(update), "the next claim, with other rooms and skips, runs the same statements")
}

// countSQLiteCompiles limits s's pool to one connection and counts the
// statements compiled on it from here on (other than BEGIN and COMMIT,
// which the driver compiles every time): every compilation, first or
// again, passes through the connection's authorizer. Registering it
// expires the connection's prepared statements, so the caller runs its
// statements once before counting.
func countSQLiteCompiles(t *testing.T, s *Store) *atomic.Int64 {
	t.Helper()
	s.DB().SetMaxOpenConns(1)
	var compiles atomic.Int64
	conn, err := s.DB().Conn(context.Background())
	require.NoError(t, err)
	require.NoError(t, conn.Raw(func(dc any) error {
		return dc.(sqlite.AuthorizerRegisterer).RegisterAuthorizer(func(a sqlite.AuthorizerActionCode, _, _, _, _ string) sqlite.AuthorizerReturnCode {
			if a != sqlite.AuthTransaction {
				compiles.Add(1)
			}
			return sqlite.AuthorizerOK
		})
	}))
	require.NoError(t, conn.Close())
	return &compiles
}

// An enqueue's size varies with the caller. SQLite compiled the multi-row
// INSERT of every enqueue (its text has a row of placeholders per
// delivery); the Store's own transaction now inserts row by row with one
// prepared statement.
func TestSQLiteEnqueueIsNotRecompiledForItsSize(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backend{dialect: SQLite}, Options{})
	compiles := countSQLiteCompiles(t, s)
	seq := 0
	enqueue := func(n int) []bool {
		var ds []hookrelay.Delivery
		for range n {
			seq++
			ds = append(ds, newDelivery(fmt.Sprintf("evt_%d", seq), "dest_1", t0.Add(time.Duration(seq))))
		}
		ds = append(ds, ds[0]) // a repeated enqueue creates nothing
		created, err := s.Create(ctx, ds)
		require.NoError(t, err)
		return created
	}
	for range 2 {
		enqueue(1)
	}
	compiles.Store(0)
	for _, n := range []int{2, 7, 3, 20} {
		created := enqueue(n)
		want := make([]bool, n+1)
		for i := range n {
			want[i] = true
		}
		assert.Equal(t, want, created, "enqueue of %d", n)
	}
	assert.Zero(t, compiles.Load(), "statements compiled while enqueues of other sizes ran")
	var stored int
	require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.prefix+"deliveries").Scan(&stored))
	assert.Equal(t, 2+2+7+3+20, stored)
}

// A worker asks each claim for what it has free, so the limit changes from
// one claim to the next. SQLite compiled a statement with a bare LIMIT ?
// again whenever the bound limit changed (its planner had read the value):
// in peerbench about a tenth of the claims' CPU. Every compilation passes
// through the connection's authorizer, so the test counts its calls while
// claims with other limits run, with and without rooms, on a pool of one
// connection that has run both kinds of claim before.
func TestSQLiteClaimIsNotRecompiledForItsLimit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backend{dialect: SQLite}, Options{})
	queueSpread(t, s, 40, 4)
	compiles := countSQLiteCompiles(t, s)

	claim := func(limit int, rooms bool) int {
		p := hookrelay.ClaimParams{Limit: limit, Now: t0.Add(time.Hour), LeaseFor: time.Hour, Holder: "test"}
		if rooms {
			p.DefaultDestinationRoom = 3
		}
		cs, err := s.Claim(ctx, p)
		require.NoError(t, err)
		return len(cs)
	}
	// Compiled (registering the authorizer expired every statement) and
	// prepared on the one connection.
	for range 2 {
		claim(1, true)
		claim(1, false)
	}
	compiles.Store(0)
	claimed := 0
	for limit := 2; limit <= 5; limit++ {
		claimed += claim(limit, true)
		claimed += claim(limit, false)
	}
	assert.Equal(t, 2*(2+3+4+5), claimed, "the claims took what they were asked for")
	assert.Zero(t, compiles.Load(), "statements compiled while claims with other limits ran")
}

// A worker's claims carry different numbers of rooms and skipped
// destinations. On PostgreSQL pgx prepares each statement text it has not
// seen on a connection, and keeps up to 512 of them, plans included, in the
// server process: a claim statement with a placeholder per room and per
// skip was another prepared statement for every number of them. The test
// runs claims with other rooms and skips on a pool of one connection and
// counts the claim statements the server holds prepared for it.
func TestPostgresClaimIsOneStatementWhateverTheRooms(t *testing.T) {
	b := postgresBackend(t)
	ctx := context.Background()
	db, err := openDB(Postgres, os.Getenv(b.envVar), 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	s, err := New(db, Options{Dialect: Postgres, TablePrefix: randomPrefix()})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	t.Cleanup(func() { dropTables(t, s) })
	queueSpread(t, s, 60, 6)

	per := map[string]int{}
	for i := range 8 {
		rooms := map[string]int{}
		for d := range 3 + i%4 { // the others take the default room
			rooms[fmt.Sprintf("dest_%d", d)] = 1 + (i+d)%3
		}
		rooms[fmt.Sprintf("dest_%d", i%6)] = 0 // no room: not claimed
		var skip []string
		for d := range i % 3 {
			skip = append(skip, fmt.Sprintf("dest_%d", (i+d+1)%6))
		}
		cs, err := s.Claim(ctx, hookrelay.ClaimParams{Now: t0.Add(time.Hour), Limit: 5 + i, LeaseFor: time.Hour, Holder: "test",
			DefaultDestinationRoom: 2, DestinationRoom: rooms, SkipDestinations: skip})
		require.NoError(t, err)
		taken := map[string]int{}
		for _, c := range cs {
			dest := c.Delivery.DestinationID
			taken[dest]++
			assert.NotContains(t, skip, dest, "claim %d took a skipped destination", i)
			room, ok := rooms[dest]
			if !ok {
				room = 2
			}
			assert.LessOrEqual(t, taken[dest], room, "claim %d took more than %s's room", i, dest)
			per[dest]++
		}
		assert.NotEmpty(t, cs, "claim %d", i)
	}
	assert.Len(t, per, 6, "every destination was claimed from")

	var prepared int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE position($1 in statement) > 0",
		"UPDATE "+s.prefix+"deliveries SET lease_token").Scan(&prepared))
	assert.Equal(t, 1, prepared, "claim statements prepared on the connection")
}

// On PostgreSQL the deliveries table leaves room on its pages, so a claim
// or a lease's end (unindexed columns only) can update a row in place
// instead of adding an entry to every index.
func TestDeliveriesTableLeavesRoomForInPlaceUpdates(t *testing.T) {
	b := postgresBackend(t)
	s := newStore(t, b, Options{})
	var raw string
	require.NoError(t, s.db.QueryRow("SELECT COALESCE(array_to_string(reloptions, ','), '') FROM pg_class WHERE relname = $1",
		s.prefix+"deliveries").Scan(&raw))
	assert.Contains(t, strings.Split(raw, ","), "fillfactor=50")
}

// A claim of a freshly queued backlog updates every row it leases in place
// (a heap-only update: no new entry in any index). The rows are claimed in
// batches, each in one statement, so a page's old versions cannot be
// pruned before the claim commits: the page needs room for a new version
// of every row on it. With 30% of each page free (schema 6) about half of
// the claimed rows moved to another page, each with three index entries.
func TestClaimsUpdateRowsInPlace(t *testing.T) {
	b := postgresBackend(t)
	s := newStore(t, b, Options{})
	ctx := context.Background()
	payload := []byte(`{"paymentId":"pay_7319","note":"` + strings.Repeat("x", 480) + `"}`) // peerbench's 512 bytes
	var ds []hookrelay.Delivery
	for i := range 1000 {
		d := newDelivery(fmt.Sprintf("evt_%d", i), fmt.Sprintf("dest_%d", i%10), t0.Add(time.Duration(i)))
		d.Payload = payload
		ds = append(ds, d)
	}
	_, err := s.Create(ctx, ds)
	require.NoError(t, err)

	p := hookrelay.ClaimParams{Now: t0.Add(time.Hour), Limit: 200, LeaseFor: time.Minute, Holder: "test", DefaultDestinationRoom: 40}
	now, err := encTime("Now", p.Now)
	require.NoError(t, err)
	expires, err := encTime("lease expiry", p.Now.Add(p.LeaseFor))
	require.NoError(t, err)
	from, args := s.claimCandidates(p, now)
	query, args := s.claimStatement(from, args, p, expires)
	var claimed, updated, inPlace int
	require.NoError(t, s.inTx(ctx, "claim", func(q querier) error {
		if err := s.planSettings(ctx, q, pgClaimSettings, "explain claim"); err != nil {
			return err
		}
		rows, err := q.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			claimed++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// This transaction's own counts, exact and at once.
		return q.QueryRowContext(ctx, "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = $1",
			s.prefix+"deliveries").Scan(&updated, &inPlace)
	}))
	require.Equal(t, 200, claimed)
	require.Equal(t, 200, updated)
	assert.Equal(t, updated, inPlace, "every claimed row is updated in place")
}

// On PostgreSQL the history keeps out of the indexes its readers do not
// need: deliveries_destination holds pending and dead rows only (a row's
// move to delivered adds no entry to it), and the attempts are keyed on
// (delivery_id, seq) with no second index in that order. Every reader still
// finds an index: the per-destination statistics and the dead-letter
// filters use the partial index (its predicate follows from theirs), a
// record's history and the cleaner use the key.
func TestHistoryIndexesServeTheirReaders(t *testing.T) {
	b := postgresBackend(t)
	s := newStore(t, b, Options{})
	ctx := context.Background()

	defs := map[string]string{}
	rows, err := s.db.QueryContext(ctx, "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ($1, $2)", s.prefix+"deliveries", s.prefix+"attempts")
	require.NoError(t, err)
	for rows.Next() {
		var name, def string
		require.NoError(t, rows.Scan(&name, &def))
		defs[strings.TrimPrefix(name, s.prefix)] = def
	}
	require.NoError(t, rows.Err())
	rows.Close()
	assert.Contains(t, defs["deliveries_destination"], "(destination_id, state) WHERE (state <> 'delivered'::text)")
	assert.Contains(t, defs["attempts_pkey"], "UNIQUE INDEX")
	assert.Contains(t, defs["attempts_pkey"], "(delivery_id, seq)")
	assert.NotContains(t, defs, "attempts_delivery", "the key serves (delivery_id, seq)")

	// 20,000 delivered records with an attempt each, 400 pending, 400 dead.
	_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO {d} (id, event_id, tenant_id, scope, destination_id, event_type, payload,
		envelope_version, attempt, first_queued_at, next_attempt_at, policy_version, state, last_outcome, last_reason, updated_at)
		SELECT 'whd_' || g, 'evt_' || g, 'tenant_a', '{}', 'dest_' || (g % 10), 'lease.payment_recorded', '\x7b7d'::bytea,
		1, 1, g, g, 'default', CASE WHEN g > 20400 THEN 'dead' WHEN g > 20000 THEN 'pending' ELSE 'delivered' END, 'accepted', '', g
		FROM generate_series(1, 20800) g`))
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO {a} (delivery_id, number, started_at, finished_at, kind, outcome, reason, status_code, detail)
		SELECT 'whd_' || g, 1, g, g, 1, 'accepted', '', 204, '' FROM generate_series(1, 20000) g`))
	require.NoError(t, err)
	for _, st := range []string{"ANALYZE {d}", "ANALYZE {a}"} {
		_, err := s.db.ExecContext(ctx, s.q(st))
		require.NoError(t, err)
	}
	explain := func(query string, args ...any) string {
		t.Helper()
		return strings.Join(queryColumn[string](t, s, "EXPLAIN "+query, args...), "\n")
	}
	for _, c := range []struct{ name, query, index string }{
		{"stats", "SELECT destination_id, COUNT(*) FROM {d} WHERE state IN ('pending', 'dead') GROUP BY destination_id", "deliveries_destination"},
		{"dead letters of a destination", "SELECT tenant_id, destination_id, last_reason, COUNT(*) FROM {d} WHERE state = 'dead' AND destination_id IN ('dest_3', 'dest_4') GROUP BY tenant_id, destination_id, last_reason", "deliveries_destination"},
		{"a record's history", "SELECT number FROM {a} WHERE delivery_id = 'whd_7' ORDER BY seq", "attempts_pkey"},
		{"the cleaner's attempts", "DELETE FROM {a} WHERE delivery_id IN ('whd_7', 'whd_8')", "attempts_pkey"},
		{"recent outcomes", "SELECT COUNT(*) FROM {a} WHERE finished_at >= 19990", "attempts_finished"},
	} {
		plan := explain(c.query)
		assert.Contains(t, plan, s.prefix+c.index, "%s:\n%s", c.name, plan)
		assert.NotContains(t, plan, "Seq Scan", "%s:\n%s", c.name, plan)
	}
}

// A claim updates the rows it picked by their addresses (a TID scan), not
// by reading the table, even when the server planned it while the table
// was young. pgx prepares the claim once per connection,
// and after a few runs PostgreSQL plans it once for any values and keeps
// that plan until the table's statistics change: planned on a table of a
// few rows (a new deployment, or a worker started before the first burst),
// the update read the whole table for its picked IDs, and went on doing so
// on every claim as the table grew — in peerbench, 15,000 rows read per
// claim, a claim's server time 1 ms → 18 ms. Turning sequential scans off
// for the claim alone pushes its plan's cost past the threshold at which
// PostgreSQL compiles a statement with LLVM (jit_above_cost), which took
// about half a second per claim, so the claim turns that off too.
func TestClaimPlannedOnAYoungTableStillUpdatesByAddress(t *testing.T) {
	b := postgresBackend(t)
	for _, analyzed := range []bool{false, true} {
		t.Run(fmt.Sprintf("analyzed=%v", analyzed), func(t *testing.T) {
			s := newStore(t, b, Options{})
			p := hookrelay.ClaimParams{Now: t0.Add(time.Hour), Limit: 50, LeaseFor: time.Minute, Holder: "test", DefaultDestinationRoom: 10}
			from, args, expires := claimClauses(t, s, p)
			query, args := s.claimStatement(from, args, p, expires)
			plan := planKeptFromAYoungTable(t, s, analyzed, pgClaimSettings, query, args)
			assert.Regexp(t, `Tid Scan on `+s.prefix+`deliveries .*\n\s*TID Cond: \(ctid = ANY`, plan,
				"the update must fetch the picked rows by their addresses")
			assert.NotContains(t, plan, "Seq Scan on "+s.prefix+"deliveries ", "reading the whole table on every claim")
			assert.NotContains(t, plan, "JIT", "compiling the claim with LLVM on every run")
		})
	}
}

// planKeptFromAYoungTable returns the plan PostgreSQL runs for query on a
// worker's connection that prepared it while the deliveries table held
// three records (ANALYZEd then if analyzed, else never), after 3,000 more
// arrived: the statement is prepared in one session, under the plan
// settings given, planned once for any values on the young table, and that plan
// is kept (nothing tells the server the table grew) and explained again.
func planKeptFromAYoungTable(t *testing.T, s *Store, analyzed bool, settings, query string, args []any) string {
	t.Helper()
	ctx := context.Background()
	queueSpread(t, s, 3, 3)
	if analyzed {
		_, err := s.db.ExecContext(ctx, s.q("ANALYZE {d}"))
		require.NoError(t, err)
	}
	values := make([]string, len(args))
	for i, a := range args {
		values[i] = sqlLiteral(t, a)
	}
	conn, err := s.db.Conn(ctx)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	// A prepared statement outlives the transaction: the session's own.
	defer func() { _, _ = conn.ExecContext(ctx, "DEALLOCATE young_statement") }()
	tx, err := conn.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	require.NoError(t, s.planSettings(ctx, tx, settings, "test"))
	_, err = tx.ExecContext(ctx, "SET LOCAL plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "PREPARE young_statement AS "+query)
	require.NoError(t, err)
	explain := func() string {
		t.Helper()
		return strings.Join(queryColumnOn[string](t, tx, "EXPLAIN EXECUTE young_statement("+strings.Join(values, ", ")+")"), "\n")
	}
	young := explain()
	// The burst arrives (another connection); the kept plan is used again.
	ds := make([]hookrelay.Delivery, 0, 3000)
	for i := range 3000 {
		ds = append(ds, newDelivery(fmt.Sprintf("evt_burst_%d", i), fmt.Sprintf("dest_%d", i%10), t0.Add(time.Duration(i))))
	}
	_, err = s.Create(ctx, ds)
	require.NoError(t, err)
	grown := explain()
	require.Equal(t, young, grown, "the plan made on the young table is the one kept")
	return grown
}

// sqlLiteral is v as a PostgreSQL literal, for EXPLAIN EXECUTE.
func sqlLiteral(t *testing.T, v any) string {
	t.Helper()
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case int, int64, int32:
		return fmt.Sprint(v)
	}
	return arrayLiteral(t, v)
}
