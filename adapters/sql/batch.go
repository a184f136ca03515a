package hooksql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookrelay/hookrelay"
)

var _ hookrelay.BatchLedger = (*Store)(nil)

// RecordBatch implements hookrelay.BatchLedger: the writes commit together,
// one fsync on SQLite and one WAL flush on PostgreSQL for the whole batch,
// each still fenced by its own lease. On PostgreSQL the batch is one round
// trip: every write's fenced statement is pipelined in one implicit
// transaction. Elsewhere it is one transaction of per-write statements. A
// write whose fence fails gets its error in the returned slice and the
// others still commit; a failed commit returns the error and writes
// nothing.
func (s *Store) RecordBatch(ctx context.Context, writes []hookrelay.LedgerWrite) ([]error, error) {
	errs := make([]error, len(writes))
	ops := make([]*fencedOp, len(writes))
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
		ops[i] = &o
	}
	due := earliestRetry(writes, errs)
	var err error
	for range maxTxTries {
		if s.dialect == Postgres {
			err = s.recordBatchPipeline(ctx, ops, errs, due)
		} else {
			err = s.inTx(ctx, "record batch", func(q querier) error {
				for i, o := range ops {
					if o == nil {
						continue
					}
					errs[i] = s.applyFenced(ctx, q, *o)
					if errs[i] != nil && !isFenceErr(errs[i]) {
						return errs[i]
					}
				}
				return nil
			})
		}
		var re *retryable
		if !errors.As(err, &re) {
			break
		}
		err = re.err
	}
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

// recordBatchPipeline sends every write's fenced statement (and the
// announcement of the earliest retry) in one pipeline, which PostgreSQL
// runs as one implicit transaction: one round trip and one commit. It
// fills errs for the writes their fence refused. The batch committed only
// when the pipeline's end (Close) reports no error.
func (s *Store) recordBatchPipeline(ctx context.Context, ops []*fencedOp, errs []error, due time.Time) error {
	err := s.withPgxConn(ctx, "record batch", func(c *pgx.Conn) error {
		b := &pgx.Batch{}
		for _, o := range ops {
			if o != nil {
				query, args := s.fencedQueryPostgres(*o)
				b.Queue(query, args...)
			}
		}
		if !due.IsZero() {
			b.Queue("SELECT pg_notify($1, $2)", s.dueChannel(), duePayload(due))
		}
		br := c.SendBatch(ctx, b)
		for i, o := range ops {
			if o == nil {
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
		return s.inTx(ctx, "record batch", func(q querier) error {
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
	return err
}
