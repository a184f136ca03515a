package hooksql

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// t0 is a fixed test time with nanoseconds, to show they round-trip.
var t0 = time.Unix(1_790_000_000, 123_456_789)

func newDelivery(event, dest string, at time.Time) hookrelay.Delivery {
	return hookrelay.Delivery{
		ID: hookrelay.DeliveryID(event, dest), EventID: event, TenantID: "tenant_1",
		Scope: map[string]string{"property": "prop_204"}, DestinationID: dest,
		EventType: "lease.payment_recorded", Payload: []byte(`{"paymentId":"pay_7319"}`),
		EnvelopeVersion: hookrelay.EnvelopeVersion, Attempt: 1, FirstQueuedAt: at,
		NextAttemptAt: at, PolicyVersion: "default", State: hookrelay.StatePending, UpdatedAt: at,
	}
}

func claimAll(t *testing.T, s *Store, now time.Time) []hookrelay.Claim {
	t.Helper()
	cs, err := s.Claim(context.Background(), hookrelay.ClaimParams{Now: now, Limit: 100, LeaseFor: time.Minute, Holder: "test"})
	require.NoError(t, err)
	return cs
}

// createAndClaimAll creates n deliveries to dst_1 due at t0 and claims
// them all.
func createAndClaimAll(t *testing.T, s *Store, n int) []hookrelay.Claim {
	t.Helper()
	ds := make([]hookrelay.Delivery, n)
	for i := range ds {
		ds[i] = newDelivery(fmt.Sprintf("evt_%d", i), "dst_1", t0)
	}
	_, err := s.Create(context.Background(), ds)
	require.NoError(t, err)
	cs := claimAll(t, s, t0)
	require.Len(t, cs, n)
	return cs
}

func TestMigrate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		v, err := s.Version(ctx)
		require.NoError(t, err)
		assert.Equal(t, SchemaVersion, v)

		t.Run("re-running is a no-op", func(t *testing.T) {
			_, err := s.Create(ctx, []hookrelay.Delivery{newDelivery("evt_1", "dst_1", t0)})
			require.NoError(t, err)
			require.NoError(t, s.Migrate(ctx))
			require.NoError(t, s.Migrate(ctx))
			_, err = s.Get(ctx, hookrelay.DeliveryID("evt_1", "dst_1"))
			require.NoError(t, err, "data survives a second Migrate")
		})

		t.Run("a newer schema is refused", func(t *testing.T) {
			_, err := s.db.ExecContext(ctx, s.q("INSERT INTO {m} (version, name) VALUES (?, ?)"), SchemaVersion+1, "9999_future.sql")
			require.NoError(t, err)
			err = s.Migrate(ctx)
			require.ErrorIs(t, err, ErrSchemaTooNew)
			assert.Contains(t, err.Error(), fmt.Sprintf("version %d", SchemaVersion+1))
		})
	})
}

// A step merged later from a parallel line of work can be numbered below
// the database's highest version (this schema has 0004 but no 0003 yet):
// Migrate applies it all the same, once. On MySQL, whose DDL commits at
// once, a step interrupted after its ALTER re-runs cleanly.
func TestMigrateAppliesAStepBelowTheHighestVersion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		t.Cleanup(func() { s.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+s.prefix+"parallel_step") }) //nolint:errcheck
		ms, err := s.migrations()
		require.NoError(t, err)
		require.Greater(t, ms[len(ms)-1].version, 3)
		// Step 3 as if it arrived from a parallel line of work after the
		// database reached the highest version: not recorded yet.
		_, err = s.db.ExecContext(ctx, s.q("DELETE FROM {m} WHERE version = 3"))
		require.NoError(t, err)
		for i := range ms {
			if ms[i].version == 3 {
				ms[i] = migration{version: 3, name: "0003_parallel.sql", stmts: []string{
					"CREATE TABLE " + s.prefix + "parallel_step (x INTEGER NOT NULL)",
				}}
			}
		}
		require.NoError(t, s.applyMigrations(ctx, s.db, ms))
		require.NoError(t, s.applyMigrations(ctx, s.db, ms), "a second run is a no-op")
		var n int
		require.NoError(t, s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.prefix+"parallel_step").Scan(&n), "the step below the highest ran")
		require.NoError(t, s.db.QueryRowContext(ctx, s.q("SELECT COUNT(*) FROM {m} WHERE version = 3")).Scan(&n))
		assert.Equal(t, 1, n, "and was recorded once")

		if b.dialect != SQLite {
			// As if 0004 had altered the table and died before recording it.
			_, err := s.db.ExecContext(ctx, s.q("DELETE FROM {m} WHERE version = 4"))
			require.NoError(t, err)
			require.NoError(t, s.Migrate(ctx), "re-running an applied ADD COLUMN is harmless")
			v, err := s.Version(ctx)
			require.NoError(t, err)
			assert.Equal(t, SchemaVersion, v)
		}
	})
}

