package hooksql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay/hookrelaytest"
)

// otherPostgresDriver is pgx's database/sql driver with its connections'
// pgx handle hidden: to the Store it is some other PostgreSQL driver, so
// claims and ledger batches take the plain database/sql paths (one
// transaction of single statements) instead of pgx pipelines.
type otherPostgresDriver struct{}

func (otherPostgresDriver) Open(name string) (driver.Conn, error) {
	c, err := stdlib.GetDefaultDriver().Open(name)
	if err != nil {
		return nil, err
	}
	return otherPostgresConn{
		Conn: c, QueryerContext: c.(driver.QueryerContext), ExecerContext: c.(driver.ExecerContext),
		ConnBeginTx: c.(driver.ConnBeginTx), ConnPrepareContext: c.(driver.ConnPrepareContext),
		NamedValueChecker: c.(driver.NamedValueChecker), SessionResetter: c.(driver.SessionResetter),
		Pinger: c.(driver.Pinger),
	}, nil
}

// otherPostgresConn forwards what database/sql uses of a connection, and
// nothing else: no Conn() *pgx.Conn.
type otherPostgresConn struct {
	driver.Conn
	driver.QueryerContext
	driver.ExecerContext
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.NamedValueChecker
	driver.SessionResetter
	driver.Pinger
}

func init() { sql.Register("hookrelay-other-postgres", otherPostgresDriver{}) }

// The Store on PostgreSQL through a driver other than pgx runs its claims
// and ledger batches without pgx's pipelines; the conformance suite holds
// there too.
func TestConformanceOnAnotherPostgresDriver(t *testing.T) {
	b := postgresBackend(t)
	db, err := sql.Open("hookrelay-other-postgres", os.Getenv(b.envVar))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	hookrelaytest.Run(t, func(t *testing.T) hookrelaytest.Harness {
		s, err := New(db, Options{Dialect: Postgres, TablePrefix: randomPrefix()})
		require.NoError(t, err)
		require.NoError(t, s.Migrate(context.Background()))
		t.Cleanup(func() { dropTables(t, s) })
		return hookrelaytest.Harness{Queue: s, Ledger: s, Destinations: s,
			NoDueAnnouncements: "ListenDue listens through a pgx connection only: on another driver it waits for its context and the worker polls"}
	})
}
