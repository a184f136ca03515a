package hooksql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(runWorkerProcess())
	}
	code := m.Run()
	closeServerDBs()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// backend is one database the tests run against.
type backend struct {
	dialect Dialect
	envVar  string // DSN variable; empty for SQLite, which always runs
}

var backends = []backend{
	{dialect: SQLite},
	{dialect: Postgres, envVar: "HOOKRELAY_TEST_POSTGRES_DSN"},
	{dialect: MySQL, envVar: "HOOKRELAY_TEST_MYSQL_DSN"},
}

// forEachBackend runs f as a subtest per backend; a server backend whose
// DSN variable is unset is skipped with a message naming it.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(string(b.dialect), func(t *testing.T) {
			b.skipUnlessConfigured(t)
			f(t, b)
		})
	}
}

func (b backend) skipUnlessConfigured(t testing.TB) {
	t.Helper()
	if b.envVar != "" && os.Getenv(b.envVar) == "" {
		t.Skipf("%s is not set; set it to run the %s tests (see adapters/sql/README.md)", b.envVar, b.dialect)
	}
}

// postgresBackend is the PostgreSQL backend, for a test of what only
// PostgreSQL does (its plans, its driver); the test is skipped unless the
// backend is configured.
func postgresBackend(t testing.TB) backend {
	t.Helper()
	b := backends[1]
	require.Equal(t, Postgres, b.dialect)
	b.skipUnlessConfigured(t)
	return b
}

var (
	serverDBsMu sync.Mutex
	serverDBs   = map[Dialect]*sql.DB{}
)

// serverDB returns the test binary's shared pool for a server backend.
func serverDB(t testing.TB, b backend) *sql.DB {
	t.Helper()
	serverDBsMu.Lock()
	defer serverDBsMu.Unlock()
	if db, ok := serverDBs[b.dialect]; ok {
		return db
	}
	db, err := openDB(b.dialect, os.Getenv(b.envVar), 0) // the driver settings Open uses
	if err != nil {
		t.Fatalf("open %s: %v", b.dialect, err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	serverDBs[b.dialect] = db
	return db
}

func closeServerDBs() {
	serverDBsMu.Lock()
	defer serverDBsMu.Unlock()
	for d, db := range serverDBs {
		_ = db.Close()
		delete(serverDBs, d)
	}
}

func randomPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:]) + "_"
}

// newStore returns a migrated Store on fresh tables (a new SQLite file, or
// a new table prefix on a server), dropped when the test ends.
func newStore(t testing.TB, b backend, opts Options) *Store {
	t.Helper()
	ctx := context.Background()
	if opts.TablePrefix == "" {
		opts.TablePrefix = randomPrefix()
	}
	var s *Store
	if b.dialect == SQLite {
		var err error
		s, err = OpenSQLite(ctx, filepath.Join(t.TempDir(), "hookrelay.db"), opts)
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
	} else {
		opts.Dialect = b.dialect
		var err error
		s, err = New(serverDB(t, b), opts)
		if err != nil {
			t.Fatalf("new store: %v", err)
		}
		t.Cleanup(func() { dropTables(t, s) })
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s
}

// dropTables removes every table of the Store's prefix.
func dropTables(t testing.TB, s *Store) {
	t.Helper()
	if err := s.DropTables(context.Background()); err != nil {
		t.Errorf("drop tables: %v", err)
	}
}