func TestMigrateFreshDatabaseReportsVersionZero(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b, Options{})
		other, err := New(s.db, Options{Dialect: b.dialect, TablePrefix: randomPrefix()})
		require.NoError(t, err)
		v, err := other.Version(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 0, v)
	})
}

func TestNewRefusesBadOptions(t *testing.T) {
	db := serverlessDB(t)
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{}, "Dialect is required"},
		{Options{Dialect: "oracle"}, `Dialect "oracle" is unknown`},
		{Options{Dialect: SQLite, TablePrefix: "Bad-Prefix"}, "TablePrefix"},
		{Options{Dialect: SQLite, TablePrefix: "x; DROP TABLE y"}, "TablePrefix"},
		{Options{Dialect: SQLite, TablePrefix: strings.Repeat("a", 41)}, "TablePrefix"},
		{Options{Dialect: Postgres, TablePrefix: strings.Repeat("a", 36)}, "on PostgreSQL it must be at most 35"},
		{Options{Dialect: SQLite, MaxPayloadBytes: -1}, "MaxPayloadBytes"},
	} {
		_, err := New(db, tc.opts)
		require.Error(t, err, "%+v", tc.opts)
		assert.Contains(t, err.Error(), tc.want)
	}
}

func TestTimesRoundTripToTheNanosecond(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		d := newDelivery("evt_1", "dst_1", t0)
		d.FirstQueuedAt = time.Time{} // zero times round-trip too
		_, err := s.Create(ctx, []hookrelay.Delivery{d})
		require.NoError(t, err)
		got, err := s.Get(ctx, d.ID)
		require.NoError(t, err)
		assert.Equal(t, d, got, "the record round-trips exactly, times in time.Local")
		assert.True(t, got.FirstQueuedAt.IsZero())

		far := newDelivery("evt_2", "dst_1", time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC))
		_, err = s.Create(ctx, []hookrelay.Delivery{far})
		require.ErrorIs(t, err, hookrelay.ErrInvalidDelivery)
		assert.Contains(t, err.Error(), "storable range")
	})
}

func TestNilAndEmptyPayloadAndScopeStayApart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		a := newDelivery("evt_nil", "dst_1", t0)
		a.Payload, a.Scope = nil, nil
		e := newDelivery("evt_empty", "dst_1", t0)
		e.Payload, e.Scope = []byte{}, map[string]string{}
		_, err := s.Create(ctx, []hookrelay.Delivery{a, e})
		require.NoError(t, err)
		got, err := s.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Nil(t, got.Payload)
		assert.Nil(t, got.Scope)
		got, err = s.Get(ctx, e.ID)
		require.NoError(t, err)
		assert.NotNil(t, got.Payload)
		assert.Empty(t, got.Payload)
		assert.NotNil(t, got.Scope)
	})
}

// Create and EnqueueTx (each dialect's statements; on PostgreSQL through
// pgx, the unnest statement) report which deliveries they created, within
// a batch of two statements and across calls.
func TestCreateReportsDuplicatesWithinABatchAndAcrossChunks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, viaTx := range []bool{false, true} {
			t.Run(map[bool]string{false: "Create", true: "EnqueueTx"}[viaTx], func(t *testing.T) {
				ctx := context.Background()
				s := newStore(t, b, Options{})
				create := func(ds []hookrelay.Delivery) ([]bool, error) {
					if !viaTx {
						return s.Create(ctx, ds)
					}
					tx, err := s.DB().BeginTx(ctx, nil)
					require.NoError(t, err)
					created, err := s.EnqueueTx(ctx, tx, ds)
					require.NoError(t, err)
					return created, tx.Commit()
				}
				var batch []hookrelay.Delivery
				for i := range insertChunkRows + 100 { // two INSERT statements
					batch = append(batch, newDelivery(fmt.Sprintf("evt_%04d", i), "dst_1", t0))
				}
				batch = append(batch, batch[3]) // duplicate within the batch
				created, err := create(batch)
				require.NoError(t, err)
				require.Len(t, created, len(batch))
				for i := range insertChunkRows + 100 {
					require.True(t, created[i], "row %d", i)
				}
				assert.False(t, created[len(batch)-1], "the second copy in one batch is not created")

				created, err = create(append(batch[:2:2], newDelivery("evt_new", "dst_1", t0)))
				require.NoError(t, err)
				assert.Equal(t, []bool{false, false, true}, created, "a repeated enqueue is a no-op")
				require.NoError(t, s.Enqueue(ctx, batch))
				got, err := s.Get(ctx, batch[insertChunkRows+50].ID)
				require.NoError(t, err, "a row of the second statement is stored")
				assert.Equal(t, batch[insertChunkRows+50].Payload, got.Payload)
			})
		}
	})
}

