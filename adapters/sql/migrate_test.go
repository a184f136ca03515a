package hooksql

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/http/recipient"
)

// TestMySQLMigrationsUseOnlyPortableSyntax checks, without a MySQL 8
// server, that the MySQL migrations avoid what MySQL 8 rejects and MariaDB
// accepts: ADD COLUMN IF NOT EXISTS, CREATE INDEX IF NOT EXISTS, and
// literal defaults on BLOB columns. Each ALTER TABLE adds one column, the
// form Migrate knows how to skip when it is already there, or changes one
// column's type (MODIFY), which re-runs as a no-op.
func TestMySQLMigrationsUseOnlyPortableSyntax(t *testing.T) {
	s := &Store{dialect: MySQL, prefix: "hookrelay_"}
	ms, err := s.migrations()
	require.NoError(t, err)
	require.Len(t, ms, SchemaVersion)
	blobLiteralDefault := regexp.MustCompile(`(?i)\b(TINY|MEDIUM|LONG)?(BLOB|TEXT)\b[^,]*\bDEFAULT\s+'`)
	for _, m := range ms {
		for _, st := range m.stmts {
			upper := strings.ToUpper(st)
			switch {
			case strings.HasPrefix(upper, "CREATE TABLE IF NOT EXISTS"):
			case mysqlModifyColumn.MatchString(st):
				assert.NotContains(t, st, ",", "%s: one column per ALTER TABLE: %s", m.name, st)
			case strings.HasPrefix(upper, "ALTER TABLE"):
				assert.Regexp(t, mysqlAddColumn, st, "%s: an ALTER TABLE adds one column", m.name)
				assert.Equal(t, 1, strings.Count(upper, "ADD COLUMN"), "%s: one column per ALTER TABLE: %s", m.name, st)
			case strings.HasPrefix(upper, "CREATE INDEX"):
				assert.Regexp(t, mysqlCreateIndex, st, m.name)
			default:
				t.Errorf("%s: statement Migrate cannot re-run safely on MySQL: %s", m.name, st)
			}
			assert.NotContains(t, upper, "COLUMN IF NOT EXISTS", m.name)
			assert.NotContains(t, upper, "INDEX IF NOT EXISTS", m.name)
			assert.NotRegexp(t, blobLiteralDefault, st, "%s: MySQL 8 wants DEFAULT ('…') on BLOB", m.name)
		}
	}
}

