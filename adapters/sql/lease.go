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