func TestBadInputIsRefusedAndNothingIsWritten(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{MaxPayloadBytes: 1024})
		good := newDelivery("evt_good", "dst_1", t0)
		for _, tc := range []struct {
			name  string
			edit  func(*hookrelay.Delivery)
			field string
		}{
			{"payload over the limit", func(d *hookrelay.Delivery) { d.Payload = make([]byte, 1025) }, "Payload"},
			{"empty ID", func(d *hookrelay.Delivery) { d.ID = "" }, "ID"},
			{"overlong ID", func(d *hookrelay.Delivery) { d.ID = strings.Repeat("x", 256) }, "ID"},
			{"ID not UTF-8", func(d *hookrelay.Delivery) { d.ID = "whd_\xff" }, "ID"},
			{"tenant with NUL", func(d *hookrelay.Delivery) { d.TenantID = "t\x00" }, "TenantID"},
			{"destination too long", func(d *hookrelay.Delivery) { d.DestinationID = strings.Repeat("d", 300) }, "DestinationID"},
			{"unknown envelope version", func(d *hookrelay.Delivery) { d.EnvelopeVersion = hookrelay.EnvelopeVersion + 1 }, "EnvelopeVersion"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				bad := newDelivery("evt_bad", "dst_1", t0)
				tc.edit(&bad)
				_, err := s.Create(ctx, []hookrelay.Delivery{good, bad})
				require.ErrorIs(t, err, hookrelay.ErrInvalidDelivery)
				var ve *hookrelay.ValidationError
				require.ErrorAs(t, err, &ve)
				assert.Equal(t, tc.field, ve.Field)
				assert.Contains(t, err.Error(), "deliveries[1]")
				_, err = s.Get(ctx, good.ID)
				require.ErrorIs(t, err, hookrelay.ErrNotFound, "the valid record of the refused batch was not written")
			})
		}
	})
}

func TestUndecodableRecord(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		bad, good := newDelivery("evt_bad", "dst_1", t0), newDelivery("evt_good", "dst_1", t0.Add(time.Second))
		_, err := s.Create(ctx, []hookrelay.Delivery{bad, good})
		require.NoError(t, err)
		_, err = s.db.ExecContext(ctx, s.q("UPDATE {d} SET scope = ? WHERE id = ?"), "{not json", bad.ID)
		require.NoError(t, err)

		_, err = s.Get(ctx, bad.ID)
		var de *DecodeError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, "scope", de.Column)
		assert.Contains(t, err.Error(), bad.ID)

		cs := claimAll(t, s, t0.Add(time.Minute))
		require.Len(t, cs, 1, "the undecodable record does not block the queue")
		assert.Equal(t, good.ID, cs[0].Delivery.ID)
		var state, reason string
		require.NoError(t, s.db.QueryRowContext(ctx, s.q("SELECT state, last_reason FROM {d} WHERE id = ?"), bad.ID).Scan(&state, &reason))
		assert.Equal(t, "dead", state)
		assert.Equal(t, ReasonUndecodable, reason)
	})
}

// A broker's lease of a record this library cannot read fails with the
// DecodeError and leaves no lease behind, so the record is not held for a
// lease's length (on PostgreSQL the one statement that reads the record
// also leases it, and lets the lease go again).
func TestAcquireLeaseOfAnUndecodableRecordLeavesItUnleased(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		bad := newDelivery("evt_bad", "dst_1", t0)
		_, err := s.Create(ctx, []hookrelay.Delivery{bad})
		require.NoError(t, err)
		_, err = s.db.ExecContext(ctx, s.q("UPDATE {d} SET scope = ? WHERE id = ?"), "{not json", bad.ID)
		require.NoError(t, err)

		_, err = s.AcquireLease(ctx, hookrelay.AcquireLeaseParams{ID: bad.ID, Now: t0.Add(time.Minute), LeaseFor: time.Hour, Holder: "broker"})
		var de *DecodeError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, "scope", de.Column)
		var expires sql.NullInt64
		require.NoError(t, s.db.QueryRowContext(ctx, s.q("SELECT lease_expires_at FROM {d} WHERE id = ?"), bad.ID).Scan(&expires))
		assert.False(t, expires.Valid, "no lease is left on the record")
	})
}

