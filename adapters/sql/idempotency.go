package hooksql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hookrelay/hookrelay/adapters/http/recipient"
	"github.com/hookrelay/hookrelay/internal/errtext"
)

// IdempotencyStore is the recipient kit's recipient.IdempotencyStore on the
// Store's database: one row per webhook-id in the idempotency table, whose
// primary key is the uniqueness constraint that lets exactly one of several
// concurrent requests with the same webhook-id run the handler, across
// processes. It is safe for concurrent use. Get one with
// Store.IdempotencyStore; Migrate creates its table.
type IdempotencyStore struct {
	s *Store

	// purgeBatch, when positive, replaces idemPurgeBatch; purgeCommitted
	// is called after each of Purge's batches commits. Tests set them.
	purgeBatch     int
	purgeCommitted func(removed int64)
}

var _ recipient.IdempotencyStore = (*IdempotencyStore)(nil)

// IdempotencyStore returns the recipient idempotency store on this Store's
// database and table prefix.
func (s *Store) IdempotencyStore() *IdempotencyStore { return &IdempotencyStore{s: s} }

const (
	idemInProgress = "in_progress"
	idemCompleted  = "completed"
)

func newIdemToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

func checkIdemKey(key string) error {
	if err := checkString("Key", key, true); err != nil {
		return fmt.Errorf("hooksql: idempotency key: %w", err)
	}
	return nil
}

