package hooksql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/errtext"
)

// Create implements hookrelay.Ledger: it stores new pending deliveries,
// claimable at their NextAttemptAt, in one transaction. A delivery whose ID
// exists (or appears earlier in the same call) is left untouched and
// reported false. Every record is validated first; one invalid delivery
// refuses the whole call and nothing is written. There is no maximum
// batch size: the rows go as statements of up to 500 rows and 4 MiB of
// payloads (insertChunkRows, insertChunkBytes), all in the one
// transaction, which holds its locks (on SQLite the database's write lock)
// until the whole batch is stored. EnqueueTx and PublishTx chunk the same
// way in the caller's transaction.
func (s *Store) Create(ctx context.Context, deliveries []hookrelay.Delivery) ([]bool, error) {
	rows, err := s.encodeAll(deliveries)
	if err != nil {
		return nil, err
	}
	if s.dialect == Postgres {
		created, err := s.createPgx(ctx, deliveries, rows)
		if !errors.Is(err, errNotPgx) {
			return created, err
		}
	}
	var created []bool
	err = s.inTx(ctx, "create", func(q querier) error {
		if created, err = s.insertDeliveries(ctx, q, deliveries, rows); err != nil {
			return err
		}
		return s.announceCreated(ctx, q, deliveries, created)
	})
	return created, err
}

// announceCreated tells listening workers (PostgreSQL) when the earliest
// created delivery is due, at the commit of q's transaction.
func (s *Store) announceCreated(ctx context.Context, q querier, deliveries []hookrelay.Delivery, created []bool) error {
	var at time.Time
	any := false
	for i, d := range deliveries {
		if created[i] && (!any || d.NextAttemptAt.Before(at)) {
			at, any = d.NextAttemptAt, true
		}
	}
	if !any {
		return nil
	}
	return s.notifyDue(ctx, q, at)
}

// EnqueueTx stores deliveries (built by hookrelay.Client.Prepare) in the
// caller's transaction: the business write and the delivery records commit
// or roll back together (the outbox pattern). After commit they are
// claimable by any worker on this Store's tables: on PostgreSQL the commit
// wakes listening workers in every process (ListenDue); elsewhere a worker
// picks them up at its next poll. It reports, per input, whether a
// record was created (false: the delivery ID already existed, so a repeated
// enqueue is a no-op, and a different payload under the same event and
// destination is not stored: the first record is kept). With a Queue that
// is not this Store (a message broker), the commit publishes no message:
// call Client.EnqueueMany with the same params after the commit to publish
// at once (it creates nothing and publishes every delivery it names);
// otherwise the worker's outbox recovery publishes them once they have
// been due for Config.RecoverUnpublishedAfter. tx must belong to the
// Store's database: a transaction of another database holding tables of
// this Store's prefix is not detected, and the records land there. With
// SQLite, begin tx on Store.DB(); a BEGIN IMMEDIATE transaction (the
// _txlock=immediate DSN option OpenSQLite sets) avoids lock-upgrade
// failures. A tx already committed or rolled back is refused with an
// error wrapping sql.ErrTxDone, and nothing is stored. An error matching
// ErrTxConflict (a deadlock, a serialization failure, a lock wait timeout)
// means tx is lost: roll it back and run the whole transaction again; do
// not commit it (see ErrTxConflict for the state it is in).
func (s *Store) EnqueueTx(ctx context.Context, tx *sql.Tx, deliveries []hookrelay.Delivery) ([]bool, error) {
	return s.enqueueCallerTx(ctx, "EnqueueTx", tx, deliveries)
}

// enqueueCallerTx is EnqueueTx for the entry point named entry (EnqueueTx,
// PublishTx): the caller's mistakes with tx are reported under the name
// the caller called.
func (s *Store) enqueueCallerTx(ctx context.Context, entry string, tx *sql.Tx, deliveries []hookrelay.Delivery) ([]bool, error) {
	if tx == nil {
		return nil, fmt.Errorf("hooksql: %s: tx is nil", entry)
	}
	created, err := s.enqueueTx(ctx, tx, deliveries)
	if errors.Is(err, sql.ErrTxDone) {
		return nil, fmt.Errorf("hooksql: %s: tx is already committed or rolled back: %w", entry, sql.ErrTxDone)
	}
	return created, err
}