func TestRecordFromNewerLibraryIsNotClaimed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		d := newDelivery("evt_future", "dst_1", t0)
		_, err := s.Create(ctx, []hookrelay.Delivery{d})
		require.NoError(t, err)
		_, err = s.db.ExecContext(ctx, s.q("UPDATE {d} SET envelope_version = ? WHERE id = ?"), hookrelay.EnvelopeVersion+1, d.ID)
		require.NoError(t, err)

		assert.Empty(t, claimAll(t, s, t0.Add(time.Hour)), "left pending for a worker that can read it")
		_, err = s.Get(ctx, d.ID)
		require.ErrorIs(t, err, hookrelay.ErrUnknownEnvelopeVersion)
	})
}

func TestErrorsDoNotLeakTheDSNPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		dialect Dialect
		dsn     string
	}{
		{Postgres, "postgres://hookrelay:s3cret-pw@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"},
		{Postgres, "host=127.0.0.1 port=1 user=hookrelay password=s3cret-pw dbname=test connect_timeout=2"},
		{MySQL, "hookrelay:s3cret-pw@tcp(127.0.0.1:1)/test?timeout=2s"},
	} {
		_, err := Open(ctx, tc.dialect, tc.dsn, Options{})
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "s3cret-pw")
		assert.ErrorIs(t, err, ErrDatabase)
	}
}

func TestDestinationSecretsRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		p := hookrelay.DefaultPolicy()
		d := hookrelay.Destination{
			ID: "dst_1", TenantID: "tenant_1", URL: "https://user:pw@example.test/hook",
			Secrets: []string{"whsec_a", "whsec_b"}, Headers: map[string]string{"Authorization": "Bearer x"},
			Policy: &p, MaxConcurrency: 3, Timeout: 1500 * time.Millisecond,
		}
		require.NoError(t, s.Put(ctx, d))
		got, err := s.Destination(ctx, "dst_1")
		require.NoError(t, err)
		assert.Equal(t, d, got)

		require.NoError(t, s.SetPaused(ctx, "dst_1", true))
		require.NoError(t, s.SetPaused(ctx, "dst_1", true), "pausing twice is harmless")
		require.NoError(t, s.Disable(ctx, hookrelay.DisableParams{ID: "dst_1", Reason: "destination_gone", Now: t0}))
		require.NoError(t, s.Disable(ctx, hookrelay.DisableParams{ID: "dst_1", Reason: "other", Now: t0}))
		got, err = s.Destination(ctx, "dst_1")
		require.NoError(t, err)
		assert.True(t, got.Paused)
		assert.True(t, got.Disabled)
		assert.Equal(t, "destination_gone", got.DisabledReason)

		require.ErrorIs(t, s.SetPaused(ctx, "nope", true), hookrelay.ErrDestinationNotFound)
		_, err = s.Destination(ctx, "nope")
		require.ErrorIs(t, err, hookrelay.ErrDestinationNotFound)
	})
}

// serverlessDB is a *sql.DB that is never used to connect.
func serverlessDB(t *testing.T) *sql.DB {
	db, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestCreateWithoutInsertReturning runs the MySQL path (no INSERT …
// RETURNING, one row per statement) on the configured MySQL-dialect server,
// which may be MariaDB.
func TestCreateWithoutInsertReturning(t *testing.T) {
	b := backends[2]
	b.skipUnlessConfigured(t)
	ctx := context.Background()
	s := newStore(t, b, Options{})
	s.returningKnown, s.returning = true, false
	d1, d2 := newDelivery("evt_1", "dst_1", t0), newDelivery("evt_2", "dst_1", t0)
	created, err := s.Create(ctx, []hookrelay.Delivery{d1, d2, d1})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, false}, created)
	created, err = s.Create(ctx, []hookrelay.Delivery{d2})
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, created)
}

