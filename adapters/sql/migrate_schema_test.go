package hooksql

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// TestMigrateFromEveryVersionMatchesAFreshInstall: a database left at any
// older version (its steps up to that version applied, as that release's
// Migrate left it) and then migrated has the schema a fresh install has:
// the same tables, columns (types, nullability, defaults, order),
// indexes, constraints and table options. Records written at the old
// version (the columns it had, the later ones left to their defaults)
// read after the upgrade as the same records written fresh.
func TestMigrateFromEveryVersionMatchesAFreshInstall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		fresh := newStore(t, b, Options{})
		want := schemaOf(t, fresh)
		require.NotEmpty(t, want)
		// A destination, a pending delivery with one failed attempt and a
		// redrive audit, written by this version.
		dst := hookrelay.Destination{ID: "dst_1", TenantID: "tenant_1", URL: "https://hooks.example/in", Secrets: []string{"whsec_a"},
			Headers: map[string]string{"X-A": "b"}, MaxConcurrency: 3}
		require.NoError(t, fresh.Put(ctx, dst))
		d := newDelivery("evt_old", dst.ID, t0)
		_, err := fresh.Create(ctx, []hookrelay.Delivery{d})
		require.NoError(t, err)
		cs := claimAll(t, fresh, t0)
		require.Len(t, cs, 1)
		next := t0.Add(time.Minute)
		require.NoError(t, fresh.RecordRetry(ctx, hookrelay.RecordRetryParams{ID: d.ID, Lease: cs[0].Lease, NextAttempt: 2, NextAttemptAt: next, Now: t0,
			Attempt: hookrelay.Attempt{DeliveryID: d.ID, Number: 1, StartedAt: t0, FinishedAt: t0, Kind: hookrelay.KindRetryable,
				Outcome: hookrelay.OutcomeRejected, Reason: hookrelay.ReasonServerError, StatusCode: 500, NextAttemptAt: next}}))
		require.NoError(t, fresh.CreateRedriveAudit(ctx, hookrelay.RedriveAudit{ID: "rdr_1", Actor: "ops", Tenants: []string{"tenant_1"}, State: hookrelay.RedriveRunning, CreatedAt: t0, UpdatedAt: t0}))
		wantDst, err := fresh.Destination(ctx, dst.ID)
		require.NoError(t, err)
		wantD, err := fresh.Get(ctx, d.ID)
		require.NoError(t, err)
		wantAs, err := fresh.Attempts(ctx, d.ID)
		require.NoError(t, err)
		wantAudit, err := fresh.RedriveAudit(ctx, "rdr_1")
		require.NoError(t, err)
		ms, err := fresh.migrations()
		require.NoError(t, err)
		for i, m := range ms[:len(ms)-1] {
			t.Run(fmt.Sprint("from_", m.version), func(t *testing.T) {
				s := newUnmigratedStore(t, b)
				steps, err := s.migrations() // bound to s's prefix
				require.NoError(t, err)
				applySteps(t, s, steps[:i+1])
				v, err := s.Version(ctx)
				require.NoError(t, err)
				require.Equal(t, m.version, v)
				for _, table := range []string{"{dst}", "{d}", "{a}", "{r}"} {
					copyRows(t, fresh, s, table)
				}
				migrateToCurrent(t, s)
				assert.Equal(t, want, schemaOf(t, s))

				gotDst, err := s.Destination(ctx, dst.ID)
				require.NoError(t, err)
				assert.Equal(t, wantDst, gotDst)
				gotD, err := s.Get(ctx, d.ID)
				require.NoError(t, err)
				assert.Equal(t, wantD, gotD)
				gotAs, err := s.Attempts(ctx, d.ID)
				require.NoError(t, err)
				assert.Equal(t, wantAs, gotAs)
				if m.version >= 2 { // before, redrives kept no audit (tenants, snapshot)
					gotAudit, err := s.RedriveAudit(ctx, "rdr_1")
					require.NoError(t, err)
					assert.Equal(t, wantAudit, gotAudit)
				}
			})
		}
	})
}

// newUnmigratedStore returns a Store on fresh tables, as newStore does, but
// not migrated.
func newUnmigratedStore(t *testing.T, b backend) *Store {
	t.Helper()
	opts := Options{TablePrefix: randomPrefix()}
	if b.dialect == SQLite {
		s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "hookrelay.db"), opts)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	opts.Dialect = b.dialect
	s, err := New(serverDB(t, b), opts)
	require.NoError(t, err)
	t.Cleanup(func() { dropTables(t, s) })
	return s
}

// applySteps applies ms, as Migrate applies its steps.
func applySteps(t *testing.T, s *Store, ms []migration) {
	t.Helper()
	ctx := context.Background()
	if s.dialect == MySQL {
		conn, err := s.db.Conn(ctx)
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, s.applyMigrations(ctx, conn, ms))
		return
	}
	require.NoError(t, s.inTx(ctx, "migrate", func(q querier) error { return s.applyMigrations(ctx, q, ms) }))
}

// copyRows copies table's rows from one Store to another at an older
// version: the columns the older one has (but an identity or rowid seq,
// which it numbers itself), as the older version would have written them.
func copyRows(t *testing.T, from, to *Store, table string) {
	t.Helper()
	ctx := context.Background()
	rows, err := to.db.QueryContext(ctx, to.q("SELECT * FROM "+table+" WHERE 1 = 0"))
	require.NoError(t, err)
	all, err := rows.Columns()
	require.NoError(t, err)
	require.NoError(t, rows.Close())
	var cols []string
	for _, c := range all {
		if c != "seq" {
			cols = append(cols, c)
		}
	}
	list := strings.Join(cols, ", ")
	rows, err = from.db.QueryContext(ctx, from.q("SELECT "+list+" FROM "+table))
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		_, err := to.db.ExecContext(ctx, to.q("INSERT INTO "+table+" ("+list+") VALUES ("+placeholders(len(cols))+")"), vals...)
		require.NoError(t, err, table)
		n++
	}
	require.NoError(t, rows.Err())
	require.Positive(t, n, table)
}