var mysqlModifyColumn = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+\w+\s+MODIFY\s+\w+\s+\w+`)

// TestMigrateCompletesAnInterruptedMySQLStep: MariaDB and MySQL commit DDL
// as they go, so a Migrate that died inside step 2 leaves some of its
// columns and no version row. The next Migrate completes the step.
func TestMigrateCompletesAnInterruptedMySQLStep(t *testing.T) {
	b := backends[len(backends)-1]
	require.Equal(t, MySQL, b.dialect)
	b.skipUnlessConfigured(t)
	ctx := context.Background()
	s := newStore(t, b, Options{})
	execAll(t, s,
		"DELETE FROM {m} WHERE version >= 2",
		"ALTER TABLE {r} DROP COLUMN error",
		"ALTER TABLE {r} DROP COLUMN stop_requested_by",
		"ALTER TABLE {i} DROP COLUMN body_hash",
		"DROP INDEX "+s.prefix+"deliveries_dead ON {d}",
	)
	migrateToCurrent(t, s)
	for _, col := range []struct{ table, name string }{{"redrives", "error"}, {"redrives", "stop_requested_by"}, {"redrives", "reason"}, {"idempotency", "body_hash"}} {
		done, err := s.mysqlDone(ctx, s.db, "ALTER TABLE "+s.prefix+col.table+" ADD COLUMN "+col.name+" INT")
		require.NoError(t, err)
		assert.True(t, done, "%s.%s exists again", col.table, col.name)
	}
	done, err := s.mysqlDone(ctx, s.db, "CREATE INDEX "+s.prefix+"deliveries_dead ON "+s.prefix+"deliveries (id)")
	require.NoError(t, err)
	assert.True(t, done, "the index exists again")
}

// TestMigrateUpgradesAVersionTwoDatabase: a database migrated by the
// previous release (version 2, idempotency records without a body hash)
// is upgraded, and its records are still replayed.
func TestMigrateUpgradesAVersionTwoDatabase(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		// Back to version 2: every later step's record and effect undone.
		dropIndex := func(name, table string) string {
			if b.dialect == MySQL {
				return "DROP INDEX " + s.prefix + name + " ON " + table
			}
			return "DROP INDEX " + s.prefix + name
		}
		downgradeTo(t, s, 2, append([]string{"DELETE FROM {m} WHERE version >= 3", "ALTER TABLE {i} DROP COLUMN body_hash",
			"ALTER TABLE {d} DROP COLUMN window_start", dropIndex("attempts_finished", "{a}"),
			dropIndex("destinations_tenant", "{dst}"), "ALTER TABLE {dst} DROP COLUMN event_types",
			dropIndex("deliveries_uncompacted", "{d}"), "DROP TABLE {sum}",
			"ALTER TABLE {d} DROP COLUMN touched_at", "ALTER TABLE {d} DROP COLUMN history_compacted",
			"DROP TABLE {g}", "ALTER TABLE {dst} DROP COLUMN max_per_second"}, undoVersion10...)...)
		_, err := s.db.ExecContext(ctx, s.q("INSERT INTO {i} (idem_key, state, token, started_at, completed_at, status, header, body) VALUES (?, 'completed', 'tok', 0, 0, 201, '{}', ?)"), "whd_old", []byte("booked"))
		require.NoError(t, err)

		migrateToCurrent(t, s)
		r, err := s.IdempotencyStore().Begin(ctx, recipient.BeginParams{Key: "whd_old", Now: t0, BodyHash: make([]byte, 32)})
		require.NoError(t, err)
		assert.Equal(t, recipient.StateCompleted, r.State)
		assert.Equal(t, "booked", string(r.Response.Body))
		assert.Empty(t, r.BodyHash, "a record kept before has no hash")
	})
}

// TestMigrateUpgradesAVersionEightPostgresDatabase: a PostgreSQL database
// at version 8, with a delivered record and its attempt, is brought to
// the current version (9: the destination index partial, the attempts keyed
// on (delivery_id, seq), half-empty deliveries pages; 10: the delivering
// attempt kept in the row) with its history, an attempts row, intact.
func TestMigrateUpgradesAVersionEightPostgresDatabase(t *testing.T) {
	b := postgresBackend(t)
	ctx := context.Background()
	s := newStore(t, b, Options{})
	// Back to version 8, as its migrations left the tables.
	downgradeTo(t, s, 8, append([]string{"DELETE FROM {m} WHERE version >= 9",
		"ALTER TABLE {a} DROP CONSTRAINT " + s.prefix + "attempts_pkey", "ALTER TABLE {a} ADD PRIMARY KEY (seq)",
		"CREATE INDEX " + s.prefix + "attempts_delivery ON {a} (delivery_id, seq)",
		"DROP INDEX " + s.prefix + "deliveries_destination", "CREATE INDEX " + s.prefix + "deliveries_destination ON {d} (destination_id, state)",
		"ALTER TABLE {d} SET (fillfactor = 70)"}, undoVersion10...)...)
	d := newDelivery("evt_old", "dest_1", t0)
	_, err := s.Create(ctx, []hookrelay.Delivery{d})
	require.NoError(t, err)
	require.Len(t, claimAll(t, s, t0), 1)
	// Delivered as version 8 wrote it: the attempt as an attempts row.
	execAll(t, s, "UPDATE {d} SET state = 'delivered', last_outcome = 'accepted', lease_expires_at = NULL",
		"INSERT INTO {a} ("+insertAttemptCols+") VALUES ('"+d.ID+"', 1, 0, 0, 1, 'accepted', '', 204, '', NULL)")

	migrateToCurrent(t, s)
	var pkey, dest, opts string
	require.NoError(t, s.db.QueryRowContext(ctx, "SELECT indexdef FROM pg_indexes WHERE indexname = $1", s.prefix+"attempts_pkey").Scan(&pkey))
	assert.Contains(t, pkey, "(delivery_id, seq)")
	require.NoError(t, s.db.QueryRowContext(ctx, "SELECT indexdef FROM pg_indexes WHERE indexname = $1", s.prefix+"deliveries_destination").Scan(&dest))
	assert.Contains(t, dest, "WHERE (state <> 'delivered'::text)")
	var n int
	require.NoError(t, s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_indexes WHERE indexname = $1", s.prefix+"attempts_delivery").Scan(&n))
	assert.Zero(t, n, "the key replaces attempts_delivery")
	require.NoError(t, s.db.QueryRowContext(ctx, "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = $1", s.prefix+"deliveries").Scan(&opts))
	assert.Contains(t, opts, "fillfactor=50")

	got, err := s.Attempts(ctx, d.ID)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, 204, got[0].StatusCode)
	delivered, err := s.WasDelivered(ctx, d.ID)
	require.NoError(t, err)
	assert.True(t, delivered)
	// New attempts rows are still numbered after the old ones.
	d2 := newDelivery("evt_new", "dest_1", t0)
	_, err = s.Create(ctx, []hookrelay.Delivery{d2})
	require.NoError(t, err)
	cs := claimAll(t, s, t0)
	require.Len(t, cs, 1)
	a := hookrelay.Attempt{DeliveryID: d2.ID, Number: 1, StartedAt: t0, FinishedAt: t0, Kind: hookrelay.KindRetryable,
		Outcome: hookrelay.OutcomeRejected, Reason: hookrelay.ReasonServerError, StatusCode: 500, NextAttemptAt: t0.Add(time.Minute)}
	require.NoError(t, s.RecordRetry(ctx, hookrelay.RecordRetryParams{ID: d2.ID, Lease: cs[0].Lease, Attempt: a,
		NextAttempt: 2, NextAttemptAt: t0.Add(time.Minute), Now: t0}))
	seqs := queryColumn[int64](t, s, "SELECT seq FROM {a} ORDER BY seq")
	assert.Len(t, seqs, 2)
	assert.Less(t, seqs[0], seqs[1])
}

// undoVersion10 takes version 10's columns away again, and version 11's
// and 12's (their records are deleted by each test with the versions it undoes).
var undoVersion10 = []string{
	"ALTER TABLE {d} DROP COLUMN delivering_attempt", "ALTER TABLE {d} DROP COLUMN delivering_started_at",
	"ALTER TABLE {d} DROP COLUMN delivering_finished_at", "ALTER TABLE {d} DROP COLUMN delivering_status_code",
	"ALTER TABLE {d} DROP COLUMN delivering_detail", "ALTER TABLE {r} DROP COLUMN resumed_by",
	"ALTER TABLE {r} DROP COLUMN redrive_run",
}

// TestMigrateUpgradesAVersionNineDatabase: a database at version 9 with a
// record delivered the way version 9 wrote it (its attempt an attempts
// row) is brought to version 10 on every backend; the record's history
// reads the same before and after its compaction, and a record delivered
// after the upgrade keeps its attempt in its row and reads alike.
func TestMigrateUpgradesAVersionNineDatabase(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		downgradeTo(t, s, 9, append([]string{"DELETE FROM {m} WHERE version >= 10"}, undoVersion10...)...)
		old := newDelivery("evt_old", "dst_1", t0)
		_, err := s.Create(ctx, []hookrelay.Delivery{old})
		require.NoError(t, err)
		require.Len(t, claimAll(t, s, t0), 1)
		done := t0.Add(time.Second)
		execAll(t, s,
			"UPDATE {d} SET state = 'delivered', last_outcome = 'accepted', last_reason = '', updated_at = "+fmt.Sprint(done.UnixNano())+", lease_expires_at = NULL",
			"INSERT INTO {a} ("+insertAttemptCols+") VALUES ('"+old.ID+"', 1, "+fmt.Sprint(t0.UnixNano())+", "+
				fmt.Sprint(done.UnixNano())+", 1, 'accepted', '', 204, 'ok', NULL)")

		migrateToCurrent(t, s)
		d := newDelivery("evt_new", "dst_1", t0)
		_, err = s.Create(ctx, []hookrelay.Delivery{d})
		require.NoError(t, err)
		cs := claimAll(t, s, t0)
		require.Len(t, cs, 1)
		require.NoError(t, s.MarkDelivered(ctx, hookrelay.MarkDeliveredParams{ID: d.ID, Lease: cs[0].Lease, Now: done,
			Attempt: hookrelay.Attempt{DeliveryID: d.ID, Number: 1, StartedAt: t0, FinishedAt: done, Kind: hookrelay.KindDelivered,
				Outcome: hookrelay.OutcomeAccepted, StatusCode: 204, Detail: "ok"}}))
		assert.Len(t, queryColumn[string](t, s, "SELECT delivery_id FROM {a}"), 1, "the new attempt is kept in its row")

		for _, id := range []string{old.ID, d.ID} {
			as, err := s.Attempts(ctx, id)
			require.NoError(t, err)
			require.Len(t, as, 1, id)
			assert.Equal(t, 204, as[0].StatusCode, id)
			assert.Equal(t, "ok", as[0].Detail, id)
			assert.True(t, as[0].StartedAt.Equal(t0) && as[0].FinishedAt.Equal(done), "%s: %+v", id, as[0])
		}
		res, err := s.CleanHistory(ctx, hookrelay.CleanHistoryParams{Now: done.Add(48 * time.Hour), Limit: 10,
			Policy: hookrelay.RetentionPolicy{Delivered: 30 * 24 * time.Hour, AttemptDetails: 24 * time.Hour}})
		require.NoError(t, err)
		assert.Equal(t, []hookrelay.HistoryCount{{DestinationID: "dst_1", State: hookrelay.StateDelivered, Compacted: 2}}, res.Counts)
		for _, id := range []string{old.ID, d.ID} {
			as, err := s.Attempts(ctx, id)
			require.NoError(t, err)
			assert.Empty(t, as, "%s: compacted", id)
			sum, err := s.AttemptSummary(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, hookrelay.AttemptSummary{Count: 1, FirstStartedAt: t0, LastFinishedAt: done, LastStatusCode: 204,
				LastOutcome: hookrelay.OutcomeAccepted}, normalizeSummary(sum), id)
		}
	})
}

// normalizeSummary puts a summary's times in t0's location, so that
// summaries compare with ==.
func normalizeSummary(s hookrelay.AttemptSummary) hookrelay.AttemptSummary {
	s.FirstStartedAt, s.LastFinishedAt = s.FirstStartedAt.In(t0.Location()), s.LastFinishedAt.In(t0.Location())
	return s
}

// execAll runs each statement (tables named as in Store.q) on s.
func execAll(t *testing.T, s *Store, stmts ...string) {
	t.Helper()
	for _, st := range stmts {
		_, err := s.db.ExecContext(context.Background(), s.q(st))
		require.NoError(t, err, st)
	}
}

// downgradeTo runs stmts, which take s's schema back to version want, and
// checks that s reports that version.
func downgradeTo(t *testing.T, s *Store, want int, stmts ...string) {
	t.Helper()
	execAll(t, s, stmts...)
	v, err := s.Version(context.Background())
	require.NoError(t, err)
	require.Equal(t, want, v)
}

// migrateToCurrent migrates s and checks that it reports SchemaVersion.
func migrateToCurrent(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.Migrate(ctx))
	v, err := s.Version(ctx)
	require.NoError(t, err)
	assert.Equal(t, SchemaVersion, v)
}

// TestLongestTablePrefixKeepsEveryNameWhole migrates tables under the
// longest prefix Options accept for the dialect, twice: every table,
// index, constraint and sequence the migrations make carries its whole
// name (PostgreSQL cuts an identifier past 63 bytes short without an
// error, MariaDB refuses one past 64), the same after the prefix as
// under a short prefix.
func TestLongestTablePrefixKeepsEveryNameWhole(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		longest := 0
		for n := 1; n <= 128; n++ {
			if (Options{Dialect: b.dialect, TablePrefix: strings.Repeat("p", n)}).Validate() == nil {
				longest = n
			}
		}
		require.Positive(t, longest)
		short := newStore(t, b, Options{})
		long := newStore(t, b, Options{TablePrefix: (randomPrefix() + strings.Repeat("x", longest))[:longest-1] + "_"})
		require.NoError(t, long.Migrate(context.Background()), "a second Migrate finds what the first made")
		want := schemaNames(t, short)
		require.NotEmpty(t, want)
		assert.Equal(t, want, schemaNames(t, long), "prefix of %d bytes", longest)
	})
}

// schemaNames lists the names of what s's migrations made in the database
// (tables, indexes, constraints, sequences, each qualified by its table
// where its name is the table's own), with s's prefix taken off.
func schemaNames(t *testing.T, s *Store) []string {
	t.Helper()
	var query string
	switch s.dialect {
	case SQLite:
		query = "SELECT type || ' ' || name FROM sqlite_master WHERE substr(tbl_name, 1, length(?1)) = ?1 ORDER BY 1"
	case Postgres:
		query = "SELECT 'relation ' || relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND starts_with(relname, $1)" +
			" UNION ALL SELECT 'constraint ' || conname FROM pg_constraint WHERE connamespace = current_schema()::regnamespace" +
			" AND starts_with(conname, $1) ORDER BY 1"
	case MySQL:
		query = "SELECT CONCAT('table ', table_name) FROM information_schema.tables WHERE table_schema = DATABASE() AND LEFT(table_name, CHAR_LENGTH(?)) = ?" +
			" UNION ALL SELECT DISTINCT CONCAT('index ', table_name, '.', index_name) FROM information_schema.statistics" +
			" WHERE table_schema = DATABASE() AND LEFT(table_name, CHAR_LENGTH(?)) = ? ORDER BY 1"
	}
	args := []any{s.prefix}
	if s.dialect == MySQL {
		args = []any{s.prefix, s.prefix, s.prefix, s.prefix}
	}
	rows, err := s.db.QueryContext(context.Background(), query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		names = append(names, strings.ReplaceAll(name, s.prefix, "{p}"))
	}
	require.NoError(t, rows.Err())
	return names
}

// TestMigrateWidensMySQLColumnsOfAVersionTenDatabase: on MariaDB/MySQL a
// version 10 database holds a destination's headers, secrets and URL and a
// redrive's tenants in BLOB columns (64 KiB). A destination stored then
// keeps reading the same after the upgrade, and one over 64 KiB, refused
// before, is stored after.
func TestMigrateWidensMySQLColumnsOfAVersionTenDatabase(t *testing.T) {
	b := backends[len(backends)-1]
	require.Equal(t, MySQL, b.dialect)
	b.skipUnlessConfigured(t)
	ctx := context.Background()
	s := newStore(t, b, Options{})
	downgradeTo(t, s, 10, "DELETE FROM {m} WHERE version >= 11",
		"ALTER TABLE {dst} MODIFY url BLOB NOT NULL", "ALTER TABLE {dst} MODIFY secrets BLOB NOT NULL",
		"ALTER TABLE {dst} MODIFY headers BLOB NOT NULL", "ALTER TABLE {dst} MODIFY policy BLOB NOT NULL",
		"ALTER TABLE {dst} MODIFY event_types BLOB NOT NULL", "ALTER TABLE {r} MODIFY tenants BLOB NOT NULL",
		"ALTER TABLE {i} MODIFY header BLOB NOT NULL", "ALTER TABLE {r} DROP COLUMN redrive_run")
	small := hookrelay.Destination{ID: "dst_small", URL: "https://hooks.example/in", Secrets: []string{"whsec_a"}, Headers: map[string]string{"X-A": "b"}}
	require.NoError(t, s.Put(ctx, small))
	large := hookrelay.Destination{ID: "dst_large", URL: "https://hooks.example/in", Headers: map[string]string{"X-Big": strings.Repeat("h", 70<<10)}}
	require.Error(t, s.Put(ctx, large), "version 10's BLOB column refuses 70 KiB of headers")

	migrateToCurrent(t, s)
	got, err := s.Destination(ctx, small.ID)
	require.NoError(t, err)
	assert.Equal(t, small.URL, got.URL)
	assert.Equal(t, small.Secrets, got.Secrets)
	assert.Equal(t, small.Headers, got.Headers)
	require.NoError(t, s.Put(ctx, large))
	got, err = s.Destination(ctx, large.ID)
	require.NoError(t, err)
	assert.Equal(t, large.Headers, got.Headers)
}

// TestConcurrentMigrationsAgreeUnderRepeatableRead: on a PostgreSQL
// database whose default isolation is REPEATABLE READ or SERIALIZABLE
// (default_transaction_isolation, set per database, role or DSN), several
// processes migrating fresh tables at once still each succeed, and every
// step is applied and recorded once.
func TestConcurrentMigrationsAgreeUnderRepeatableRead(t *testing.T) {
	b := postgresBackend(t)
	for _, level := range []string{"repeatable%20read", "serializable"} {
		t.Run(level, func(t *testing.T) {
			ctx := context.Background()
			db, err := openDB(Postgres, os.Getenv(b.envVar)+"&default_transaction_isolation="+level, 0)
			require.NoError(t, err)
			defer db.Close()
			prefix := randomPrefix()
			fresh, err := New(db, Options{Dialect: Postgres, TablePrefix: prefix})
			require.NoError(t, err)
			defer dropTables(t, fresh)
			errs := make(chan error, 4)
			start := make(chan struct{})
			for range 4 {
				go func() {
					st, err := New(db, Options{Dialect: Postgres, TablePrefix: prefix})
					if err == nil {
						<-start
						err = st.Migrate(ctx)
					}
					errs <- err
				}()
			}
			close(start)
			for range 4 {
				assert.NoError(t, <-errs)
			}
			v, err := fresh.Version(ctx)
			require.NoError(t, err)
			assert.Equal(t, SchemaVersion, v)
			ms, err := fresh.migrations()
			require.NoError(t, err)
			assert.Len(t, queryColumn[int64](t, fresh, "SELECT version FROM {m}"), len(ms), "each migration recorded once")
		})
	}
}

// A MySQL Migrate started while another process migrates waits for it
// however long it takes, as on PostgreSQL, until its context ends: it gave
// up after GET_LOCK's 60 s with an error, and a migration creating an
// index on a large deliveries table can take longer.
func TestMySQLMigrateWaitsForAnotherMigrationPastOneLockWait(t *testing.T) {
	b := backends[2]
	require.Equal(t, MySQL, b.dialect)
	b.skipUnlessConfigured(t)
	wait := mysqlLockWait
	mysqlLockWait = 1
	t.Cleanup(func() { mysqlLockWait = wait })
	s := newStore(t, b, Options{})
	ctx := context.Background()
	holder, err := s.DB().Conn(ctx)
	require.NoError(t, err)
	defer holder.Close()
	var got int
	require.NoError(t, holder.QueryRowContext(ctx, "SELECT GET_LOCK(?, 1)", "hookrelay_migrate_"+s.TablePrefix()).Scan(&got))
	require.Equal(t, 1, got)
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(2500 * time.Millisecond) // more than two of the migration's waits
		_, _ = holder.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", "hookrelay_migrate_"+s.TablePrefix())
	}()
	err = s.Migrate(ctx)
	<-released
	require.NoError(t, err, "Migrate waits for the other migration's lock")

	// And gives up when its context ends, saying why.
	require.NoError(t, holder.QueryRowContext(ctx, "SELECT GET_LOCK(?, 1)", "hookrelay_migrate_"+s.TablePrefix()).Scan(&got))
	require.Equal(t, 1, got)
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	err = s.Migrate(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "held by another migration")
	_, _ = holder.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", "hookrelay_migrate_"+s.TablePrefix())
}
