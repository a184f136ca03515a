package hookrelay

import (
	"context"
	"time"
)

// Queue decides when work runs. It hands out due
// deliveries under a lease and takes them back with a transition that
// carries the original record: retry-at and dead-letter never create an
// unrelated message. A queue acknowledgement is never business success; the
// Ledger is written first. Implementations must be safe for concurrent use,
// take every time from the caller (the params' Now, never their own clock)
// and return an error wrapping ctx's error when ctx is done.
//
// Where the queue and the ledger share one store (memory, SQL), the ledger
// row is the queue entry: Enqueue only has to make created records
// claimable, and the transitions release the lease.
//
// Leases. A delivery's current lease is the one its latest claim (Claim,
// LeaseLedger.AcquireLease) handed out; its token is the greatest the
// delivery ever had. The current lease is live until its ExpiresAt, then
// expired: a claim may take the delivery over (a new current lease), but
// until one does, the expired lease still writes. A ledger write, a queue
// transition or a release with the current token ends the lease; a redrive
// ends it too and moves to a new token. A lease that is not the current one
// is superseded. Every transition below checks the caller's token first:
// any token but the current one (older, or zero) returns ErrLeaseLost and
// changes nothing. With the current token, a transition ends a lease that
// has not ended (a pending delivery becomes claimable again at its due
// time) and is a no-op returning nil on a lease already ended, whatever
// ended it: the write or release that ended it decided the due time. The
// full table, with the Ledger's writes, is in docs/adapters.md, and the
// hookrelaytest suite checks every cell (RunLeases).
type Queue interface {
	// Enqueue makes deliveries already created in the Ledger claimable at
	// the due time the Ledger holds. Client.Enqueue calls it for every
	// delivery of a call, new or not, with the record Client.Prepare built
	// (pending, attempt 1, due now) rather than the stored one; a broker
	// queue relies on that to publish again a message whose first publish
	// was lost. So Enqueue sees records in any state and must never make a
	// leased, delivered or dead record claimable, nor move a record's due
	// time: it takes NextAttemptAt from the Ledger, not from its argument.
	// Enqueueing a delivery twice is harmless. A delivery the Ledger does
	// not hold returns an error wrapping ErrNotFound (a store that cannot
	// tell, such as a broker, may publish it and let the ledger refuse it).
	Enqueue(ctx context.Context, deliveries []Delivery) error
	// Claim hands out up to params.Limit pending deliveries due at
	// params.Now (NextAttemptAt <= Now), oldest NextAttemptAt first, each
	// under a new lease expiring at Now+LeaseFor with a fencing token
	// greater than any earlier lease of that delivery — across expiry,
	// release, every write and redrive: tokens never restart. A delivery
	// whose lease expired (ExpiresAt <= Now) is due again. Two concurrent
	// claims never return the same delivery under live leases. The claim
	// carries the record as the Ledger holds it. A claim that returns an
	// error may still have leased deliveries (a store may commit before
	// its answer is lost); they are due again when those leases expire.
	// The worker therefore lets its claims run to their answer when it is
	// cancelled, and hands back at once what they return.
	Claim(ctx context.Context, params ClaimParams) ([]Claim, error)
	// Acknowledge ends the lease of a delivery that is done (after
	// MarkDelivered). With a lease that has not ended, a delivery the
	// Ledger still holds as pending becomes claimable again: the queue
	// never loses pending work. Acknowledging twice is a no-op; a lease
	// that is no longer current returns ErrLeaseLost.
	Acknowledge(ctx context.Context, params AckParams) error
	// RetryAt ends the lease and makes the delivery (same ID, next attempt)
	// due again at params.At. On a lease already ended (by RecordRetry) it
	// changes nothing; a lease that is no longer current returns
	// ErrLeaseLost.
	RetryAt(ctx context.Context, params RetryAtParams) error
	// DeadLetter ends the lease and moves the delivery to the dead-letter
	// path with its reason (after RecordDeadLetter). As with Acknowledge, a
	// delivery the Ledger still holds as pending stays claimable; a lease
	// that is no longer current returns ErrLeaseLost.
	DeadLetter(ctx context.Context, params DeadLetterParams) error
	// Release ends the lease without spending an attempt and makes the
	// delivery due again at params.At (used for paused or saturated
	// destinations and for work cancelled by shutdown). A later ledger
	// write with the released lease returns ErrLeaseLost. Releasing a lease
	// already ended changes nothing; a lease that is no longer current
	// returns ErrLeaseLost.
	Release(ctx context.Context, params ReleaseParams) error
}

