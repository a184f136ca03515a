package hooksql

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// TestOpenMySQLPutsArgumentsIntoTheStatement: Open on MySQL turns the
// driver's interpolateParams on, so a statement with arguments is one round
// trip and the server prepares nothing; a DSN that sets interpolateParams
// keeps its own choice.
func TestOpenMySQLPutsArgumentsIntoTheStatement(t *testing.T) {
	dsn := os.Getenv("HOOKRELAY_TEST_MYSQL_DSN")
	if dsn == "" {
		t.Skip("set HOOKRELAY_TEST_MYSQL_DSN to run against MySQL or MariaDB")
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	for _, tc := range []struct {
		name, dsn string
		prepares  bool
	}{
		{"default", dsn, false},
		{"interpolateParams=false kept", dsn + sep + "interpolateParams=false", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(context.Background(), MySQL, tc.dsn, Options{})
			require.NoError(t, err)
			defer s.Close()
			assert.Equal(t, tc.prepares, preparesOnTheServer(t, s.DB()))
		})
	}
}

// preparesOnTheServer runs a statement with an argument on one connection
// and reports whether the server prepared a statement for it.
func preparesOnTheServer(t *testing.T, db *sql.DB) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	prepared := func() int {
		var name string
		var n int
		require.NoError(t, conn.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_stmt_prepare'").Scan(&name, &n))
		return n
	}
	before := prepared()
	var got int
	require.NoError(t, conn.QueryRowContext(ctx, "SELECT ? + 1", 41).Scan(&got))
	require.Equal(t, 42, got)
	return prepared() > before
}

// TestMySQLDSNSetsReadsOnlyTheParameters: a DSN's own setting is found
// among its parameters, and a password that looks like one is not.
func TestMySQLDSNSetsReadsOnlyTheParameters(t *testing.T) {
	for dsn, want := range map[string]bool{
		"root@tcp(127.0.0.1:3306)/test":                                         false,
		"root@tcp(127.0.0.1:3306)/test?parseTime=true&interpolateParams=false":  true,
		"root@tcp(127.0.0.1:3306)/test?interpolateParams=true":                  true,
		"u:p?interpolateParams=false@tcp(127.0.0.1:3306)/test":                  false,
		"u:a/b?interpolateParams=1@tcp(127.0.0.1:3306)/test?parseTime=true":     false,
		"u:a/b@tcp(127.0.0.1:3306)/test?parseTime=true&interpolateParams=false": true,
		"root@tcp(127.0.0.1:3306)/test?xinterpolateParams=false&parseTime=true": false,
	} {
		assert.Equal(t, want, mysqlDSNSets(dsn, "interpolateParams"), dsn)
	}
}

// A caller's transaction whose EnqueueTx waits on a row another
// transaction holds until innodb_lock_wait_timeout (error 1205) learns
// ErrTxConflict: roll back and run it again. MySQL rolled back only the
// statement that waited (innodb_rollback_on_timeout is off by default), so
// the transaction is open, holding what it wrote before — here the
// business write — which committing would keep without its deliveries.
func TestEnqueueTxLosingALockWaitIsAConflict(t *testing.T) {
	b := backends[2]
	require.Equal(t, MySQL, b.dialect)
	b.skipUnlessConfigured(t)
	ctx := context.Background()
	s := newStore(t, b, Options{})
	d := insertedUncommitted(t, s, "evt_locked")

	conn, err := s.DB().Conn(ctx)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1")
	require.NoError(t, err)
	defer func() { _, _ = conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = DEFAULT") }()
	_, err = conn.ExecContext(ctx, "CREATE TEMPORARY TABLE business (id INT)")
	require.NoError(t, err)
	tx, err := conn.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, "INSERT INTO business VALUES (1)")
	require.NoError(t, err)
	_, err = s.EnqueueTx(ctx, tx, []hookrelay.Delivery{d})
	require.Error(t, err)
	var me *mysql.MySQLError
	require.False(t, errors.As(err, &me), "no driver error type is exposed")
	assert.ErrorContains(t, err, "1205")
	assert.ErrorIs(t, err, ErrTxConflict, "lost to another transaction: run it again")
	assert.ErrorIs(t, err, ErrDatabase)

	var onTimeout bool
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT @@innodb_rollback_on_timeout").Scan(&onTimeout))
	if !onTimeout {
		var n int
		require.NoError(t, tx.QueryRowContext(ctx, "SELECT count(*) FROM business").Scan(&n))
		assert.Equal(t, 1, n, "only the statement was rolled back: the transaction is open with its earlier writes")
	}
}

// Under MariaDB's innodb_snapshot_isolation (the default from 11.6), a
// caller's REPEATABLE READ transaction whose EnqueueTx meets a record
// committed after its snapshot is refused with 1020 ("record has changed
// since last read"): a conflict, ErrTxConflict, like a deadlock.
func TestEnqueueTxMeetingARecordNewerThanItsSnapshotIsAConflict(t *testing.T) {
	b := backends[2]
	require.Equal(t, MySQL, b.dialect)
	b.skipUnlessConfigured(t)
	ctx := context.Background()
	s := newStore(t, b, Options{})
	conn, err := s.DB().Conn(ctx)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	if _, err := conn.ExecContext(ctx, "SET SESSION innodb_snapshot_isolation = ON"); err != nil {
		t.Skipf("no innodb_snapshot_isolation on this server: %v", err)
	}
	defer func() { _, _ = conn.ExecContext(ctx, "SET SESSION innodb_snapshot_isolation = DEFAULT") }()
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	var n int
	require.NoError(t, tx.QueryRowContext(ctx, s.q("SELECT count(*) FROM {d}")).Scan(&n)) // the snapshot
	_, err = tx.ExecContext(ctx, "CREATE TEMPORARY TABLE business (id INT) ENGINE=InnoDB")
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "INSERT INTO business VALUES (1)")
	require.NoError(t, err)

	d := newDelivery("evt_newer", "dst_1", t0)
	_, err = s.Create(ctx, []hookrelay.Delivery{d})
	require.NoError(t, err)
	_, err = s.EnqueueTx(ctx, tx, []hookrelay.Delivery{d})
	require.Error(t, err)
	assert.ErrorContains(t, err, "1020")
	assert.ErrorIs(t, err, ErrTxConflict, "lost to another transaction: run it again")
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT count(*) FROM business").Scan(&n))
	assert.Equal(t, 0, n, "like a deadlock, the server rolled the whole transaction back")
}
