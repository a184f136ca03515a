package hooksql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hookrelay/hookrelay"
)

var _ hookrelay.LeaseLedger = (*Store)(nil)

// AcquireLease implements hookrelay.LeaseLedger for broker queues: it leases
// one delivery exactly as Claim would, under a row lock, and returns the
// stored record (authoritative over the message's copy) with a fencing
// token one greater than the delivery's previous one. It refuses with
// ErrNotFound, ErrInvalidState (delivered or dead), ErrLeaseLost (another
// holder's lease is live) or a *hookrelay.NotDueError with the due time.
func (s *Store) AcquireLease(ctx context.Context, p hookrelay.AcquireLeaseParams) (hookrelay.Claim, error) {
	if p.LeaseFor <= 0 {
		return hookrelay.Claim{}, errors.New("hooksql: acquire lease: LeaseFor must be positive")
	}
	now, err := encTime("Now", p.Now)
	if err != nil {
		return hookrelay.Claim{}, err
	}
	expires, err := encTime("lease expiry", p.Now.Add(p.LeaseFor))
	if err != nil {
		return hookrelay.Claim{}, err
	}
	if s.dialect == Postgres {
		return s.acquireLeasePostgres(ctx, p, now, expires)
	}
	var claim hookrelay.Claim
	err = s.inTx(ctx, "acquire lease", func(q querier) error {
		var leaseExpires sql.NullInt64
		d, token, err := scanDelivery(q.QueryRowContext(ctx, s.q("SELECT "+selectDeliveryCols+", lease_expires_at FROM {d} WHERE id = ?"+s.lockSuffix(false)), p.ID), &leaseExpires)
		var de *DecodeError
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("hooksql: acquire lease %q: %w", p.ID, hookrelay.ErrNotFound)
		case errors.As(err, &de):
			return err
		case err != nil:
			return s.dbErr("acquire lease "+p.ID, err)
		case d.State != hookrelay.StatePending:
			return fmt.Errorf("hooksql: acquire lease %q: delivery is %s: %w", p.ID, d.State, hookrelay.ErrInvalidState)
		case leaseExpires.Valid && leaseExpires.Int64 > now:
			return fmt.Errorf("hooksql: acquire lease %q: another holder's lease is live: %w", p.ID, hookrelay.ErrLeaseLost)
		case d.NextAttemptAt.After(p.Now):
			return &hookrelay.NotDueError{ID: p.ID, At: d.NextAttemptAt}
		}
		if _, err := q.ExecContext(ctx, s.q("UPDATE {d} SET lease_token = lease_token + 1, lease_holder = ?, lease_expires_at = ?, touched_at = ? WHERE id = ?"),
			p.Holder, expires, now, p.ID); err != nil {
			return s.dbErr("acquire lease "+p.ID, err)
		}
		claim = hookrelay.Claim{Delivery: d, Lease: hookrelay.Lease{Token: token + 1, Holder: p.Holder, ExpiresAt: decTime(expires)}}
		return nil
	})
	return claim, err
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

// acquireLeasePostgres is AcquireLease on PostgreSQL as one statement: it
// locks the record, leases it when it may run (pending, no live lease,
// due), and returns the record as it was with whether it leased it. Through
// pgx that is one round trip under the write's plan settings
// (rowWithSettings), where a transaction of a locking read and an update
// took four (begin, read, update, commit): 589 / 624 / 607 → 358 / 379 /
// 430 µs per lease in BenchmarkAcquireLease (three alternated runs; most
// of what is left is the commit's flush). The plan settings also keep the
// lookup by key on a table planned while it was young. When it did not
// lease, the record says why, as the read did before.
func (s *Store) acquireLeasePostgres(ctx context.Context, p hookrelay.AcquireLeaseParams, now, expires int64) (hookrelay.Claim, error) {
	query := s.q("WITH cur AS (SELECT " + selectDeliveryCols + ", lease_expires_at FROM {d} WHERE id = ?" + s.lockSuffix(false) + ")," +
		" upd AS (UPDATE {d} SET lease_token = lease_token + 1, lease_holder = ?, lease_expires_at = ?, touched_at = ?" +
		" WHERE id = ? AND EXISTS (SELECT 1 FROM cur WHERE state = 'pending'" +
		" AND (lease_expires_at IS NULL OR lease_expires_at <= ?) AND next_attempt_at <= ?) RETURNING 1)" +
		" SELECT cur.*, EXISTS (SELECT 1 FROM upd) FROM cur")
	args := []any{p.ID, p.Holder, expires, now, p.ID, now, now}
	op := "acquire lease " + p.ID
	var (
		leaseExpires sql.NullInt64
		leased       bool
	)
	d, token, err := scanDelivery(scanFunc(func(dest ...any) error {
		return s.rowWithSettings(ctx, pgWriteSettings, op, query, args, query, args, dest...)
	}), &leaseExpires, &leased)
	var de *DecodeError
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return hookrelay.Claim{}, fmt.Errorf("hooksql: acquire lease %q: %w", p.ID, hookrelay.ErrNotFound)
	case errors.As(err, &de):
		if leased {
			// Leased, but not readable: the lease goes again, as a read
			// that failed before the update never took it. It is the one
			// this statement set (holder and expiry), live, so no other
			// holder's.
			if _, rerr := s.db.ExecContext(ctx, s.q("UPDATE {d} SET lease_expires_at = NULL WHERE id = ? AND lease_holder = ? AND lease_expires_at = ?"),
				p.ID, p.Holder, expires); rerr != nil {
				return hookrelay.Claim{}, errors.Join(err, s.dbErr(op, rerr))
			}
		}
		return hookrelay.Claim{}, err
	case err != nil:
		return hookrelay.Claim{}, err // a database error named after op already
	case leased:
		return hookrelay.Claim{Delivery: d, Lease: hookrelay.Lease{Token: token + 1, Holder: p.Holder, ExpiresAt: decTime(expires)}}, nil
	case d.State != hookrelay.StatePending:
		return hookrelay.Claim{}, fmt.Errorf("hooksql: acquire lease %q: delivery is %s: %w", p.ID, d.State, hookrelay.ErrInvalidState)
	case leaseExpires.Valid && leaseExpires.Int64 > now:
		return hookrelay.Claim{}, fmt.Errorf("hooksql: acquire lease %q: another holder's lease is live: %w", p.ID, hookrelay.ErrLeaseLost)
	default:
		return hookrelay.Claim{}, &hookrelay.NotDueError{ID: p.ID, At: d.NextAttemptAt}
	}
}

// scanFunc is a scanner made of a function.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }
