package hooksql

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/hookrelay/hookrelay"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenSQLiteRefusalDoesNotPrintADSNPassword: a server DSN given to
// OpenSQLite by mistake is refused (it has a '?'), and the refusal does
// not print its password.
func TestOpenSQLiteRefusalDoesNotPrintADSNPassword(t *testing.T) {
	for _, dsn := range []string{
		"postgres://hookrelay:s3cret-pw@127.0.0.1:1/test?sslmode=disable",
		"hookrelay:s3cret-pw@tcp(127.0.0.1:1)/test?parseTime=true",
		"host=127.0.0.1 password=s3cret-pw sslmode=disable#",
		// Percent-encoded as the URL spells it, in a form neither
		// url.QueryEscape nor url.PathEscape of the decoded password
		// gives back.
		"postgres://hookrelay:s3cret-pw%40x%20y@127.0.0.1:1/test?sslmode=disable",
		"postgres://hookrelay:s3cret-pw%2fx@127.0.0.1:1/test?sslmode=disable",
	} {
		_, err := OpenSQLite(context.Background(), dsn, Options{})
		require.Error(t, err, dsn)
		assert.NotContains(t, err.Error(), "s3cret-pw")
		assert.Contains(t, err.Error(), "OpenSQLite")
	}
}

// TestOpenPostgresAcceptsAnUpperCaseURLScheme: URL schemes are
// case-insensitive, so POSTGRES://… and PostgreSQL://… reach the server
// they name (pgx alone reads them as keyword=value text and connects to
// its default server, sending the whole URL, password included, as a
// parameter name).
func TestOpenPostgresAcceptsAnUpperCaseURLScheme(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, scheme := range []string{"POSTGRES", "PostgreSQL"} {
		_, err := Open(ctx, Postgres, scheme+"://hookrelay:s3cret-pw@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", Options{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "dial tcp 127.0.0.1:1", "dialled the host the URL names")
		assert.NotContains(t, err.Error(), "s3cret-pw")
	}
	dsn := os.Getenv("HOOKRELAY_TEST_POSTGRES_DSN")
	if !strings.HasPrefix(dsn, "postgres://") {
		t.Skip("set HOOKRELAY_TEST_POSTGRES_DSN to a postgres:// URL to open one with an upper-case scheme")
	}
	s, err := Open(ctx, Postgres, "POSTGRES"+strings.TrimPrefix(dsn, "postgres"), Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// TestErrorsDoNotLeakAnEscapedKeywordPassword: in keyword=value form a
// password may hold backslash-escaped quotes and spaces; no part of it
// appears in an error.
func TestErrorsDoNotLeakAnEscapedKeywordPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, dsn := range []string{
		`host=127.0.0.1 port=1 user=x password='s3cret\' tail-pw' sslmode=bogus`,
		`host=127.0.0.1 port=1 user=x password=s3cret\ tail-pw sslmode=bogus`,
		`host=127.0.0.1 port=1 user=x password='s3cret\' tail-pw' connect_timeout=2`,
	} {
		_, err := Open(ctx, Postgres, dsn, Options{})
		require.Error(t, err, dsn)
		assert.NotContains(t, err.Error(), "s3cret", dsn)
		assert.NotContains(t, err.Error(), "tail-pw", dsn)
	}
	_, err := OpenSQLite(ctx, `host=127.0.0.1 password='s3cret\' tail-pw' sslmode=disable#`, Options{})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
	assert.NotContains(t, err.Error(), "tail-pw")
}

// TestSQLiteInMemoryDatabaseIsRefused: an in-memory SQLite database
// belongs to one connection (or, shared, lives only while one is open),
// so a pooled Store would see tables vanish and lose what it stored. It is
// refused at open, saying so.
func TestSQLiteInMemoryDatabaseIsRefused(t *testing.T) {
	ctx := context.Background()
	_, err := OpenSQLite(ctx, ":memory:", Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "in-memory")
	for _, dsn := range []string{":memory:", "file::memory:", "file::memory:?cache=shared", "file:hr?mode=memory&cache=shared", "", "file:"} {
		_, err := Open(ctx, SQLite, dsn, Options{})
		require.Error(t, err, "%q", dsn)
		assert.Contains(t, err.Error(), "in-memory", "%q", dsn)
		assert.ErrorIs(t, err, ErrInvalidDSN, "%q: the DSN, not a database, is at fault", dsn)
	}
	_, err = OpenSQLite(ctx, filepath.Join(t.TempDir(), "hr.db?mode=memory"), Options{})
	assert.ErrorIs(t, err, ErrInvalidDSN, "a SQLite path with a query")
}

// TestOptionsOutOfRangeAreInvalidOptions: a caller (the CLI among them)
// tells a bad option from a database that does not answer by
// ErrInvalidOptions, the same from Validate, New, Open and OpenSQLite,
// before anything is opened.
func TestOptionsOutOfRangeAreInvalidOptions(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "new.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	for _, tc := range []struct {
		field string
		opts  Options
	}{
		{"TablePrefix", Options{TablePrefix: "Bad-Prefix"}},
		{"TablePrefix", Options{TablePrefix: strings.Repeat("p", 41)}},
		{"MaxPayloadBytes", Options{MaxPayloadBytes: -1}},
		{"MaxOpenConns", Options{MaxOpenConns: -1}},
		{"ConnMaxLifetime", Options{ConnMaxLifetime: -time.Second}},
		{"Dialect", Options{Dialect: "oracle"}},
	} {
		err := tc.opts.Validate()
		assert.ErrorIs(t, err, ErrInvalidOptions, "Validate %+v", tc.opts)
		assert.ErrorContains(t, err, "Options."+tc.field)
		withDialect := tc.opts
		if withDialect.Dialect == "" {
			withDialect.Dialect = SQLite
		}
		_, err = New(db, withDialect)
		assert.ErrorIs(t, err, ErrInvalidOptions, "New %+v", tc.opts)
		if tc.field == "Dialect" {
			continue // Open and OpenSQLite set it
		}
		path := filepath.Join(t.TempDir(), "hr.db")
		_, err = OpenSQLite(ctx, path, tc.opts)
		assert.ErrorIs(t, err, ErrInvalidOptions, "OpenSQLite %+v", tc.opts)
		_, err = os.Stat(path)
		assert.ErrorIs(t, err, fs.ErrNotExist, "OpenSQLite %+v created no file", tc.opts)
		_, err = Open(ctx, Postgres, "postgres://u@127.0.0.1:1/x", tc.opts)
		assert.ErrorIs(t, err, ErrInvalidOptions, "Open %+v", tc.opts)
	}
	_, err = New(db, Options{})
	assert.ErrorIs(t, err, ErrInvalidOptions, "New without a Dialect")
	assert.NoError(t, Options{}.Validate(), "the zero Options are the defaults")
}

// TestOpenSQLiteOpensTheFileItIsGiven: a '%' in the path, or a path
// starting with "//", names the file as written (SQLite's file: URIs
// decode %XX and read "//" as an authority).
func TestOpenSQLiteOpensTheFileItIsGiven(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, name := range []string{"pay%41ments.db", "with space.db", "100%.db"} {
		s, err := OpenSQLite(ctx, filepath.Join(dir, name), Options{})
		require.NoError(t, err, name)
		require.NoError(t, s.Migrate(ctx))
		require.NoError(t, s.Close())
		_, err = os.Stat(filepath.Join(dir, name))
		assert.NoError(t, err, "the file named %q exists", name)
	}
	_, err := os.Stat(filepath.Join(dir, "payAments.db"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no file under a decoded name")

	s, err := OpenSQLite(ctx, "/"+filepath.Join(dir, "slashes.db"), Options{})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Close())
	_, err = os.Stat(filepath.Join(dir, "slashes.db"))
	assert.NoError(t, err)
}

// TestNewRefusesADialectOtherThanTheDriversOwn: a pool of a driver the
// Store knows, given with another dialect, is refused at New naming
// Options.Dialect, instead of failing later with a syntax error.
func TestNewRefusesADialectOtherThanTheDriversOwn(t *testing.T) {
	db := serverlessDB(t)
	for _, d := range []Dialect{Postgres, MySQL} {
		_, err := New(db, Options{Dialect: d})
		require.Error(t, err, d)
		assert.Contains(t, err.Error(), "Options.Dialect")
		assert.Contains(t, err.Error(), string(d))
	}
	pg, err := sql.Open("pgx", "postgres://127.0.0.1:1/test")
	require.NoError(t, err)
	defer pg.Close()
	_, err = New(pg, Options{Dialect: SQLite})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Options.Dialect")
	_, err = New(pg, Options{Dialect: Postgres})
	assert.NoError(t, err)
}

// TestOpenMySQLWithAURLSaysWhichFormItWants: go-sql-driver/mysql takes
// user:password@tcp(host:port)/dbname; a mysql:// URL is refused saying
// so, without its password.
func TestOpenMySQLWithAURLSaysWhichFormItWants(t *testing.T) {
	for _, dsn := range []string{"mysql://hookrelay:s3cret-pw@127.0.0.1:1/test", "MariaDB://hookrelay:s3cret-pw@127.0.0.1/test?parseTime=true"} {
		_, err := Open(context.Background(), MySQL, dsn, Options{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "user:password@tcp(host:port)/dbname")
		assert.NotContains(t, err.Error(), "s3cret-pw")
	}
}

// TestOptionErrorsAreBounded: an over-long option is named and quoted in
// part, so its refusal is not as long as the input.
func TestOptionErrorsAreBounded(t *testing.T) {
	huge := strings.Repeat("A", 1<<20)
	_, err := New(serverlessDB(t), Options{Dialect: SQLite, TablePrefix: huge})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Options.TablePrefix")
	assert.Less(t, len(err.Error()), 500)
	_, err = New(serverlessDB(t), Options{Dialect: Dialect(huge)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Options.Dialect")
	assert.Less(t, len(err.Error()), 500)
	_, err = Open(context.Background(), Dialect(huge), "x", Options{})
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 500)
	_, err = OpenSQLite(context.Background(), huge+"?", Options{})
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 500)
}

// TestAPoolOfOneConnectionStoresDeliveries: Options.MaxOpenConns 1 is
// accepted, so a Store on one connection must not wait for a second one
// while its transaction holds the first (on MariaDB/MySQL, Create looked
// up the server's version on the pool inside its transaction and waited
// forever).
func TestAPoolOfOneConnectionStoresDeliveries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		opts := Options{MaxOpenConns: 1, TablePrefix: randomPrefix()}
		var s *Store
		var err error
		if b.dialect == SQLite {
			s, err = OpenSQLite(ctx, filepath.Join(t.TempDir(), "one.db"), opts)
		} else {
			s, err = Open(ctx, b.dialect, os.Getenv(b.envVar), opts)
		}
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.Migrate(ctx))
		defer dropTables(t, s)

		_, err = s.Create(ctx, []hookrelay.Delivery{newDelivery("evt_1", "dst_1", t0)})
		require.NoError(t, err, "Create on a pool of one")
		tx, err := s.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = s.EnqueueTx(ctx, tx, []hookrelay.Delivery{newDelivery("evt_2", "dst_1", t0)})
		require.NoError(t, err, "EnqueueTx in the pool's only connection")
		require.NoError(t, tx.Commit())
		assert.Len(t, claimAll(t, s, t0), 2)
	})
}

// TestOpenSQLiteInAMissingDirectorySaysSo: SQLite creates the file but not
// its directory; the refusal names the directory rather than SQLite's
// "unable to open database file".
func TestOpenSQLiteInAMissingDirectorySaysSo(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	_, err := OpenSQLite(context.Background(), filepath.Join(missing, "hookrelay.db"), Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), missing)
	assert.Contains(t, err.Error(), "does not exist")
	assert.ErrorIs(t, err, os.ErrNotExist)

	_, err = OpenSQLite(context.Background(), "postgres://hookrelay:s3cret-pw@127.0.0.1/test", Options{})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret-pw")
}

// TestOpenTellsAMalformedDSNFromADownServer: a DSN the driver cannot read
// is ErrInvalidDSN (nothing dialed); a well-formed one nobody answers is
// not, so a caller can tell bad input from an outage.
func TestOpenTellsAMalformedDSNFromADownServer(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		dialect Dialect
		dsn     string
	}{
		{Postgres, "postgres://%zz"},
		{Postgres, "postgres://u:s3cret-pw@127.0.0.1:99999/x"},
		{Postgres, "host=127.0.0.1 port=abc"},
		{MySQL, "u@tcp(127.0.0.1:1/db"},
		{MySQL, "u:s3cret-pw@tcp(127.0.0.1:1)/db?parseTime=maybe"},
		{MySQL, "mysql://u@127.0.0.1:1/db"},
		// Writes outside the store's own transactions would never commit.
		{MySQL, "u:s3cret-pw@tcp(127.0.0.1:1)/db?autocommit=0"},
		{MySQL, "u:s3cret-pw@tcp(127.0.0.1:1)/db?parseTime=true&autocommit=false"},
		{MySQL, "u:s3cret-pw@tcp(127.0.0.1:1)/db?autocommit=%27OFF%27"},
	} {
		_, err := Open(ctx, c.dialect, c.dsn, Options{})
		require.Error(t, err, c.dsn)
		assert.ErrorIs(t, err, ErrInvalidDSN, c.dsn)
		assert.NotContains(t, err.Error(), "s3cret-pw")
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, c := range []struct {
		dialect Dialect
		dsn     string
	}{
		{Postgres, "postgres://u@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"},
		{MySQL, "u@tcp(127.0.0.1:1)/db?timeout=2s"},
	} {
		_, err := Open(tctx, c.dialect, c.dsn, Options{})
		require.Error(t, err, c.dsn)
		assert.NotErrorIs(t, err, ErrInvalidDSN, c.dsn)
	}
}

