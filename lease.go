package hookrelay

import (
	"context"
	"time"
)

// LeaseLedger is an optional ability of a Ledger for queues that are not the
// ledger's own store, such as a message broker. The broker decides when a
// message is handed to a worker; the ledger still decides what that worker
// may do. When a broker hands out a message, its Queue adapter calls
// AcquireLease and uses the returned Claim — the ledger's record, which is
// authoritative over whatever the message carried, under a lease whose
// fencing token every later ledger write is checked against. The memory and
// SQL ledgers implement it. Its leases are the Queue's leases (see Queue):
// one token sequence per delivery, shared with Claim, and the Ledger's
// writes end them.
type LeaseLedger interface {
	// AcquireLease leases one delivery, exactly as Queue.Claim would: the
	// delivery must be pending, due at params.Now and not under a live
	// lease (an expired or ended one may be taken over), and the new token
	// is greater than any earlier one. Otherwise it returns an error wrapping ErrNotFound (no such delivery),
	// ErrInvalidState (delivered or dead: drop the message), ErrLeaseLost
	// (another holder's lease is live: try again after it expires) or
	// ErrNotDue (a *NotDueError with the due time: redeliver then).
	AcquireLease(ctx context.Context, params AcquireLeaseParams) (Claim, error)
	// ReleaseLease ends the caller's lease, so the delivery can be leased
	// again as soon as it is due; with params.At set, a pending delivery
	// becomes due at At (Queue.Release's time). A broker queue calls it in
	// RetryAt and Release, after the ledger write: a lease that outlived
	// its attempt would otherwise hold the retry back until the lease
	// expired. It follows Queue.Release's rules: releasing a lease already
	// ended (by a ledger write or a release) is a no-op that keeps the due
	// time; a lease that is no longer current returns an error wrapping
	// ErrLeaseLost, and an unknown ID one wrapping ErrNotFound.
	ReleaseLease(ctx context.Context, params ReleaseLeaseParams) error
}

// ReleaseLeaseParams are the inputs of LeaseLedger.ReleaseLease.
type ReleaseLeaseParams struct {
	ID    string
	Lease Lease
	// At, when not zero, is the record's new NextAttemptAt. Zero leaves it
	// as the last ledger write set it (RetryAt has recorded it already).
	At  time.Time
	Now time.Time
}

// AcquireLeaseParams are the inputs of LeaseLedger.AcquireLease.
type AcquireLeaseParams struct {
	ID       string
	Holder   string
	Now      time.Time
	LeaseFor time.Duration
}
