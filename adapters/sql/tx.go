package hooksql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
)

// querier is what a Store runs statements on: the pool, a transaction of
// its own, or the caller's transaction (EnqueueTx).
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// maxTxTries bounds how often a transaction that lost a deadlock or
// serialization race is run again.
const maxTxTries = 4

// inTx runs fn in a write transaction and commits it, rolling back when fn
// fails. A deadlock or serialization failure runs fn again (fn must not
// have effects outside the transaction). fn returns its errors already
// translated; inTx translates only its own begin and commit failures.
func (s *Store) inTx(ctx context.Context, op string, fn func(q querier) error) error {
	err := retried(func() error {
		switch {
		case s.dialect == SQLite && s.txStmts:
			return s.inSQLiteStmtTx(ctx, op, fn)
		case s.dialect == SQLite:
			return s.inSQLiteTx(ctx, op, fn)
		default:
			return s.inPoolTx(ctx, op, fn)
		}
	})
	if cerr := ctx.Err(); cerr != nil && (errors.Is(err, ErrDatabase) || errors.Is(err, sql.ErrTxDone)) {
		// ctx ended the transaction: database/sql rolled it back and
		// closed its statements, so the statement running then may fail
		// as "statement is closed" rather than with ctx's error, and the
		// commit as "transaction has already been committed or rolled
		// back" (sql.ErrTxDone).
		return fmt.Errorf("hooksql: %s: %w (%v)", op, cerr, err)
	}
	return err
}

// retried runs tx, a whole transaction, again while it fails with a
// *txConflict that a run again may cure (conflictRerun: a deadlock or
// serialization failure), up to maxTxTries times in all, and returns the
// last error with the conflict mark taken off, so that a retried around
// this one does not run it again.
func retried(tx func() error) error {
	var err error
	for range maxTxTries {
		err = tx()
		var c *txConflict
		if !errors.As(err, &c) || c.kind != conflictRerun {
			return err
		}
		err = c.err
	}
	return err
}

// txConflict marks a failure lost to another transaction (dbErr): it is
// ErrTxConflict. Its kind says whether retried runs the transaction again.
type txConflict struct {
	err  error
	kind conflictKind
}

func (c *txConflict) Error() string        { return c.err.Error() }
func (c *txConflict) Unwrap() error        { return c.err }
func (c *txConflict) Is(target error) bool { return target == ErrTxConflict }

func (s *Store) inPoolTx(ctx context.Context, op string, fn func(q querier) error) error {
	var opts *sql.TxOptions
	if s.dialect == MySQL {
		// READ COMMITTED keeps InnoDB from taking gap locks on the claim
		// index, which would block concurrent enqueues.
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.dbErr(op, err)
	}
	defer conn.Close()
	// The transaction's own context is not cancelled: pgx's stdlib driver
	// runs the COMMIT under it, and a cancellation while the COMMIT's
	// answer is on its way would report a committed transaction as not
	// made. ctx still ends the wait for a connection and each statement fn
	// runs, and is honoured up to the COMMIT
	// (TestWriteCancelledOnceItsCommitIsSent).
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), opts)
	if err != nil {
		return s.dbErr(op, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := ctx.Err(); err != nil {
		_ = tx.Rollback()
		return s.dbErr(op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.dbErr(op+": commit", err)
	}
	return nil
}

// inSQLiteTx runs fn in BEGIN IMMEDIATE on one connection, so the write lock
// is taken up front (waiting up to the busy timeout) instead of failing when
// a read transaction tries to upgrade. It works whatever the DSN's _txlock.
func (s *Store) inSQLiteTx(ctx context.Context, op string, fn func(q querier) error) error {
	conn, done, err := s.sqliteWriterConn(ctx, op)
	if err != nil {
		return err
	}
	defer done()
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 10000"); err != nil {
		return s.dbErr(op, err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return s.dbErr(op+": begin", err)
	}
	if err := fn(conn); err != nil {
		s.sqliteRollback(conn)
		return err
	}
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
		s.sqliteRollback(conn)
		return s.dbErr(op+": commit", err)
	}
	return nil
}

// inSQLiteStmtTx is inSQLiteTx for a Store made by OpenSQLite, whose DSN
// makes every connection's BeginTx a BEGIN IMMEDIATE and sets its busy
// timeout: the transaction is a *sql.Tx, so that fn runs the Store's
// prepared statements on it (stmtQuerier). Those it wanted and did not find
// are prepared once the connection is back in the pool.
func (s *Store) inSQLiteStmtTx(ctx context.Context, op string, fn func(q querier) error) error {
	q := &stmtQuerier{s: s}
	err := s.sqliteStmtTx(ctx, op, q, fn)
	if len(q.wanted) > 0 {
		s.prepare(ctx, q.wanted)
	}
	return err
}

func (s *Store) sqliteStmtTx(ctx context.Context, op string, q *stmtQuerier, fn func(q querier) error) error {
	conn, done, err := s.sqliteWriterConn(ctx, op)
	if err != nil {
		return err
	}
	defer done()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return s.dbErr(op+": begin", err)
	}
	q.tx = tx
	if err := fn(q); err != nil {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			// The connection may still be in the transaction: discard it.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return s.dbErr(op+": commit", err)
	}
	return nil
}

// sqliteWriterConn takes this Store's writer slot and a connection for a
// SQLite write transaction; done gives both back. SQLite has one writer.
// Queueing this Store's writers here, rather than in SQLite's busy handler
// (which sleeps and retries), keeps throughput up under contention; other
// processes still wait in the busy handler.
func (s *Store) sqliteWriterConn(ctx context.Context, op string) (conn *sql.Conn, done func(), err error) {
	select {
	case s.sqliteWriter <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("hooksql: %s: %w", op, ctx.Err())
	}
	conn, err = s.db.Conn(ctx)
	if err != nil {
		<-s.sqliteWriter
		return nil, nil, s.dbErr(op, err)
	}
	return conn, func() { _ = conn.Close(); <-s.sqliteWriter }, nil
}

// sqliteRollback ends the transaction; if that fails the connection is
// discarded, so no later user of the pool inherits an open transaction.
func (s *Store) sqliteRollback(conn *sql.Conn) {
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}