// TestAConflictIsToldApartFromOtherDatabaseErrors: a caller running
// EnqueueTx in its own transaction learns from ErrTxConflict that running
// the transaction again may succeed (a deadlock, a serialization failure),
// and from its absence that it will not.
func TestAConflictIsToldApartFromOtherDatabaseErrors(t *testing.T) {
	s := &Store{}
	for _, tc := range []struct {
		err      error
		conflict bool
		// rerun: the Store runs its own transaction again (retried). A
		// lock wait timeout is not: the server already waited
		// innodb_lock_wait_timeout, and four more waits would only
		// multiply it.
		rerun bool
	}{
		{&mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}, true, true},
		{&mysql.MySQLError{Number: 1020, Message: "Record has changed since last read in table 't'"}, true, true},
		{&mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded; try restarting transaction"}, true, false},
		{&pgconn.PgError{Code: "40P01", Message: "deadlock detected"}, true, true},
		{&pgconn.PgError{Code: "40001", Message: "could not serialize access"}, true, true},
		{&pgconn.PgError{Code: "55P03", Message: "canceling statement due to lock timeout"}, true, false},
		{&mysql.MySQLError{Number: 1064, Message: "syntax error"}, false, false},
		{&pgconn.PgError{Code: "23505", Message: "duplicate key"}, false, false},
	} {
		err := s.dbErr("enqueue_tx", tc.err)
		assert.ErrorIs(t, err, ErrDatabase, "%v", tc.err)
		assert.Equal(t, tc.conflict, errors.Is(err, ErrTxConflict), "%v", tc.err)
		tries := 0
		_ = retried(func() error { tries++; return err })
		if tc.rerun {
			assert.Equal(t, maxTxTries, tries, "%v: run again", tc.err)
		} else {
			assert.Equal(t, 1, tries, "%v: not run again", tc.err)
		}
	}
}