func TestConcurrentMigrationsAgree(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{}) // the pool (and, for SQLite, the file) to share
		prefix := randomPrefix()
		fresh, err := New(s.db, Options{Dialect: b.dialect, TablePrefix: prefix})
		require.NoError(t, err)
		t.Cleanup(func() { dropTables(t, fresh) })
		errs := make(chan error, 4)
		for range 4 {
			go func() {
				st, err := New(s.db, Options{Dialect: b.dialect, TablePrefix: prefix})
				if err == nil {
					err = st.Migrate(ctx)
				}
				errs <- err
			}()
		}
		for range 4 {
			require.NoError(t, <-errs)
		}
		v, err := fresh.Version(ctx)
		require.NoError(t, err)
		assert.Equal(t, SchemaVersion, v)
		var n int
		require.NoError(t, s.db.QueryRowContext(ctx, fresh.q("SELECT COUNT(*) FROM {m}")).Scan(&n))
		ms, err := fresh.migrations()
		require.NoError(t, err)
		assert.Equal(t, len(ms), n, "each migration recorded once")
	})
}

func TestCancelledContextIsReportedAsSuch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := s.Claim(ctx, hookrelay.ClaimParams{Now: t0, Limit: 1, LeaseFor: time.Minute})
		require.ErrorIs(t, err, context.Canceled)
		_, err = s.Create(ctx, []hookrelay.Delivery{newDelivery("evt_1", "dst_1", t0)})
		require.ErrorIs(t, err, context.Canceled)
		_, err = s.Get(ctx, "whd_x")
		require.ErrorIs(t, err, context.Canceled)
	})
}

// A paused or disabled destination's deliveries are not claimed at all, by
// any process sharing the database — not claimed and released — until it is
// resumed.
func TestPausedAndDisabledDestinationsAreNotClaimed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		for _, id := range []string{"dst_paused", "dst_gone", "dst_ok"} {
			require.NoError(t, s.Put(ctx, hookrelay.Destination{ID: id, TenantID: "tenant_1", URL: "https://x.example/"}))
		}
		require.NoError(t, s.SetPaused(ctx, "dst_paused", true))
		require.NoError(t, s.Disable(ctx, hookrelay.DisableParams{ID: "dst_gone", Reason: hookrelay.ReasonDestinationGone, Now: t0}))
		paused := newDelivery("evt_1", "dst_paused", t0)
		gone := newDelivery("evt_2", "dst_gone", t0)
		ok := newDelivery("evt_3", "dst_ok", t0)
		unknown := newDelivery("evt_4", "dst_elsewhere", t0) // destination kept in another store
		_, err := s.Create(ctx, []hookrelay.Delivery{paused, gone, ok, unknown})
		require.NoError(t, err)

		var got []string
		for _, c := range claimAll(t, s, t0.Add(time.Second)) {
			got = append(got, c.Delivery.ID)
		}
		assert.ElementsMatch(t, []string{ok.ID, unknown.ID}, got)

		require.NoError(t, s.SetPaused(ctx, "dst_paused", false))
		cs := claimAll(t, s, t0.Add(2*time.Second))
		require.Len(t, cs, 1, "resumed: claimable again")
		assert.Equal(t, paused.ID, cs[0].Delivery.ID)
		assert.Equal(t, 1, cs[0].Delivery.Attempt, "no attempt was spent while paused")
	})
}

// DropTables removes every table the migrations created under the Store's
// prefix, so a test suite or benchmark that makes a prefix per run leaves
// nothing behind; a migration that adds a table DropTables does not know
// fails here.
func TestDropTablesLeavesNoTableOfThePrefix(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		var list string
		switch b.dialect {
		case SQLite:
			list = "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ?"
		case Postgres:
			list = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name LIKE ?"
		case MySQL:
			list = "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?"
		}
		tables := func() []string {
			var out []string
			for _, n := range queryColumn[string](t, s, list, s.prefix+"%") {
				out = append(out, strings.TrimPrefix(n, s.prefix))
			}
			return out
		}
		assert.ElementsMatch(t, tableNames, tables(), "the tables Migrate created are the ones DropTables drops")
		require.NoError(t, s.DropTables(ctx))
		assert.Empty(t, tables())
		require.NoError(t, s.Migrate(ctx), "Migrate creates them again")
		assert.Len(t, tables(), len(tableNames))
	})
}

// queryColumn runs query (with the Store's table names bound) and returns
// its one column.
func queryColumn[T any](t *testing.T, s *Store, query string, args ...any) []T {
	t.Helper()
	return queryColumnOn[T](t, s.db, s.q(query), args...)
}