// schemaOf describes s's tables, one line per column, index, constraint and
// table option, with the table prefix written as {p}.
func schemaOf(t *testing.T, s *Store) []string {
	t.Helper()
	var query string
	switch s.dialect {
	case SQLite:
		query = `SELECT 'object ' || m.type || ' ' || m.name || ': ' || COALESCE(m.sql, '') FROM sqlite_master m
			WHERE substr(m.tbl_name, 1, length(?1)) = ?1
			UNION ALL SELECT 'column ' || m.name || '.' || c.name || ' ' || c.type || ' notnull=' || c."notnull" || ' default=' || COALESCE(c.dflt_value, 'NULL') || ' pk=' || c.pk
			FROM sqlite_master m, pragma_table_info(m.name) c WHERE m.type = 'table' AND substr(m.name, 1, length(?1)) = ?1`
	case Postgres:
		query = `SELECT 'column ' || c.table_name || '.' || c.column_name || ' #' || c.ordinal_position || ' ' || c.data_type ||
				' null=' || c.is_nullable || ' default=' || COALESCE(c.column_default, 'NULL') || ' identity=' || c.is_identity || ' ' || COALESCE(c.identity_generation, '')
			FROM information_schema.columns c WHERE c.table_schema = current_schema() AND starts_with(c.table_name, $1)
			UNION ALL SELECT 'index ' || i.tablename || '.' || i.indexname || ': ' || i.indexdef
			FROM pg_indexes i WHERE i.schemaname = current_schema() AND starts_with(i.tablename, $1)
			UNION ALL SELECT 'constraint ' || r.relname || '.' || k.conname || ': ' || pg_get_constraintdef(k.oid)
			FROM pg_constraint k JOIN pg_class r ON r.oid = k.conrelid
			WHERE r.relnamespace = current_schema()::regnamespace AND starts_with(r.relname, $1)
			UNION ALL SELECT 'options ' || r.relname || ': ' || COALESCE(array_to_string(r.reloptions, ','), '')
			FROM pg_class r WHERE r.relnamespace = current_schema()::regnamespace AND r.relkind IN ('r', 'i') AND starts_with(r.relname, $1)`
	case MySQL:
		query = `SELECT CONCAT('column ', c.table_name, '.', c.column_name, ' #', c.ordinal_position, ' ', c.column_type,
				' null=', c.is_nullable, ' default=', COALESCE(c.column_default, 'NULL'), ' key=', c.column_key, ' extra=', c.extra)
			FROM information_schema.columns c WHERE c.table_schema = DATABASE() AND LEFT(c.table_name, CHAR_LENGTH(?)) = ?
			UNION ALL SELECT CONCAT('index ', x.table_name, '.', x.index_name, ' #', x.seq_in_index, ' ', x.column_name, ' unique=', 1 - x.non_unique, ' ', x.index_type)
			FROM information_schema.statistics x WHERE x.table_schema = DATABASE() AND LEFT(x.table_name, CHAR_LENGTH(?)) = ?
			UNION ALL SELECT CONCAT('table ', t.table_name, ' ', t.engine, ' ', t.table_collation, ' ', t.create_options)
			FROM information_schema.tables t WHERE t.table_schema = DATABASE() AND LEFT(t.table_name, CHAR_LENGTH(?)) = ?`
	}
	args := []any{s.prefix}
	if s.dialect == MySQL {
		args = []any{s.prefix, s.prefix, s.prefix, s.prefix, s.prefix, s.prefix}
	}
	rows, err := s.db.QueryContext(context.Background(), query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		out = append(out, strings.ReplaceAll(line, s.prefix, "{p}"))
	}
	require.NoError(t, rows.Err())
	sort.Strings(out)
	return out
}

// TestMigrateCompletesAMySQLStepInterruptedAnywhere: MariaDB and MySQL
// commit each DDL statement at once, so a Migrate killed inside a step
// leaves the statements before that point applied and the step
// unrecorded. Wherever it stopped, the next Migrate completes the step and
// leaves a fresh install's schema. (Step 1, CREATE TABLE IF NOT EXISTS
// only, is left out: about 20 s of DDL on MariaDB for the other steps.)
func TestMigrateCompletesAMySQLStepInterruptedAnywhere(t *testing.T) {
	b := backends[len(backends)-1]
	require.Equal(t, MySQL, b.dialect)
	b.skipUnlessConfigured(t)
	ctx := context.Background()
	want := schemaOf(t, newStore(t, b, Options{}))
	probe := &Store{dialect: MySQL, prefix: "p_"}
	ms, err := probe.migrations()
	require.NoError(t, err)
	for k, m := range ms[1:] {
		k++
		for j := 1; j < len(m.stmts); j++ {
			t.Run(fmt.Sprintf("%s_after_%d_of_%d", m.name, j, len(m.stmts)), func(t *testing.T) {
				s := newUnmigratedStore(t, b)
				steps, err := s.migrations()
				require.NoError(t, err)
				applySteps(t, s, steps[:k])
				for _, st := range steps[k].stmts[:j] {
					_, err := s.db.ExecContext(ctx, st)
					require.NoError(t, err, st)
				}
				migrateToCurrent(t, s)
				assert.Equal(t, want, schemaOf(t, s))
			})
		}
	}
}
