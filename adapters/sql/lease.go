package hooksql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/errtext"
)

var _ hookrelay.LeaseLedger = (*Store)(nil)

// AcquireLease implements hookrelay.LeaseLedger for broker queues: it leases
// one delivery exactly as Claim would, under a row lock, and returns the
// stored record (authoritative over the message's copy) with a fencing
// token one greater than the delivery's previous one. It refuses with
// ErrNotFound, ErrInvalidState (delivered or dead), ErrLeaseLost (another
// holder's lease is live) or a *hookrelay.NotDueError with the due time.
func (s *Store) AcquireLease(ctx context.Context, p hookrelay.AcquireLeaseParams) (hookrelay.Claim, error) {
	if s.dialect == Postgres {
		// Its input is checked there, as each entry of a batch's.
		claims, errs, err := s.acquireLeasesPostgres(ctx, []hookrelay.AcquireLeaseParams{p}, "acquire lease "+errtext.Quote(p.ID))
		if err != nil {
			return hookrelay.Claim{}, err
		}
		return claims[0], errs[0]
	}
	now, expires, err := leaseTimes(p)
	if err != nil {
		return hookrelay.Claim{}, err
	}
	var claim hookrelay.Claim
	err = s.inTx(ctx, "acquire lease", func(q querier) error {
		var err error
		claim, err = s.acquireLeaseIn(ctx, q, p, now, expires)
		return err
	})
	return claim, err
}

var _ hookrelay.LeaseBatchLedger = (*Store)(nil)

