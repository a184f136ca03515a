package hooksql

import (
	"context"
	"database/sql"
)

// Prepared statements, for SQLite only.
//
// modernc.org/sqlite parses and compiles a statement afresh on every
// ExecContext and QueryContext that is not on a prepared statement, and a
// ledger batch runs three statements per delivery. A Store made by
// OpenSQLite therefore prepares the statements marked by qp once on the
// pool (db.PrepareContext: a *sql.Stmt that database/sql prepares again,
// lazily, on each connection it runs on, and closes with the connection)
// and runs them in its transactions through tx.StmtContext, which reuses
// the statement already prepared on the transaction's connection.
//
// No connection is pinned: a statement is prepared only after the
// transaction that first wanted it has released its connection, so a pool
// of one connection cannot deadlock on it, and until then it runs
// unprepared. The statements are bound to the Store's table prefix, so
// each Store has its own; Close closes them.
//
// PostgreSQL and MySQL do not use them. pgx's stdlib driver already keeps
// a per-connection statement cache, so a *sql.Stmt there would prepare
// twice; on MySQL a prepare is a round trip per connection, and the hot
// paths of both are elsewhere (pgx pipelines, and transactions of
// single statements sent with their arguments).

// qp is q for a statement worth preparing: one whose text, once bound, is
// fixed (no placeholder lists of varying length) and that runs through
// ExecContext or QueryRowContext. One run through QueryContext, whose rows
// could still be open when the same statement runs again in the
// transaction, is marked with qpRows instead.
func (s *Store) qp(raw string) string {
	out := s.q(raw)
	if s.txStmts {
		if _, ok := s.reusable.Load(out); !ok {
			s.reusable.Store(out, struct{}{})
		}
	}
	return out
}

// qpRows is qp for a statement run through QueryContext: its caller
// closes the rows before the transaction runs it again (a prepared
// statement has one cursor).
func (s *Store) qpRows(raw string) string {
	out := s.q(raw)
	if s.txStmts {
		if _, ok := s.reusableRows.Load(out); !ok {
			s.reusableRows.Store(out, struct{}{})
		}
	}
	return out
}

// prepared returns the Store's statement for query, or nil.
func (s *Store) prepared(query string) *sql.Stmt {
	s.stmtMu.RLock()
	defer s.stmtMu.RUnlock()
	return s.stmts[query]
}

// prepare prepares the queries a transaction wanted but did not find. The
// caller holds no connection of the pool. A failure leaves the query
// unprepared, to be tried again by the next transaction that wants it.
func (s *Store) prepare(ctx context.Context, queries []string) {
	for _, query := range queries {
		if s.prepared(query) != nil {
			continue
		}
		st, err := s.db.PrepareContext(ctx, query)
		if err != nil {
			continue
		}
		s.stmtMu.Lock()
		if s.stmtsClosed || s.stmts[query] != nil {
			s.stmtMu.Unlock()
			_ = st.Close()
			continue
		}
		if s.stmts == nil {
			s.stmts = map[string]*sql.Stmt{}
		}
		s.stmts[query] = st
		s.stmtMu.Unlock()
	}
}

// closeStmts closes the Store's statements; none is prepared afterwards.
// A transaction still using one prepares it again on its own connection.
func (s *Store) closeStmts() {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	s.stmtsClosed = true
	for query, st := range s.stmts {
		_ = st.Close()
		delete(s.stmts, query)
	}
}

// stmtQuerier is a querier on a transaction that runs the Store's prepared
// statements through it, and notes the reusable ones not prepared yet.
type stmtQuerier struct {
	s      *Store
	tx     *sql.Tx
	local  map[string]*sql.Stmt // the transaction's handles on the Store's statements
	wanted []string             // reusable queries that had no statement yet
}

// stmt returns the transaction's handle on query's prepared statement, or
// nil to run query as it is.
func (q *stmtQuerier) stmt(ctx context.Context, query string, rows bool) *sql.Stmt {
	if st, ok := q.local[query]; ok {
		return st
	}
	st := q.s.prepared(query)
	if st == nil {
		marks := &q.s.reusable
		if rows {
			marks = &q.s.reusableRows
		}
		if _, ok := marks.Load(query); ok {
			q.wanted = append(q.wanted, query)
			if q.local == nil {
				q.local = map[string]*sql.Stmt{}
			}
			q.local[query] = nil // wanted once per transaction
		}
		return nil
	}
	txst := q.tx.StmtContext(ctx, st)
	if q.local == nil {
		q.local = map[string]*sql.Stmt{}
	}
	q.local[query] = txst
	return txst
}

func (q *stmtQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := q.stmt(ctx, query, false); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.tx.ExecContext(ctx, query, args...)
}

func (q *stmtQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := q.stmt(ctx, query, true); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.tx.QueryContext(ctx, query, args...)
}

func (q *stmtQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := q.stmt(ctx, query, false); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.tx.QueryRowContext(ctx, query, args...)
}
