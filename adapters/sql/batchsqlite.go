package hooksql

import (
	"context"
	"slices"

	"github.com/hookrelay/hookrelay/internal/errtext"
)

// recordBatchSQLite is RecordBatch's transaction on SQLite: per write, the
// update with the write's fence in its WHERE clause (the conditions of
// fence.check) and, if it wrote, the attempt — two statements instead of a
// read, an update and an insert. A write not made is judged on its row as
// the single write judges it (checkFence), inside the same transaction, so
// its error is the one it would get alone. It fills errs for every write.
//
// (One statement for all the attempts, their values in a JSON array read
// with json_each, cost more than these single-row inserts, each prepared
// once: measured, the batch took about a quarter more CPU.)
func (s *Store) recordBatchSQLite(ctx context.Context, q querier, ops []*fencedOp, errs []error) error {
	for i, o := range ops {
		if o == nil {
			continue
		}
		f := o.f
		res, err := q.ExecContext(ctx, s.qp("UPDATE {d} SET "+o.set+" WHERE id = ? AND lease_token = ? AND lease_token <> 0"+
			" AND state = 'pending' AND lease_expires_at IS NOT NULL AND (? = 0 OR attempt = ?)"),
			append(slices.Clone(o.setArgs()), f.id, f.lease.Token, f.attempt, f.attempt)...)
		if err != nil {
			return s.dbErr(o.op+" "+errtext.Quote(f.id), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return s.dbErr(o.op+" "+errtext.Quote(f.id), err)
		}
		if n > 0 {
			errs[i] = nil
			if o.hasAttempt {
				if _, err := q.ExecContext(ctx, s.qp("INSERT INTO {a} ("+insertAttemptCols+") VALUES (?,?,?,?,?,?,?,?,?,?)"), o.attempt.args()...); err != nil {
					return s.dbErr(o.op+" "+errtext.Quote(f.id)+": attempt", err)
				}
			}
			continue
		}
		switch err := s.checkFence(ctx, q, o.op, f); {
		case err == errNoop:
			errs[i] = nil
		case err == nil:
			// The fence holds, so the update should have written: write
			// it the single write's way.
			errs[i] = s.applyFenced(ctx, q, *o)
		default:
			errs[i] = err
		}
		if errs[i] != nil && !isFenceErr(errs[i]) {
			return errs[i]
		}
	}
	return nil
}