func (s *Store) enqueueTx(ctx context.Context, tx *sql.Tx, deliveries []hookrelay.Delivery) ([]bool, error) {
	rows, err := s.encodeAll(deliveries)
	if err != nil {
		return nil, err
	}
	if s.pgxArgs {
		// The statement of Create on pgx, in the caller's transaction: one
		// round trip a chunk, the announcement included.
		return s.createUnnest(ctx, tx, deliveries, rows)
	}
	created, err := s.insertDeliveries(ctx, tx, deliveries, rows)
	if err != nil {
		return nil, err
	}
	if err := s.announceCreated(ctx, tx, deliveries, created); err != nil {
		return nil, err
	}
	return created, nil
}

func (s *Store) encodeAll(deliveries []hookrelay.Delivery) ([]deliveryRow, error) {
	rows := make([]deliveryRow, len(deliveries))
	for i, d := range deliveries {
		r, err := s.encodeDelivery(d)
		if err != nil {
			// A prefix only: the ID may be what was refused.
			return nil, fmt.Errorf("hooksql: create deliveries[%d] (id %s): %w", i, errtext.QuoteN(d.ID, 40), err)
		}
		rows[i] = r
	}
	return rows, nil
}

// insertChunkRows and insertChunkBytes bound one INSERT statement: under
// every dialect's parameter limit and MySQL's default packet size.
const (
	insertChunkRows  = 500
	insertChunkBytes = 4 << 20
)

// insertDeliveries inserts the rows that are new, in ID order (so two
// concurrent batches lock in the same order), many rows per statement.
func (s *Store) insertDeliveries(ctx context.Context, q querier, ds []hookrelay.Delivery, rows []deliveryRow) ([]bool, error) {
	created := make([]bool, len(ds))
	first, order := firstOccurrences(ds)
	for len(order) > 0 {
		n := chunkLen(ds, order)
		chunk := order[:n]
		order = order[n:]
		inserted, err := s.insertChunk(ctx, q, chunk, rows)
		if err != nil {
			return nil, err
		}
		for _, id := range inserted {
			if i, ok := first[id]; ok {
				created[i] = true
			}
		}
	}
	return created, nil
}

// firstOccurrences maps each ID of ds to the index of its first
// occurrence, and returns those indexes in ID order (so two concurrent
// batches lock in the same order).
func firstOccurrences(ds []hookrelay.Delivery) (map[string]int, []int) {
	first := make(map[string]int, len(ds))
	order := make([]int, 0, len(ds))
	for i, d := range ds {
		if _, dup := first[d.ID]; !dup {
			first[d.ID] = i
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(ds[a].ID, ds[b].ID) })
	return first, order
}

// chunkLen is how many of order's first rows one INSERT statement takes:
// at most insertChunkRows, and insertChunkBytes of payload unless the
// first row alone is larger.
func chunkLen(ds []hookrelay.Delivery, order []int) int {
	n, size := 0, 0
	for n < len(order) && n < insertChunkRows && (n == 0 || size+len(ds[order[n]].Payload) <= insertChunkBytes) {
		size += len(ds[order[n]].Payload)
		n++
	}
	return n
}