// Begin implements recipient.IdempotencyStore: an INSERT that does nothing
// on conflict; if the key existed, the record is read and either replayed
// (completed), reported in progress, or taken over with a new token by an
// UPDATE guarded by the old token when it has been in progress for
// StaleAfter. Each statement is atomic on its own, so no row lock is held
// between them (holding one deadlocks concurrent Begins on InnoDB); a
// record that changed in between is read again.
func (i *IdempotencyStore) Begin(ctx context.Context, p recipient.BeginParams) (recipient.BeginResult, error) {
	s := i.s
	if err := checkIdemKey(p.Key); err != nil {
		return recipient.BeginResult{}, err
	}
	now, err := encTime("Now", p.Now)
	if err != nil {
		return recipient.BeginResult{}, err
	}
	var hash any
	if len(p.BodyHash) > 0 {
		hash = p.BodyHash
	}
	insert := "INSERT INTO {i} (idem_key, state, token, started_at, status, header, body_hash) VALUES (?, ?, ?, ?, 0, '', ?) ON CONFLICT (idem_key) DO NOTHING"
	if s.dialect == MySQL {
		insert = "INSERT IGNORE INTO {i} (idem_key, state, token, started_at, status, header, body_hash) VALUES (?, ?, ?, ?, 0, '', ?)"
	}
	for range 5 {
		token := newIdemToken()
		r, err := s.db.ExecContext(ctx, s.q(insert), p.Key, idemInProgress, token, now, hash)
		if err != nil {
			return recipient.BeginResult{}, s.dbErr("idempotency begin", err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return recipient.BeginResult{}, s.dbErr("idempotency begin", err)
		} else if n == 1 {
			return recipient.BeginResult{State: recipient.StateStarted, Token: token}, nil
		}
		var (
			state, old, header string
			started            int64
			status             int
			body, bodyHash     []byte
			bodyNull           int
		)
		err = s.db.QueryRowContext(ctx, s.q("SELECT state, token, started_at, status, header, body, CASE WHEN body IS NULL THEN 1 ELSE 0 END, body_hash FROM {i} WHERE idem_key = ?"), p.Key).
			Scan(&state, &old, &started, &status, &header, &body, &bodyNull, &bodyHash)
		if errors.Is(err, sql.ErrNoRows) {
			continue // abandoned meanwhile: insert again
		}
		if err != nil {
			return recipient.BeginResult{}, s.dbErr("idempotency begin", err)
		}
		switch {
		case state == idemCompleted:
			resp := recipient.StoredResponse{Status: status, Body: body}
			if bodyNull == 0 && resp.Body == nil {
				resp.Body = []byte{}
			}
			if err := json.Unmarshal([]byte(header), &resp.Header); err != nil {
				return recipient.BeginResult{}, fmt.Errorf("hooksql: idempotency record %s: stored header is not valid JSON", errtext.Quote(p.Key))
			}
			return recipient.BeginResult{State: recipient.StateCompleted, Response: resp, BodyHash: bodyHash}, nil
		case p.Now.Before(decTime(started).Add(p.StaleAfter)):
			return recipient.BeginResult{State: recipient.StateInProgress, BodyHash: bodyHash}, nil
		}
		// Presumed abandoned by a crashed process: take it over, unless
		// another request took it, or it completed, first.
		r, err = s.db.ExecContext(ctx, s.q("UPDATE {i} SET token = ?, started_at = ?, body_hash = ? WHERE idem_key = ? AND token = ? AND state = ?"),
			token, now, hash, p.Key, old, idemInProgress)
		if err != nil {
			return recipient.BeginResult{}, s.dbErr("idempotency begin", err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return recipient.BeginResult{}, s.dbErr("idempotency begin", err)
		} else if n == 1 {
			return recipient.BeginResult{State: recipient.StateStarted, Token: token}, nil
		}
	}
	return recipient.BeginResult{}, fmt.Errorf("%w: idempotency begin %s: the record kept changing; try again", ErrDatabase, errtext.Quote(p.Key))
}

// Complete implements recipient.IdempotencyStore.
func (i *IdempotencyStore) Complete(ctx context.Context, p recipient.CompleteParams) error {
	s := i.s
	now, err := encTime("Now", p.Now)
	if err != nil {
		return err
	}
	header, err := json.Marshal(p.Response.Header)
	if err != nil {
		return fmt.Errorf("hooksql: idempotency complete %s: cannot encode the response header", errtext.Quote(p.Key))
	}
	var body any
	if p.Response.Body != nil {
		body = p.Response.Body
	}
	r, err := s.db.ExecContext(ctx, s.q("UPDATE {i} SET state = ?, completed_at = ?, status = ?, header = ?, body = ?"+
		" WHERE idem_key = ? AND token = ? AND state = ?"), idemCompleted, now, p.Response.Status, string(header), body, p.Key, p.Token, idemInProgress)
	return i.heldOrLost(r, err, "idempotency complete")
}

// Abandon implements recipient.IdempotencyStore.
func (i *IdempotencyStore) Abandon(ctx context.Context, p recipient.AbandonParams) error {
	r, err := i.s.db.ExecContext(ctx, i.s.q("DELETE FROM {i} WHERE idem_key = ? AND token = ? AND state = ?"), p.Key, p.Token, idemInProgress)
	return i.heldOrLost(r, err, "idempotency abandon")
}

// heldOrLost maps a guarded write's result: no row means the caller's token
// no longer holds the record. Both writes change the row they match, so
// MySQL's changed-rows count is exact here.
func (i *IdempotencyStore) heldOrLost(r sql.Result, err error, op string) error {
	if err != nil {
		return i.s.dbErr(op, err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return i.s.dbErr(op, err)
	}
	if n == 0 {
		return recipient.ErrRecordLost
	}
	return nil
}

// idemPurgeBatch is how many records, in key order, one of Purge's
// statements looks at: at most this many are deleted per transaction.
const idemPurgeBatch = 5000

// Purge deletes the records completed before before and returns how many
// it deleted. Keep records longer than the sender's whole retry and
// redrive horizon, or a late repeat runs the handler again. A record in
// progress, its handler still running, is never deleted, however old: it
// is completed, abandoned or taken over once stale by Begin.
//
// Purge walks the table in key order, a batch of up to 5000 records at a
// time, each batch's DELETE committed on its own, so a large backlog is
// never one long transaction holding its locks and growing the WAL or
// undo log; records that are not removed are only looked at. It checks
// ctx between batches. On an error or a cancellation part way it returns,
// with the error, how many records the batches before it deleted: those
// are gone, and the next Purge carries on with the rest.
func (i *IdempotencyStore) Purge(ctx context.Context, before time.Time) (int64, error) {
	s := i.s
	b, err := encTime("before", before)
	if err != nil {
		return 0, err
	}
	batch := idemPurgeBatch
	if i.purgeBatch > 0 {
		batch = i.purgeBatch
	}
	var (
		total int64
		from  *string // the last batch's last key; nil before the first
	)
	for {
		if err := ctx.Err(); err != nil {
			return total, s.dbErr("idempotency purge", err)
		}
		// The batch is the keys after from up to the batch-th; the last
		// batch has no upper end.
		where, args := "", []any{}
		if from != nil {
			where, args = " WHERE idem_key > ?", []any{*from}
		}
		var to string
		err := s.db.QueryRowContext(ctx, s.q("SELECT idem_key FROM {i}"+where+" ORDER BY idem_key LIMIT 1 OFFSET ?"),
			append(args, batch-1)...).Scan(&to)
		last := errors.Is(err, sql.ErrNoRows)
		if err != nil && !last {
			return total, s.dbErr("idempotency purge", err)
		}
		del := "DELETE FROM {i} WHERE state = ? AND completed_at < ?"
		dargs := []any{idemCompleted, b}
		if from != nil {
			del += " AND idem_key > ?"
			dargs = append(dargs, *from)
		}
		if !last {
			del += " AND idem_key <= ?"
			dargs = append(dargs, to)
		}
		r, err := s.db.ExecContext(ctx, s.q(del), dargs...)
		if err != nil {
			return total, s.dbErr("idempotency purge", err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return total, s.dbErr("idempotency purge", err)
		}
		total += n
		if i.purgeCommitted != nil {
			i.purgeCommitted(n)
		}
		if last {
			return total, nil
		}
		from = &to
	}
}