// AcquireLeases implements hookrelay.LeaseBatchLedger: every entry judged
// and leased as AcquireLease would, in one transaction. On PostgreSQL
// through pgx that is one round trip (one pipeline of the plan settings and
// one statement per entry) and one commit, where a broker queue leasing a
// fetch's messages one by one paid both per message.
func (s *Store) AcquireLeases(ctx context.Context, params []hookrelay.AcquireLeaseParams) ([]hookrelay.Claim, []error, error) {
	if s.dialect == Postgres {
		return s.acquireLeasesPostgres(ctx, params, "acquire leases")
	}
	claims, errs := make([]hookrelay.Claim, len(params)), make([]error, len(params))
	err := s.inTx(ctx, "acquire leases", func(q querier) error {
		for i, p := range params {
			now, expires, err := leaseTimes(p)
			if err != nil {
				errs[i] = err // this entry's input: the others go on
				continue
			}
			claims[i], err = s.acquireLeaseIn(ctx, q, p, now, expires)
			if err != nil && !leaseRefused(err) {
				return err
			}
			errs[i] = err
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return claims, errs, nil
}

// leaseTimes are a lease's start and end, encoded, or why p cannot lease.
func leaseTimes(p hookrelay.AcquireLeaseParams) (now, expires int64, err error) {
	if p.LeaseFor <= 0 {
		return 0, 0, errors.New("hooksql: acquire lease: LeaseFor must be positive")
	}
	if now, err = encTime("Now", p.Now); err != nil {
		return 0, 0, err
	}
	expires, err = encTime("lease expiry", p.Now.Add(p.LeaseFor))
	return now, expires, err
}

// leaseRefused reports an AcquireLease error that is the answer for its
// record (its state, or a row this library cannot read), not a failure of
// the store: a batch goes on past it.
func leaseRefused(err error) bool {
	var de *DecodeError
	return errors.Is(err, hookrelay.ErrNotFound) || errors.Is(err, hookrelay.ErrInvalidState) ||
		errors.Is(err, hookrelay.ErrLeaseLost) || errors.Is(err, hookrelay.ErrNotDue) || errors.As(err, &de)
}

// acquireLeaseIn is AcquireLease on SQLite and MySQL, in the caller's
// transaction: a locking read, then the update when it may run.
func (s *Store) acquireLeaseIn(ctx context.Context, q querier, p hookrelay.AcquireLeaseParams, now, expires int64) (hookrelay.Claim, error) {
	var leaseExpires sql.NullInt64
	d, token, err := scanDelivery(q.QueryRowContext(ctx, s.q("SELECT "+selectDeliveryCols+", lease_expires_at FROM {d} WHERE id = ?"+s.lockSuffix(false)), lookupID(p.ID)), &leaseExpires)
	var de *DecodeError
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return hookrelay.Claim{}, fmt.Errorf("hooksql: acquire lease %s: %w", errtext.Quote(p.ID), hookrelay.ErrNotFound)
	case errors.As(err, &de):
		return hookrelay.Claim{}, err
	case err != nil:
		return hookrelay.Claim{}, s.dbErr("acquire lease "+errtext.Quote(p.ID), err)
	}
	if err := refusal(p, d, leaseExpires, now); err != nil {
		return hookrelay.Claim{}, err
	}
	if _, err := q.ExecContext(ctx, s.q("UPDATE {d} SET lease_token = lease_token + 1, lease_holder = ?, lease_expires_at = ?, touched_at = ? WHERE id = ?"),
		p.Holder, expires, now, p.ID); err != nil {
		return hookrelay.Claim{}, s.dbErr("acquire lease "+errtext.Quote(p.ID), err)
	}
	return hookrelay.Claim{Delivery: d, Lease: hookrelay.Lease{Token: token + 1, Holder: p.Holder, ExpiresAt: decTime(expires)}}, nil
}

// refusal is why the record d (with its lease's expiry) may not be leased
// at now, or nil when it may.
func refusal(p hookrelay.AcquireLeaseParams, d hookrelay.Delivery, leaseExpires sql.NullInt64, now int64) error {
	switch {
	case d.State != hookrelay.StatePending:
		return fmt.Errorf("hooksql: acquire lease %s: delivery is %s: %w", errtext.Quote(p.ID), d.State, hookrelay.ErrInvalidState)
	case leaseExpires.Valid && leaseExpires.Int64 > now:
		return fmt.Errorf("hooksql: acquire lease %s: another holder's lease is live: %w", errtext.Quote(p.ID), hookrelay.ErrLeaseLost)
	case d.NextAttemptAt.After(p.Now):
		return &hookrelay.NotDueError{ID: p.ID, At: d.NextAttemptAt}
	}
	return nil
}

// acquireLeasesPostgres is AcquireLease (and AcquireLeases) on PostgreSQL:
// per entry one statement that locks the record, leases it when it may run
// (pending, no live lease, due), and returns the record as it was with
// whether it leased it, all under the write's plan settings in one
// transaction. Through pgx that is one round trip (rowsWithSettings), where
// a transaction of a locking read and an update took four per lease
// (begin, read, update, commit): 589 / 624 / 607 → 358 / 379 / 430 µs per
// lease in BenchmarkAcquireLease (three alternated runs; most of what is
// left is the commit's flush). The plan settings also keep the lookup by
// key on a table planned while it was young. An entry not leased is
// judged from the record as the read did before.
func (s *Store) acquireLeasesPostgres(ctx context.Context, params []hookrelay.AcquireLeaseParams, op string) ([]hookrelay.Claim, []error, error) {
	query := s.q("WITH cur AS (SELECT " + selectDeliveryCols + ", lease_expires_at FROM {d} WHERE id = ?" + s.lockSuffix(false) + ")," +
		" upd AS (UPDATE {d} SET lease_token = lease_token + 1, lease_holder = ?, lease_expires_at = ?, touched_at = ?" +
		" WHERE id = ? AND EXISTS (SELECT 1 FROM cur WHERE state = 'pending'" +
		" AND (lease_expires_at IS NULL OR lease_expires_at <= ?) AND next_attempt_at <= ?) RETURNING 1)" +
		" SELECT cur.*, EXISTS (SELECT 1 FROM upd) FROM cur")
	claims, errs := make([]hookrelay.Claim, len(params)), make([]error, len(params))
	type entry struct {
		i            int
		now, expires int64
		leased       bool
	}
	entries := make([]entry, 0, len(params))
	stmts := make([]stmtArgs, 0, len(params))
	for i, p := range params {
		now, expires, err := leaseTimes(p)
		if err != nil {
			errs[i] = err
			continue
		}
		entries = append(entries, entry{i: i, now: now, expires: expires})
		stmts = append(stmts, stmtArgs{query: query, args: []any{lookupID(p.ID), p.Holder, expires, now, lookupID(p.ID), now, now}})
	}
	// read judges one entry's row; it fails only for a store failure.
	read := func(k int, r scanner) error {
		e := &entries[k]
		p := params[e.i]
		var leaseExpires sql.NullInt64
		d, token, err := scanDelivery(r, &leaseExpires, &e.leased)
		var de *DecodeError
		switch {
		case errors.Is(err, sql.ErrNoRows):
			errs[e.i] = fmt.Errorf("hooksql: acquire lease %s: %w", errtext.Quote(p.ID), hookrelay.ErrNotFound)
		case errors.As(err, &de):
			errs[e.i] = err
		case err != nil:
			// The server failed this statement, which aborts the
			// transaction: no entry of the batch is leased.
			return s.dbErr(op, err)
		case e.leased:
			claims[e.i] = hookrelay.Claim{Delivery: d, Lease: hookrelay.Lease{Token: token + 1, Holder: p.Holder, ExpiresAt: decTime(e.expires)}}
		default:
			errs[e.i] = refusal(p, d, leaseExpires, e.now)
			if errs[e.i] == nil { // the statement and the record disagree: not expected
				errs[e.i] = fmt.Errorf("hooksql: acquire lease %s: not leased: %w", errtext.Quote(p.ID), ErrDatabase)
			}
		}
		return nil
	}
	if err := s.rowsWithSettings(ctx, pgWriteSettings, op, stmts, read); err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		var de *DecodeError
		if e.leased && errors.As(errs[e.i], &de) {
			// Leased, but not readable: the lease goes again, as a read
			// that failed before the update never took it. It is the one
			// this statement set (holder and expiry), live, so no other
			// holder's.
			p := params[e.i]
			if _, err := s.db.ExecContext(ctx, s.q("UPDATE {d} SET lease_expires_at = NULL WHERE id = ? AND lease_holder = ? AND lease_expires_at = ?"),
				p.ID, p.Holder, e.expires); err != nil {
				errs[e.i] = errors.Join(errs[e.i], s.dbErr(op, err))
			}
		}
	}
	return claims, errs, nil
}

// ReleaseLease implements hookrelay.LeaseLedger: one fenced single-row
// update that ends the caller's lease (and, with p.At set, makes a pending
// delivery due then), so a broker's redelivery can be leased as soon as it
// is due. A repeated call with the same lease is a no-op; another holder's
// lease is refused with ErrLeaseLost, an unknown ID with ErrNotFound.
func (s *Store) ReleaseLease(ctx context.Context, p hookrelay.ReleaseLeaseParams) error {
	if p.At.IsZero() {
		return s.endLease(ctx, "release lease", p.ID, p.Lease, "UPDATE {d} SET lease_expires_at = NULL")
	}
	at, err := encTime("At", p.At)
	if err != nil {
		return err
	}
	// As in Release: next_attempt_at first, while MySQL still sees the
	// lease as it was.
	return s.endLease(ctx, "release lease", p.ID, p.Lease,
		"UPDATE {d} SET next_attempt_at = CASE WHEN state = 'pending' AND lease_expires_at IS NOT NULL THEN ? ELSE next_attempt_at END,"+
			" lease_expires_at = NULL", at)
}