// insertChunk inserts rows[idx…] if absent and returns the IDs inserted.
func (s *Store) insertChunk(ctx context.Context, q querier, idx []int, rows []deliveryRow) ([]string, error) {
	returning, err := s.hasInsertReturning(ctx, q)
	if err != nil {
		return nil, err
	}
	if _, prepared := q.(*stmtQuerier); !returning || prepared {
		return s.insertOneByOne(ctx, q, idx, rows)
	}
	var b strings.Builder
	args := make([]any, 0, len(idx)*deliveryColCount)
	if s.dialect == MySQL {
		// IGNORE only skips duplicates here: every value was validated to
		// fit its column, so strict mode has nothing else to downgrade.
		b.WriteString("INSERT IGNORE INTO {d} (" + insertDeliveryCols + ") VALUES ")
	} else {
		b.WriteString("INSERT INTO {d} (" + insertDeliveryCols + ") VALUES ")
	}
	row := "(" + placeholders(deliveryColCount) + ")"
	for k, i := range idx {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
		args = append(args, rows[i]...)
	}
	if s.dialect != MySQL {
		b.WriteString(" ON CONFLICT (id) DO NOTHING")
	}
	b.WriteString(" RETURNING id")
	res, err := q.QueryContext(ctx, s.q(b.String()), args...)
	if err != nil && s.dialect == MySQL && isParseError(err) {
		// The server is not the MariaDB its version named (MySQL behind a
		// proxy, a failover): it refused the statement unparsed, which
		// leaves the transaction as it was, so the rows go one by one, now
		// and from here on.
		s.noInsertReturning()
		return s.insertOneByOne(ctx, q, idx, rows)
	}
	if err != nil {
		return nil, s.dbErr("create", err)
	}
	defer res.Close()
	var ids []string
	for res.Next() {
		var id string
		if err := res.Scan(&id); err != nil {
			return nil, s.dbErr("create", err)
		}
		ids = append(ids, id)
	}
	if err := res.Err(); err != nil {
		return nil, s.dbErr("create", err)
	}
	return ids, nil
}

// insertOneByOne is one statement per row, and the affected-row count says
// whether it was new. It is the path for MySQL, which has no INSERT …
// RETURNING, and for a Store made by OpenSQLite in its own transaction,
// which runs it as a statement prepared once (stmts.go): SQLite compiles a
// multi-row INSERT, whose text varies with the rows, on every enqueue.
func (s *Store) insertOneByOne(ctx context.Context, q querier, idx []int, rows []deliveryRow) ([]string, error) {
	var query string
	if s.dialect == MySQL {
		query = s.q("INSERT IGNORE INTO {d} (" + insertDeliveryCols + ") VALUES (" + placeholders(deliveryColCount) + ")")
	} else {
		query = s.qp("INSERT INTO {d} (" + insertDeliveryCols + ") VALUES (" + placeholders(deliveryColCount) + ") ON CONFLICT (id) DO NOTHING")
	}
	var ids []string
	for _, i := range idx {
		res, err := q.ExecContext(ctx, query, rows[i]...)
		if err != nil {
			return nil, s.dbErr("create", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, s.dbErr("create", err)
		} else if n > 0 {
			ids = append(ids, rows[i][0].(string))
		}
	}
	return ids, nil
}

// hasInsertReturning reports whether INSERT … RETURNING works: always on
// PostgreSQL and SQLite (3.35+), on MariaDB (10.5+) but not on MySQL. It
// asks through q, the caller's transaction: on a pool of one connection,
// which the transaction holds, a query on the pool would wait forever. A
// wrong answer from the version is corrected by insertChunk's first
// refused statement (noInsertReturning).
func (s *Store) hasInsertReturning(ctx context.Context, q querier) (bool, error) {
	if s.dialect != MySQL {
		return true, nil
	}
	s.returningMu.Lock()
	defer s.returningMu.Unlock()
	if !s.returningKnown {
		var v string
		if err := q.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
			return false, s.dbErr("server version", err)
		}
		s.returning = strings.Contains(strings.ToLower(v), "mariadb")
		s.returningKnown = true
	}
	return s.returning, nil
}

// noInsertReturning records that INSERT … RETURNING was refused, whatever
// the server's version said. It is not asked again: a server that does
// take RETURNING still takes the inserts without it.
func (s *Store) noInsertReturning() {
	s.returningMu.Lock()
	s.returningKnown, s.returning = true, false
	s.returningMu.Unlock()
}

