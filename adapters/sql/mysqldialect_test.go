package hooksql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// withoutReturning is a connector of go-sql-driver/mysql whose connections
// refuse INSERT … RETURNING as MySQL 8 does (error 1064), whatever the
// server: MariaDB standing in for MySQL behind a proxy that reports a
// MariaDB version. refused counts the statements refused.
type withoutReturning struct {
	driver.Connector
	refused *atomic.Int64
}

func (c withoutReturning) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return withoutReturningConn{
		Conn: conn, ConnBeginTx: conn.(driver.ConnBeginTx), ExecerContext: conn.(driver.ExecerContext),
		Pinger: conn.(driver.Pinger), SessionResetter: conn.(driver.SessionResetter),
		NamedValueChecker: conn.(driver.NamedValueChecker),
		query:             conn.(driver.QueryerContext), prepare: conn.(driver.ConnPrepareContext), refused: c.refused,
	}, nil
}

type withoutReturningConn struct {
	driver.Conn
	driver.ConnBeginTx
	driver.ExecerContext
	driver.Pinger
	driver.SessionResetter
	driver.NamedValueChecker
	query   driver.QueryerContext
	prepare driver.ConnPrepareContext
	refused *atomic.Int64
}

func (c withoutReturningConn) refuse(query string) error {
	if strings.HasPrefix(strings.TrimSpace(strings.ToUpper(query)), "INSERT") && strings.Contains(strings.ToUpper(query), " RETURNING ") {
		c.refused.Add(1)
		return &mysql.MySQLError{Number: 1064, SQLState: [5]byte{'4', '2', '0', '0', '0'},
			Message: "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'RETURNING id' at line 1"}
	}
	return nil
}

func (c withoutReturningConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.refuse(query); err != nil {
		return nil, err
	}
	return c.query.QueryContext(ctx, query, args)
}

func (c withoutReturningConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.refuse(query); err != nil {
		return nil, err
	}
	return c.prepare.PrepareContext(ctx, query)
}

// withoutReturningDB opens the MySQL test server through withoutReturning.
func withoutReturningDB(t *testing.T) (*sql.DB, *atomic.Int64) {
	t.Helper()
	b := backends[2]
	b.skipUnlessConfigured(t)
	cfg, err := mysql.ParseDSN(os.Getenv(b.envVar))
	require.NoError(t, err)
	cfg.InterpolateParams = true
	conn, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	refused := new(atomic.Int64)
	db := sql.OpenDB(withoutReturning{Connector: conn, refused: refused})
	t.Cleanup(func() { _ = db.Close() })
	return db, refused
}

// A Store that believes the server takes INSERT … RETURNING (it reported a
// MariaDB version) but whose server refuses it (MySQL behind a proxy, a
// failover) still creates deliveries: the refused insert is run again
// without RETURNING, in the same transaction, and later inserts do not try
// RETURNING again.
func TestCreateRecoversFromAWrongReturningGuess(t *testing.T) {
	db, refused := withoutReturningDB(t)
	ctx := context.Background()
	s, err := New(db, Options{Dialect: MySQL, TablePrefix: randomPrefix()})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	t.Cleanup(func() { dropTables(t, s) })
	s.returningKnown, s.returning = true, true // the wrong guess

	d1, d2 := newDelivery("evt_1", "dst_1", t0), newDelivery("evt_2", "dst_1", t0)
	created, err := s.Create(ctx, []hookrelay.Delivery{d1, d2, d1})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, false}, created)
	got, err := s.Get(ctx, d2.ID)
	require.NoError(t, err)
	assert.Equal(t, d2.Payload, got.Payload)

	// In the caller's transaction, which the refusal did not spoil.
	d3 := newDelivery("evt_3", "dst_1", t0)
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	created, err = s.EnqueueTx(ctx, tx, []hookrelay.Delivery{d3, d1})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false}, created)
	require.NoError(t, tx.Commit())
	_, err = s.Get(ctx, d3.ID)
	require.NoError(t, err)

	assert.Equal(t, int64(1), refused.Load(), "RETURNING is tried once, not on every insert")
}
