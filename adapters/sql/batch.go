package hooksql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hookrelay/hookrelay"
)

var _ hookrelay.BatchLedger = (*Store)(nil)

// RecordBatch implements hookrelay.BatchLedger: the writes commit together,
// one fsync on SQLite and one WAL flush on PostgreSQL for the whole batch,
// each still fenced by its own lease. On PostgreSQL the batch is one round
// trip: every write's fenced statement is pipelined in one implicit
// transaction. On SQLite it is one transaction of per-write statements, on
// MySQL one of a few statements for the whole batch (recordBatchMySQL). A
// write whose fence fails gets its error in the returned slice and the
// others still commit; a failed commit returns the error and writes
// nothing.
func (s *Store) RecordBatch(ctx context.Context, writes []hookrelay.LedgerWrite) ([]error, error) {
	errs := make([]error, len(writes))
	ops := make([]*fencedOp, len(writes))
	all := make([]fencedOp, len(writes))
	for i, w := range writes {
		var (
			o   fencedOp
			err error
		)
		switch {
		case w.Delivered != nil:
			o, err = markDeliveredOp(*w.Delivered)
		case w.Retry != nil:
			o, err = recordRetryOp(*w.Retry)
		case w.DeadLetter != nil:
			o, err = recordDeadLetterOp(*w.DeadLetter)
		default:
			err = fmt.Errorf("hooksql: record batch: write %d sets no field: %w", i, hookrelay.ErrInvalidDelivery)
		}
		if err != nil {
			errs[i] = err // invalid input: refused alone, like the single write
			continue
		}
		all[i] = o
		ops[i] = &all[i]
	}
	due := earliestRetry(writes, errs)
	err := retried(func() error {
		switch s.dialect {
		case Postgres:
			return s.recordBatchPipeline(ctx, ops, errs, due)
		case SQLite:
			return s.inTx(ctx, "record batch", func(q querier) error { return s.recordBatchSQLite(ctx, q, ops, errs) })
		default:
			return s.inTx(ctx, "record batch", func(q querier) error { return s.recordBatchMySQL(ctx, q, ops, errs) })
		}
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// isFenceErr reports a write refused by its fence (or for a record that is
// not there): the batch goes on without it.
func isFenceErr(err error) bool {
	return errors.Is(err, hookrelay.ErrLeaseLost) || errors.Is(err, hookrelay.ErrInvalidState) || errors.Is(err, hookrelay.ErrNotFound)
}

// earliestRetry is the earliest due time among the batch's valid retries
// (zero: none), which the batch announces to listening workers.
func earliestRetry(writes []hookrelay.LedgerWrite, errs []error) time.Time {
	var at time.Time
	for i, w := range writes {
		if w.Retry != nil && errs[i] == nil && (at.IsZero() || w.Retry.NextAttemptAt.Before(at)) {
			at = w.Retry.NextAttemptAt
		}
	}
	return at
}

// pgxConn is what the pgx stdlib driver's connection offers.
type pgxConn interface{ Conn() *pgx.Conn }

// errNotPgx: the *sql.DB was not opened with the pgx stdlib driver.
var errNotPgx = errors.New("hooksql: the PostgreSQL connection is not a pgx stdlib connection")

// rowWithSettings runs one statement that returns one row on PostgreSQL
// under the plan settings given, in a transaction of its own, and scans
// the row into dest: through pgx as one pipeline (the settings, then
// pgxQuery with pgxArgs: one round trip), through another driver as a
// transaction of the settings and sqlQuery with sqlArgs (pgx can send
// arguments, such as typed slices, that another driver cannot). A
// statement that returns no row gives sql.ErrNoRows as it is; any other
// failure is a database error named after op.
func (s *Store) rowWithSettings(ctx context.Context, settings, op, pgxQuery string, pgxArgs []any, sqlQuery string, sqlArgs []any, dest ...any) error {
	var scanErr error
	err := s.rowsWithSettings(ctx, settings, op, []stmtArgs{{query: pgxQuery, args: pgxArgs, sqlQuery: sqlQuery, sqlArgs: sqlArgs}},
		func(_ int, r scanner) error {
			scanErr = r.Scan(dest...)
			if scanErr != nil && !errors.Is(scanErr, sql.ErrNoRows) {
				return s.dbErr(op, scanErr)
			}
			return nil
		})
	if err != nil {
		return err
	}
	return scanErr
}

// stmtArgs is one statement with its values, and, when set, the text and
// values to send instead through a driver other than pgx (pgx can send
// arguments, such as typed slices, that another driver cannot).
type stmtArgs struct {
	query    string
	args     []any
	sqlQuery string
	sqlArgs  []any
}

// rowsWithSettings runs statements that each return at most one row on
// PostgreSQL under the plan settings given, in one transaction, and hands
// each statement's row to read in turn (k is the statement's index; its
// Scan returns sql.ErrNoRows for no row): through pgx as one pipeline (one
// round trip), through another driver as a transaction of the settings
// and the statements. A statement the server fails aborts the transaction:
// nothing of it commits, and the failure (which read sees in Scan and
// returns) or the failed commit is returned. An error read returns for a
// row the server did send stops the reading but, through pgx, not the
// commit: the pipeline's end commits what the statements did.
func (s *Store) rowsWithSettings(ctx context.Context, settings, op string, stmts []stmtArgs, read func(k int, r scanner) error) error {
	if len(stmts) == 0 {
		return nil
	}
	err := s.withPgxConn(ctx, op, func(c *pgx.Conn) error {
		br, err := s.sendWithSettings(ctx, c, settings, op, func(b *pgx.Batch) {
			for _, st := range stmts {
				b.Queue(st.query, st.args...)
			}
		})
		if err != nil {
			return err
		}
		for k := range stmts {
			if err := read(k, br.QueryRow()); err != nil {
				_ = br.Close()
				return err
			}
		}
		if err := br.Close(); err != nil {
			return s.dbErr(op+": commit", err)
		}
		return nil
	})
	if errors.Is(err, errNotPgx) {
		err = s.inTx(ctx, op, func(q querier) error {
			if err := s.planSettings(ctx, q, settings, op); err != nil {
				return err
			}
			for k, st := range stmts {
				query, args := st.query, st.args
				if st.sqlQuery != "" {
					query, args = st.sqlQuery, st.sqlArgs
				}
				if err := read(k, q.QueryRowContext(ctx, query, args...)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return err
}

// withPgxConn runs fn on a pooled connection's *pgx.Conn. When the pool's
// driver is not pgx's stdlib, it returns errNotPgx without calling fn.
func (s *Store) withPgxConn(ctx context.Context, op string, fn func(*pgx.Conn) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.dbErr(op, err)
	}
	defer conn.Close()
	var fnErr error
	rawErr := conn.Raw(func(dc any) error {
		pc, ok := dc.(pgxConn)
		if !ok {
			fnErr = errNotPgx
			return nil
		}
		fnErr = fn(pc.Conn())
		if fnErr != nil && pc.Conn().IsClosed() {
			return driver.ErrBadConn // do not hand a broken connection back to the pool
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	if rawErr != nil && !errors.Is(rawErr, driver.ErrBadConn) {
		return s.dbErr(op, rawErr)
	}
	return nil
}

// recordBatchPipeline sends the batch in one pipeline, which PostgreSQL
// runs as one implicit transaction: one round trip and one commit. The
// plan settings come first (planSettings); the MarkDelivered writes (each
// delivery's first in the batch) go as one statement for all of them
// (deliveredManyPostgres); every other write as its own fenced statement;
// then the announcement of the earliest retry.
// It fills errs for the writes their fence refused. The batch committed
// only when the pipeline's end (Close) reports no error. ctx is honoured
// until the pipeline is sent (sendPipeline).
func (s *Store) recordBatchPipeline(ctx context.Context, ops []*fencedOp, errs []error, due time.Time) error {
	var many []int // indexes of the writes in the one MarkDelivered statement
	seen := make(map[string]bool, len(ops))
	for i, o := range ops {
		if o != nil && o.delivered && !seen[o.f.id] {
			many = append(many, i)
		}
		if o != nil {
			seen[o.f.id] = true
		}
	}
	if len(many) < 2 {
		many = nil
	}
	inMany := make([]bool, len(ops))
	for _, i := range many {
		inMany[i] = true
	}
	err := s.withPgxConn(ctx, "record batch", func(c *pgx.Conn) error {
		br, err := s.sendWithSettings(ctx, c, pgWriteSettings, "record batch", func(b *pgx.Batch) {
			if len(many) > 0 {
				query, args := s.deliveredManyPostgres(ops, many)
				b.Queue(query, args...)
			}
			for i, o := range ops {
				if o != nil && !inMany[i] {
					query, args := s.fencedQueryPostgres(*o)
					b.Queue(query, args...)
				}
			}
			if !due.IsZero() {
				b.Queue("SELECT pg_notify($1, $2)", s.dueChannel(), duePayload(due))
			}
		})
		if err != nil {
			return err
		}
		if len(many) > 0 {
			if err := s.judgeDeliveredMany(br, ops, many, errs); err != nil {
				_ = br.Close()
				return err
			}
		}
		for i, o := range ops {
			if o == nil || inMany[i] {
				continue
			}
			var r fenceRead
			err := br.QueryRow().Scan(&r.state, &r.token, &r.attempt, &r.ended, &r.written)
			errs[i] = s.judgePostgres(*o, r, err)
			if errs[i] != nil && !isFenceErr(errs[i]) {
				_ = br.Close()
				return errs[i]
			}
		}
		if err := br.Close(); err != nil {
			return s.dbErr("record batch: commit", err)
		}
		return nil
	})
	if errors.Is(err, errNotPgx) {
		// Another PostgreSQL driver: one transaction of single statements.
		err = s.inTx(ctx, "record batch", func(q querier) error {
			if err := s.planSettings(ctx, q, pgWriteSettings, "record batch"); err != nil {
				return err
			}
			for i, o := range ops {
				if o == nil {
					continue
				}
				query, args := s.fencedQueryPostgres(*o)
				var r fenceRead
				err := q.QueryRowContext(ctx, query, args...).Scan(&r.state, &r.token, &r.attempt, &r.ended, &r.written)
				errs[i] = s.judgePostgres(*o, r, err)
				if errs[i] != nil && !isFenceErr(errs[i]) {
					return errs[i]
				}
			}
			return nil
		})
	}
	if err != nil {
		return err
	}
	for i, o := range ops { // after the commit: the refusing writes are visible
		if o != nil {
			errs[i] = s.rejudge(ctx, *o, errs[i])
		}
	}
	return nil
}

// deliveredManyPostgres is MarkDelivered for many deliveries (distinct
// IDs) in one statement: the values travel as arrays, upd writes each row
// whose own fence holds (checked on the row it updates, so re-checked on the
// newest version if a concurrent write changed it: no row lock beforehand),
// upd also keeps each attempt that keepsInRow in its row's delivering_*
// columns, ins stores the other attempts of the rows upd wrote (an
// attempts row), and the result is one row
// per write, in the order of idx, for judgeDeliveredMany: for a row not
// written, its values in the statement's snapshot. It is fencedQueryPostgres
// for many rows: one statement to plan and run instead of one per delivery.
//
// Its plan must not depend on the table's statistics: pgx prepares it, and
// PostgreSQL soon plans it once for any values, guessing ten rows. upd finds
// its rows by primary key (id = ANY($1), the IDs again), and checks nothing
// else on a row before joining it to its input: every check of the fence is
// one join condition, wrapped in IS TRUE so the planner cannot split it
// (nor match the state check to the due index's predicate, which with
// statistics that saw few pending rows read every pending row through that
// index). Statistics see almost no leased rows (a batch's rows are leased
// only while they are written), so a check on the row alone was estimated
// to leave one row, and the planner joined that one row to the input by
// reading all of the input for each: for every row in fact, n² input rows
// per batch of n (200 writes took 13.5 ms of server time instead of
// 2.2–3.7, 1,000 took 290 ms instead of 12). A written row is then looked
// up in upd through a hashed subplan (IN in the select list, or wrapped in
// IS TRUE: never turned into a join either), and a refused write's row is
// read in a LATERAL subquery gated on the write not being done, so a
// written row is not read again.
func (s *Store) deliveredManyPostgres(ops []*fencedOp, idx []int) (string, []any) {
	// Typed slices: pgx encodes each as an array without reflection, and
	// no value is boxed.
	n := len(idx)
	strs, int64s, ints := make([]string, 4*n), make([]int64, 5*n), make([]int, 4*n)
	keeps := make([]bool, n)
	var (
		ids, outcomes, reasons, aDetails           = column(strs, 0, n), column(strs, 1, n), column(strs, 2, n), column(strs, 3, n)
		tokens, updated, aStarted, aFinished       = column(int64s, 0, n), column(int64s, 1, n), column(int64s, 2, n), column(int64s, 3, n)
		aNext                                      = column(int64s, 4, n)
		fenceAttempts, aNumbers, aKinds, aStatuses = column(ints, 0, n), column(ints, 1, n), column(ints, 2, n), column(ints, 3, n)
	)
	for k, i := range idx {
		o := ops[i]
		a := &o.attempt
		ids[k], tokens[k], fenceAttempts[k] = o.f.id, o.f.lease.Token, o.f.attempt
		// The record's last outcome and reason are the attempt's.
		outcomes[k], reasons[k], updated[k] = a.outcome, a.reason, o.updated
		aNumbers[k], aStarted[k], aFinished[k], aKinds[k] = a.number, a.started, a.finished, a.kind
		aStatuses[k], aDetails[k], aNext[k] = a.status, a.detail, a.next
		keeps[k] = o.keep
	}
	args := []any{ids, tokens, fenceAttempts, outcomes, reasons, updated,
		aNumbers, aStarted, aFinished, aKinds, aStatuses, aDetails, aNext, keeps}
	query := "WITH input AS (SELECT * FROM unnest(CAST(? AS TEXT[]), CAST(? AS BIGINT[]), CAST(? AS INTEGER[])," +
		" CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS BIGINT[])," +
		" CAST(? AS INTEGER[]), CAST(? AS BIGINT[]), CAST(? AS BIGINT[]), CAST(? AS INTEGER[])," +
		" CAST(? AS INTEGER[]), CAST(? AS TEXT[]), CAST(? AS BIGINT[]), CAST(? AS BOOLEAN[]))" +
		" WITH ORDINALITY AS i(id, token, fence_attempt, last_outcome, last_reason, updated_at," +
		" a_number, a_started, a_finished, a_kind, a_status, a_detail, a_next, keep, ord))," +
		" upd AS (UPDATE {d} d SET state = 'delivered', last_outcome = i.last_outcome, last_reason = i.last_reason," +
		" updated_at = i.updated_at, lease_expires_at = NULL," +
		" delivering_attempt = CASE WHEN i.keep THEN i.a_number END, delivering_started_at = CASE WHEN i.keep THEN i.a_started END," +
		" delivering_finished_at = CASE WHEN i.keep THEN i.a_finished END, delivering_status_code = CASE WHEN i.keep THEN i.a_status END," +
		" delivering_detail = CASE WHEN i.keep THEN i.a_detail END FROM input i" +
		" WHERE d.id = ANY($1) AND d.id = i.id AND d.lease_token = i.token AND ((d.state = 'pending') AND d.lease_token <> 0" +
		" AND d.lease_expires_at IS NOT NULL AND (i.fence_attempt = 0 OR d.attempt = i.fence_attempt)) IS TRUE RETURNING d.id)," +
		" ins AS (INSERT INTO {a} (" + insertAttemptCols + ") SELECT i.id, i.a_number, i.a_started, i.a_finished," +
		" i.a_kind, i.last_outcome, i.last_reason, i.a_status, i.a_detail, NULLIF(i.a_next, " + strconv.FormatInt(zeroTime, 10) + ")" +
		" FROM input i WHERE NOT i.keep AND (i.id IN (SELECT id FROM upd)) IS TRUE)," +
		" done AS (SELECT i.ord, i.id, i.id IN (SELECT id FROM upd) AS written FROM input i)" +
		" SELECT c.state, c.lease_token, c.attempt, c.lease_expires_at IS NULL, w.written" +
		" FROM done w LEFT JOIN LATERAL (SELECT state, lease_token, attempt, lease_expires_at" +
		" FROM {d} WHERE id = w.id AND NOT w.written LIMIT 1) c ON true ORDER BY w.ord"
	return s.q(query), args
}

// column is the k-th of the n-long columns that all holds end to end.
func column[T any](all []T, k, n int) []T { return all[k*n : (k+1)*n : (k+1)*n] }

// judgeDeliveredMany reads deliveredManyPostgres's rows into errs, judging
// each write as judgePostgres judges a single one.
func (s *Store) judgeDeliveredMany(br pgx.BatchResults, ops []*fencedOp, idx []int, errs []error) error {
	rows, err := br.Query()
	if err != nil {
		return s.dbErr("record batch", err)
	}
	defer rows.Close()
	n := 0
	var (
		// Read in place: the state is looked at in the driver's buffer,
		// and a missing record is a NULL token (lease_token is NOT NULL).
		state          pgtype.DriverBytes
		token, attempt pgtype.Int8
		ended, written bool
	)
	targets := []any{&state, &token, &attempt, &ended, &written} // built once: Scan's arguments escape
	for rows.Next() {
		if n >= len(idx) {
			return fmt.Errorf("%w: record batch: more rows than writes", ErrDatabase)
		}
		if err := rows.Scan(targets...); err != nil {
			return s.dbErr("record batch", err)
		}
		i := idx[n]
		n++
		if written {
			errs[i] = nil
			continue
		}
		if !token.Valid { // no such record
			errs[i] = s.judgePostgres(*ops[i], fenceRead{}, sql.ErrNoRows)
			continue
		}
		r := fenceRead{state: known(state), token: token.Int64, attempt: int(attempt.Int64), ended: ended}
		errs[i] = s.judgePostgres(*ops[i], r, nil)
		if errs[i] != nil && !isFenceErr(errs[i]) {
			return errs[i]
		}
	}
	if err := rows.Err(); err != nil {
		return s.dbErr("record batch", err)
	}
	if n != len(idx) {
		return fmt.Errorf("%w: record batch: %d rows for %d writes", ErrDatabase, n, len(idx))
	}
	return nil
}