// Get implements hookrelay.Ledger. A row that cannot be decoded is
// reported as a *DecodeError.
func (s *Store) Get(ctx context.Context, id string) (hookrelay.Delivery, error) {
	d, _, err := scanDelivery(s.db.QueryRowContext(ctx, s.q("SELECT "+selectDeliveryCols+" FROM {d} WHERE id = ?"), lookupID(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return hookrelay.Delivery{}, fmt.Errorf("hooksql: get %s: %w", errtext.Quote(id), hookrelay.ErrNotFound)
	}
	var de *DecodeError
	if errors.As(err, &de) {
		return hookrelay.Delivery{}, err
	}
	if err != nil {
		return hookrelay.Delivery{}, s.dbErr("get "+errtext.Quote(id), err)
	}
	return d, nil
}

// WasDelivered implements hookrelay.Ledger.
func (s *Store) WasDelivered(ctx context.Context, id string) (bool, error) {
	var state string
	err := s.db.QueryRowContext(ctx, s.q("SELECT state FROM {d} WHERE id = ?"), lookupID(id)).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.dbErr("was delivered "+errtext.Quote(id), err)
	}
	return state == string(hookrelay.StateDelivered), nil
}

// Attempts implements hookrelay.Ledger: the history in the order recorded,
// the attempts rows and then the attempt kept in the record's row (the one
// that delivered it, keepsInRow), which is always the last.
func (s *Store) Attempts(ctx context.Context, id string) ([]hookrelay.Attempt, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT delivery_id, number, started_at, finished_at, kind, outcome,
		reason, status_code, detail, next_attempt_at, 0 AS kept, seq FROM {a} WHERE delivery_id = ?
		UNION ALL SELECT id, delivering_attempt, delivering_started_at, delivering_finished_at, `+deliveredKind+`, last_outcome,
		last_reason, delivering_status_code, COALESCE(delivering_detail, ''), NULL, 1, 0 FROM {d}
		WHERE id = ? AND delivering_attempt IS NOT NULL ORDER BY 11, 12`), lookupID(id), lookupID(id))
	if err != nil {
		return nil, s.dbErr("attempts "+errtext.Quote(id), err)
	}
	defer rows.Close()
	var out []hookrelay.Attempt
	for rows.Next() {
		var (
			a                 hookrelay.Attempt
			started, finished int64
			kind              int
			outcome           string
			next              sql.NullInt64
			kept, seq         int64
		)
		if err := rows.Scan(&a.DeliveryID, &a.Number, &started, &finished, &kind, &outcome,
			&a.Reason, &a.StatusCode, &a.Detail, &next, &kept, &seq); err != nil {
			return nil, s.dbErr("attempts "+errtext.Quote(id), err)
		}
		a.StartedAt, a.FinishedAt, a.NextAttemptAt = decTime(started), decTime(finished), decNullTime(next)
		a.Kind, a.Outcome = hookrelay.Kind(kind), hookrelay.Outcome(outcome)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("attempts "+errtext.Quote(id), err)
	}
	if len(out) == 0 {
		if err := s.exists(ctx, id); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// deliveredKind is hookrelay.KindDelivered as SQL: the kind of the attempt
// a record keeps in its row.
var deliveredKind = strconv.Itoa(int(hookrelay.KindDelivered))

// exists returns nil if the delivery exists, an error wrapping ErrNotFound
// if it does not.
func (s *Store) exists(ctx context.Context, id string) error {
	var one int
	err := s.db.QueryRowContext(ctx, s.q("SELECT 1 FROM {d} WHERE id = ?"), lookupID(id)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("hooksql: delivery %s: %w", errtext.Quote(id), hookrelay.ErrNotFound)
	}
	return s.dbErr("get "+errtext.Quote(id), err)
}

// fence is what a ledger write checks, under a row lock, before it writes:
// the same rules as the memory store.
type fence struct {
	id      string
	lease   hookrelay.Lease
	attempt int // 0: any attempt
	// deliveredOK makes a write to a delivered record a no-op (MarkDelivered
	// again) instead of ErrInvalidState.
	deliveredOK bool
}

// errNoop tells a ledger write that the fence passed as a no-op.
var errNoop = errors.New("no-op")

// checkFence locks the delivery row and checks the caller's lease.
func (s *Store) checkFence(ctx context.Context, q querier, op string, f fence) error {
	var (
		state   string
		token   int64
		attempt int
		expires sql.NullInt64
	)
	err := q.QueryRowContext(ctx, s.qp("SELECT state, lease_token, attempt, lease_expires_at FROM {d} WHERE id = ?"+s.lockSuffix(false)), f.id).
		Scan(&state, &token, &attempt, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("hooksql: %s %s: %w", op, errtext.Quote(f.id), hookrelay.ErrNotFound)
	}
	if err != nil {
		return s.dbErr(op+" "+errtext.Quote(f.id), err)
	}
	return f.check(op, state, token, attempt, !expires.Valid)
}

// check applies the fence to the record's current values, with the rules
// of the contract table (docs/adapters.md) the memory store shares: a lease
// that is not the current one (or a zero token) is ErrLeaseLost; a record
// that is no longer pending is ErrInvalidState (errNoop for a delivered
// record when deliveredOK); a lease already ended (by Release or an
// earlier write: ended) or an attempt number that moved on is ErrLeaseLost.
// A lease that expired but was not claimed again still holds.
func (f fence) check(op, state string, token int64, attempt int, ended bool) error {
	switch {
	case token != f.lease.Token || f.lease.Token == 0:
		return fmt.Errorf("hooksql: %s %s: lease token %d is not the current one: %w", op, errtext.Quote(f.id), f.lease.Token, hookrelay.ErrLeaseLost)
	case state == string(hookrelay.StateDelivered) && f.deliveredOK:
		return errNoop
	case state != string(hookrelay.StatePending):
		return fmt.Errorf("hooksql: %s %s: record is %s: %w", op, errtext.Quote(f.id), state, hookrelay.ErrInvalidState)
	case ended:
		return fmt.Errorf("hooksql: %s %s: lease token %d was already ended: %w", op, errtext.Quote(f.id), f.lease.Token, hookrelay.ErrLeaseLost)
	case f.attempt != 0 && attempt != f.attempt:
		return fmt.Errorf("hooksql: %s %s: attempt %d is not the current attempt %d: %w", op, errtext.Quote(f.id), f.attempt, attempt, hookrelay.ErrLeaseLost)
	}
	return nil
}

const insertAttemptCols = "delivery_id, number, started_at, finished_at, kind, outcome, reason, status_code, detail, next_attempt_at"

// fencedOp is one ledger write: the fence it must pass, the record's SET
// clause with its values, and the attempt row to store (hasAttempt).
type fencedOp struct {
	// delivered marks MarkDelivered's write, which a PostgreSQL batch
	// writes for many rows at once: its SET values are mark's, typed, and
	// args is nil (setArgs).
	delivered  bool
	op         string
	f          fence
	hasAttempt bool
	// keep marks a MarkDelivered write that keeps its attempt in the
	// record's delivering_* columns (keepsInRow) instead of storing an
	// attempts row: hasAttempt is false, and the SET clause and setArgs
	// carry the attempt.
	keep    bool
	attempt attemptRow
	set     string
	args    []any
	// updated is MarkDelivered's updated_at; its last_outcome and
	// last_reason are its attempt's.
	updated int64
}

// setArgs returns the values of o's SET clause, in order.
func (o *fencedOp) setArgs() []any {
	a := &o.attempt
	if o.keep {
		return []any{a.outcome, a.reason, o.updated, a.number, a.started, a.finished, a.status, a.detail}
	}
	if o.delivered {
		return []any{a.outcome, a.reason, o.updated}
	}
	return o.args
}

// keepsInRow reports whether a MarkDelivered write's attempt is kept in
// the record's own row (schema version 10's delivering_* columns) rather
// than as an attempts row: when all it holds beyond those columns is what
// the row says anyway — it delivered (kind), scheduled nothing, and its
// outcome and reason are the row's last_outcome and last_reason
// (MarkDelivered sets them from it) — and it finished no later than the
// row's updated_at, so RecentOutcomes finds it through the index of
// delivered rows by updated_at. The worker's writes always qualify; a
// caller's MarkDelivered with another kind of attempt stores an attempts
// row as before. Readers take both (Attempts, RecentOutcomes, compaction).
func (a *attemptRow) keepsInRow(updated int64) bool {
	return a.kind == int(hookrelay.KindDelivered) && a.next == zeroTime && a.finished <= updated
}

// deliveringSet is the SET clause of a MarkDelivered write that keeps its
// attempt in the row, after markDeliveredSet; its values follow
// markDeliveredSet's in setArgs.
const deliveringSet = ", delivering_attempt = ?, delivering_started_at = ?, delivering_finished_at = ?," +
	" delivering_status_code = ?, delivering_detail = ?"

// attemptRow is an attempt's row in the attempts table, encoded.
type attemptRow struct {
	id                string
	number            int
	started, finished int64
	kind              int
	outcome, reason   string
	status            int
	detail            string
	next              int64 // zeroTime: none (stored as NULL)
}

// args returns the row's values in insertAttemptCols order.
func (a *attemptRow) args() []any {
	var next any
	if a.next != zeroTime {
		next = a.next
	}
	return []any{a.id, a.number, a.started, a.finished, a.kind, a.outcome, a.reason, a.status, a.detail, next}
}

// fencedWrite runs one ledger write in a transaction of its own.
func (s *Store) fencedWrite(ctx context.Context, o fencedOp) error {
	if s.dialect == Postgres {
		// The plan settings and the write as one pipeline (one round trip,
		// one implicit transaction), or one transaction on another driver.
		query, args := s.fencedQueryPostgres(o)
		var r fenceRead
		err := s.rowWithSettings(ctx, pgWriteSettings, o.op+" "+o.f.id, query, args, query, args,
			&r.state, &r.token, &r.attempt, &r.ended, &r.written)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// err is nil or no such record here.
		return s.rejudge(ctx, o, s.judgePostgres(o, r, err))
	}
	return s.inTx(ctx, o.op, func(q querier) error { return s.applyFenced(ctx, q, o) })
}

// applyFenced checks the fence, updates the record and stores the attempt
// inside the caller's transaction.
func (s *Store) applyFenced(ctx context.Context, q querier, o fencedOp) error {
	if err := s.checkFence(ctx, q, o.op, o.f); err == errNoop {
		return nil
	} else if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, s.qp("UPDATE {d} SET "+o.set+" WHERE id = ?"), append(slices.Clone(o.setArgs()), o.f.id)...); err != nil {
		return s.dbErr(o.op+" "+errtext.Quote(o.f.id), err)
	}
	if o.hasAttempt {
		if _, err := q.ExecContext(ctx, s.qp("INSERT INTO {a} ("+insertAttemptCols+") VALUES (?,?,?,?,?,?,?,?,?,?)"), o.attempt.args()...); err != nil {
			return s.dbErr(o.op+" "+errtext.Quote(o.f.id)+": attempt", err)
		}
	}
	return nil
}

// fencedQueryPostgres is a ledger write in one statement, so one round
// trip instead of five: upd writes only if the fence holds, checked on the
// row it updates (under READ COMMITTED PostgreSQL checks it again on the
// row's newest version when a concurrent write changed the row, so no row
// lock is taken beforehand), ins stores the attempt only if upd wrote, and
// the row's values in the statement's snapshot say why a write was refused
// (judgePostgres).
func (s *Store) fencedQueryPostgres(o fencedOp) (string, []any) {
	f := o.f
	args := append(slices.Clone(o.setArgs()), f.id, f.lease.Token, f.attempt, f.attempt)
	query := "WITH upd AS (UPDATE {d} SET " + o.set + " WHERE id = ? AND lease_token = CAST(? AS BIGINT)" +
		" AND lease_token <> 0 AND (state = 'pending') IS TRUE AND lease_expires_at IS NOT NULL" +
		" AND (CAST(? AS INTEGER) = 0 OR attempt = CAST(? AS INTEGER)) RETURNING id)"
	if o.hasAttempt {
		// Parameters in a SELECT list have no type to infer: cast each.
		query += ", ins AS (INSERT INTO {a} (" + insertAttemptCols + ") SELECT CAST(? AS TEXT), CAST(? AS INTEGER)," +
			" CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS INTEGER), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS INTEGER)," +
			" CAST(? AS TEXT), CAST(? AS BIGINT) FROM upd)"
		args = append(args, o.attempt.args()...)
	}
	query += " SELECT state, lease_token, attempt, lease_expires_at IS NULL, (SELECT COUNT(*) FROM upd) FROM {d} WHERE id = ?"
	args = append(args, f.id)
	return s.q(query), args
}

// fenceRead is what fencedQueryPostgres returns.
type fenceRead struct {
	state   string
	token   int64
	attempt int
	ended   bool // the lease was already ended
	written int64
}

// judgePostgres turns fencedQueryPostgres's answer (or its scan error)
// into the write's result.
func (s *Store) judgePostgres(o fencedOp, r fenceRead, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("hooksql: %s %s: %w", o.op, errtext.Quote(o.f.id), hookrelay.ErrNotFound)
	}
	if err != nil {
		return s.dbErr(o.op+" "+errtext.Quote(o.f.id), err)
	}
	if r.written == 1 {
		return nil
	}
	switch err := o.f.check(o.op, r.state, r.token, r.attempt, r.ended); err {
	case errNoop:
		return nil
	case nil:
		// The fence held in the statement's snapshot, yet the update,
		// checking it again on the row's newest version, wrote nothing:
		// a write committed meanwhile changed the row. Not written;
		// rejudge reads the row again to say why.
		return &changedErr{fmt.Errorf("hooksql: %s %s: the record changed concurrently: %w", o.op, errtext.Quote(o.f.id), hookrelay.ErrLeaseLost)}
	default:
		return err
	}
}

// changedErr is judgePostgres's answer for a write refused by a concurrent
// change its snapshot did not show. It wraps ErrLeaseLost: not written.
type changedErr struct{ err error }

func (e *changedErr) Error() string { return e.err.Error() }
func (e *changedErr) Unwrap() error { return e.err }

// rejudge turns a changedErr (any other err is returned as it is) into the
// answer the fence gives on the row as it is now (checkFence, after the
// refusing write committed): ErrNotFound, ErrInvalidState, nil for
// MarkDelivered on a record its own lease delivered meanwhile, or
// ErrLeaseLost. If the read fails, or the fence would hold again (it
// cannot: a token once replaced or ended does not become current again),
// it stays ErrLeaseLost: the write was not made.
func (s *Store) rejudge(ctx context.Context, o fencedOp, err error) error {
	var ce *changedErr
	if !errors.As(err, &ce) {
		return err
	}
	switch cerr := s.checkFence(ctx, s.db, o.op, o.f); {
	case cerr == errNoop:
		return nil
	case errors.Is(cerr, hookrelay.ErrNotFound), errors.Is(cerr, hookrelay.ErrInvalidState), errors.Is(cerr, hookrelay.ErrLeaseLost):
		return cerr
	}
	return ce.err
}

func encodeAttempt(id string, a hookrelay.Attempt) (attemptRow, error) {
	started, err := encTime("Attempt.StartedAt", a.StartedAt)
	if err != nil {
		return attemptRow{}, err
	}
	finished, err := encTime("Attempt.FinishedAt", a.FinishedAt)
	if err != nil {
		return attemptRow{}, err
	}
	next, err := encTime("Attempt.NextAttemptAt", a.NextAttemptAt) // zero: zeroTime, stored as NULL
	if err != nil {
		return attemptRow{}, err
	}
	return attemptRow{id: id, number: a.Number, started: started, finished: finished, kind: int(a.Kind),
		outcome: cleanText(string(a.Outcome)), reason: hookrelay.StorableText(a.Reason), status: a.StatusCode,
		detail: hookrelay.StorableText(a.Detail), next: next}, nil
}

// MarkDelivered implements hookrelay.Ledger. Marking a delivered record
// again (with its lease) is a no-op.
func (s *Store) MarkDelivered(ctx context.Context, p hookrelay.MarkDeliveredParams) error {
	o, err := markDeliveredOp(p)
	if err != nil {
		return err
	}
	return s.fencedWrite(ctx, o)
}

// markDeliveredSet is MarkDelivered's SET clause; its values are its
// attempt's outcome and reason and the write's time (setArgs).
const markDeliveredSet = "state = 'delivered', last_outcome = ?, last_reason = ?, updated_at = ?, lease_expires_at = NULL"

func markDeliveredOp(p hookrelay.MarkDeliveredParams) (fencedOp, error) {
	now, err := encTime("Now", p.Now)
	if err != nil {
		return fencedOp{}, err
	}
	o, err := attemptOp("mark delivered", fence{id: p.ID, lease: p.Lease, attempt: p.Attempt.Number, deliveredOK: true}, &p.Attempt,
		markDeliveredSet)
	if err != nil {
		return fencedOp{}, err
	}
	o.delivered = true
	o.updated = now
	if o.attempt.keepsInRow(now) {
		o.keep, o.hasAttempt = true, false
		o.set = markDeliveredSet + deliveringSet // constant: no string built per write
	}
	return o, nil
}

// attemptOp builds a fencedOp that stores attempt (when not nil).
func attemptOp(op string, f fence, attempt *hookrelay.Attempt, set string, args ...any) (fencedOp, error) {
	o := fencedOp{op: op, f: f, set: set, args: args}
	if attempt != nil {
		var err error
		if o.attempt, err = encodeAttempt(f.id, *attempt); err != nil {
			return fencedOp{}, fmt.Errorf("hooksql: %s %s: %w", op, errtext.Quote(f.id), err)
		}
		o.hasAttempt = true
	}
	return o, nil
}

// RecordRetry implements hookrelay.Ledger. Like MarkDelivered and
// RecordDeadLetter it also ends the writer's lease in the same write: the row
// is the queue entry, so the retry is claimable at its time even if the
// process dies before RetryAt, and the queue transition that follows is a
// read rather than a second commit. On PostgreSQL the retry is then
// announced to listening workers (ListenDue), as RecordBatch announces the
// retries of a batch: the worker records through RecordBatch, Client.Process
// through this.
func (s *Store) RecordRetry(ctx context.Context, p hookrelay.RecordRetryParams) error {
	o, err := recordRetryOp(p)
	if err != nil {
		return err
	}
	if err := s.fencedWrite(ctx, o); err != nil {
		return err
	}
	// After the commit, in a statement of its own: the retry is recorded
	// whether or not the announcement goes out, and a lost announcement
	// costs a listening worker latency (it polls), never the delivery.
	_ = s.notifyDue(ctx, s.db, p.NextAttemptAt)
	return nil
}

func recordRetryOp(p hookrelay.RecordRetryParams) (fencedOp, error) {
	now, err := encTime("Now", p.Now)
	if err != nil {
		return fencedOp{}, err
	}
	at, err := encTime("NextAttemptAt", p.NextAttemptAt)
	if err != nil {
		return fencedOp{}, err
	}
	return attemptOp("record retry", fence{id: p.ID, lease: p.Lease, attempt: p.Attempt.Number}, &p.Attempt,
		"attempt = ?, next_attempt_at = ?, last_outcome = ?, last_reason = ?, updated_at = ?, lease_expires_at = NULL",
		p.NextAttempt, at, cleanText(string(p.Attempt.Outcome)), hookrelay.StorableText(p.Attempt.Reason), now)
}

// RecordDeadLetter implements hookrelay.Ledger.
func (s *Store) RecordDeadLetter(ctx context.Context, p hookrelay.RecordDeadLetterParams) error {
	o, err := recordDeadLetterOp(p)
	if err != nil {
		return err
	}
	return s.fencedWrite(ctx, o)
}

func recordDeadLetterOp(p hookrelay.RecordDeadLetterParams) (fencedOp, error) {
	now, err := encTime("Now", p.Now)
	if err != nil {
		return fencedOp{}, err
	}
	f := fence{id: p.ID, lease: p.Lease}
	if p.Attempt == nil {
		return attemptOp("record dead letter", f, nil,
			"state = 'dead', last_reason = ?, updated_at = ?, dead_lettered_at = ?, lease_expires_at = NULL",
			hookrelay.StorableText(p.Reason), now, now)
	}
	f.attempt = p.Attempt.Number
	return attemptOp("record dead letter", f, p.Attempt,
		"state = 'dead', last_outcome = ?, last_reason = ?, updated_at = ?, dead_lettered_at = ?, lease_expires_at = NULL",
		cleanText(string(p.Attempt.Outcome)), hookrelay.StorableText(p.Reason), now, now)
}