// ClaimParams are the inputs of Queue.Claim.
type ClaimParams struct {
	Now      time.Time
	Limit    int
	LeaseFor time.Duration
	// Holder names the claiming worker, for diagnostics.
	Holder string
	// SkipDestinations lists destination IDs whose deliveries must not be
	// claimed now (paused, disabled or at their concurrency limit).
	SkipDestinations []string
	// DestinationRoom and DefaultDestinationRoom are honoured by a queue
	// that declares ClaimsByDestinationRoom (others ignore them): at most
	// DestinationRoom[id] deliveries to destination id, and at most
	// DefaultDestinationRoom to a destination not in the map (zero: no
	// per-destination cap).
	DestinationRoom        map[string]int
	DefaultDestinationRoom int
}

// ClaimsByDestinationRoom is an optional ability of a Queue: its Claim
// returns at most ClaimParams.DestinationRoom[id] (or
// DefaultDestinationRoom) deliveries per destination, still oldest first
// among what it returns. The worker then fills every free slot across
// destinations in one Claim call; without the ability it holds a claim to
// the tightest destination's room, so that it does not claim deliveries
// only to hand them back. The memory and SQL stores implement it.
type ClaimsByDestinationRoom interface {
	Queue
	// ClaimsHonourDestinationRoom marks the ability; it does nothing.
	ClaimsHonourDestinationRoom()
}

// AckParams are the inputs of Queue.Acknowledge.
type AckParams struct {
	ID    string
	Lease Lease
	Now   time.Time
}

// RetryAtParams are the inputs of Queue.RetryAt.
type RetryAtParams struct {
	// Delivery is the record with Attempt already advanced and
	// NextAttemptAt set to At.
	Delivery Delivery
	Lease    Lease
	At       time.Time
	Now      time.Time
}

// DeadLetterParams are the inputs of Queue.DeadLetter.
type DeadLetterParams struct {
	Delivery Delivery
	Lease    Lease
	Reason   string
	Now      time.Time
}

// ReleaseParams are the inputs of Queue.Release.
type ReleaseParams struct {
	ID    string
	Lease Lease
	At    time.Time
	Now   time.Time
	// Announce says that nothing in the releasing process will take the
	// delivery: a queue with the DueNotifier ability announces it to the
	// listening workers, due at At, once the release is written, as it
	// announces new work; other queues ignore it. The worker sets it for
	// what it hands back when it stops (the claims it holds, handed back
	// as one batch whose last Release alone sets it, and the sends and
	// ledger calls its StopAndCancel cut short), so that workers in other
	// processes take those deliveries within milliseconds rather than at
	// their next poll. It leaves it false for the releases of normal
	// operation — a destination without room, paused or held — which would
	// otherwise wake every worker to find the destination as it was.
	Announce bool
}

// LedgerQueue is an optional ability of a store that is both the Queue and the
// Ledger (the memory and SQL stores): its ledger records are its queue entries.
// The client finds it through wrappers (see As): Config.Queue and Config.Ledger
// must unwrap to the same LedgerQueue. Two things follow, and a store that
// declares the ability promises both: a claim reads the ledger record under the
// new lease, so a freshly claimed delivery is pending; and each ledger write
// ends the writer's lease, so the queue transition after it has nothing left to
// do. A third follows from the records being the entries: a record
// Ledger.Create stored is claimable when due, with no Enqueue. When the same
// LedgerQueue is the client's Queue and Ledger, the worker skips the ledger
// check of a fresh claim and the transitions after the ledger writes (a
// delivery costs its claim, one send and one write), and Enqueue stores
// records with Create alone.
type LedgerQueue interface {
	Queue
	Ledger
	// LedgerRecordsAreQueueEntries marks the ability; it does nothing.
	LedgerRecordsAreQueueEntries()
}

// MessageLimit is an optional ability of a Queue that carries each
// delivery as a broker message of bounded size (NATS's max_payload,
// RabbitMQ's max_message_size): MaxEnvelopeBytes is the largest envelope
// (MarshalEnvelope) it can publish. Client.Prepare refuses a delivery whose
// envelope is larger, or could be on a retry (a larger attempt number, a
// longer next-attempt time), naming Payload, before anything is stored:
// stored, it could never be published, and publishing it again would fail
// every time.
type MessageLimit interface {
	MaxEnvelopeBytes() int
}

// DueNotifier is an optional ability of a Queue whose store can announce
// work to workers in other processes (PostgreSQL's LISTEN/NOTIFY): a
// delivery enqueued, a retry recorded, a redrive, a destination resumed,
// and a release with ReleaseParams.Announce (what a stopping worker hands
// back).
// A worker runs ListenDue while it runs and claims as soon as it hears of
// due work, instead of at its next poll; polling stays as the fallback, so
// a lost announcement costs latency, never a delivery.
type DueNotifier interface {
	Queue
	// ListenDue calls due, from the listener's own goroutine, with the time
	// announced work becomes due (now or later), until ctx ends — then it
	// returns nil — or the listener fails — then it returns the error, and
	// the worker starts it again after a backoff. due must be fast. An
	// announcement made while no one listens is lost, so ListenDue calls
	// due with the zero time (work due now) once it is listening.
	ListenDue(ctx context.Context, due func(at time.Time)) error
}