// queryColumnOn runs query as it is on q (a pool, or a transaction) and
// returns its one column.
func queryColumnOn[T any](t *testing.T, q querier, query string, args ...any) []T {
	t.Helper()
	rows, err := q.QueryContext(context.Background(), query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		require.NoError(t, rows.Scan(&v))
		out = append(out, v)
	}
	require.NoError(t, rows.Err())
	return out
}

// A transaction that lost a deadlock or serialization race is run again,
// up to maxTxTries times in all; the error returned carries no conflict
// mark, and any other error, a lock wait timeout too, ends it at once.
func TestRetriedRunsATransactionAgainOnlyAfterARetryableFailure(t *testing.T) {
	lost := errors.New("deadlock detected")
	calls := 0
	err := retried(func() error {
		calls++
		if calls < 3 {
			return &txConflict{err: lost, kind: conflictRerun}
		}
		return nil
	})
	assert.NoError(t, err)
	assert.Equal(t, 3, calls, "run until it succeeds")

	calls = 0
	err = retried(func() error { calls++; return &txConflict{err: lost, kind: conflictRerun} })
	assert.Equal(t, maxTxTries, calls, "bounded")
	assert.Same(t, lost, err, "the last failure, unmarked")

	calls = 0
	waited := &txConflict{err: errors.New("lock wait timeout exceeded"), kind: conflictWaited}
	err = retried(func() error { calls++; return waited })
	assert.Equal(t, 1, calls, "a lock wait timeout is not run again")
	assert.ErrorIs(t, err, ErrTxConflict)

	calls = 0
	other := errors.New("unique violation")
	err = retried(func() error { calls++; return other })
	assert.Equal(t, 1, calls, "any other failure is not run again")
	assert.Same(t, other, err)
}

// A database error is one line of valid UTF-8 whatever the operation's
// input held: bytes that are not UTF-8 as \xNN, control characters escaped
// as Go quotes them, the rest (accents included) as it was; and the DSN
// password is still redacted from the driver's text.
func TestDatabaseErrorsArePrintable(t *testing.T) {
	s := &Store{secrets: []string{"s3cret-pw"}}
	err := s.dbErr("get caf\u00e9\xff\x00\nforged: line", errors.New("password=s3cret-pw\x1b[31m failed\r\n"))
	require.ErrorIs(t, err, ErrDatabase)
	assert.Equal(t, `hooksql: database error: get café\xff\x00\nforged: line: password=[redacted]\x1b[31m failed\r\n`, err.Error())
	assert.Equal(t, "plain text, é", printable("plain text, é"), "printable text is kept as it is")
}

// TestPayloadAtTheLimitIsStored: a payload of exactly Options.MaxPayloadBytes
// (the default, 8 MiB) is stored by Create and EnqueueTx on every dialect,
// whatever its bytes (on MySQL, a quote or NUL takes two bytes in a
// statement's text); one byte more is refused naming the field.
func TestPayloadAtTheLimitIsStored(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		atLimit := bytes.Repeat([]byte{'"', 0, '\\', '\n'}, DefaultMaxPayloadBytes/4)
		require.Len(t, atLimit, DefaultMaxPayloadBytes)
		for _, viaTx := range []bool{false, true} {
			create := func(d hookrelay.Delivery) ([]bool, error) {
				if !viaTx {
					return s.Create(ctx, []hookrelay.Delivery{d})
				}
				tx, err := s.DB().BeginTx(ctx, nil)
				require.NoError(t, err)
				created, err := s.EnqueueTx(ctx, tx, []hookrelay.Delivery{d})
				if err != nil {
					_ = tx.Rollback()
					return nil, err
				}
				return created, tx.Commit()
			}
			d := newDelivery(fmt.Sprintf("evt_limit_%v", viaTx), "dst_1", t0)
			d.Payload = atLimit
			created, err := create(d)
			require.NoError(t, err, "tx %v", viaTx)
			assert.Equal(t, []bool{true}, created)
			got, err := s.Get(ctx, d.ID)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(atLimit, got.Payload), "the payload round-trips")

			over := newDelivery(fmt.Sprintf("evt_over_%v", viaTx), "dst_1", t0)
			over.Payload = append(atLimit[:len(atLimit):len(atLimit)], 'x')
			_, err = create(over)
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, "Payload", ve.Field)
			_, err = s.Get(ctx, over.ID)
			require.ErrorIs(t, err, hookrelay.ErrNotFound)
		}
	})
}
