package hookrelay

import (
	"context"
	"time"
)

// Ledger is the durable record of every delivery and attempt. It decides what
// work is allowed to do and keeps the evidence. Each write takes the caller's
// lease (see Queue for what the current lease is) and checks, in this order: a
// token that is not the delivery's current one (older, or zero) is
// ErrLeaseLost, so a stale holder cannot overwrite a newer attempt; a record no
// longer pending is ErrInvalidState (MarkDelivered on a delivered record is a
// no-op instead); a lease already ended — by Release or by an earlier write —
// or an attempt number that is not the record's is ErrLeaseLost. A lease that
// expired but was not claimed again still writes: fencing is by token, not by
// clock. Each write stores the finished attempt together with the state change,
// atomically, and ends the caller's lease: the delivery is done, dead, or
// claimable again at its next time even if the queue transition that follows
// never happens (a crash between the two). Where the ledger's records are the
// queue's entries (memory, SQL), that makes the transition itself a cheap check
// rather than a second write.
//
// A Ledger must be durable: a write that returned nil survives a crash and
// a power loss (commits reach stable storage), records are never evicted,
// and a failover never lands on a replica that may lack acknowledged
// writes. A lost record is a webhook never sent; a lost write or a token
// that goes backwards lets a stale holder overwrite a newer attempt. Times
// are the caller's, stored exactly to the nanosecond (CheckStorable gives
// the range). Free text (an attempt's Reason and Detail, LastReason) is
// stored as StorableText makes it, never refused. Implementations must be
// safe for concurrent use, return an error wrapping ctx's error when ctx
// is done, and translate backend errors to the core's sentinel errors.
// docs/adapters.md has the whole contract.
type Ledger interface {
	// Create stores new pending deliveries: State is pending whatever the
	// input says, every other field is stored as given. A delivery whose ID
	// already exists is left untouched (enqueue is idempotent by delivery
	// ID); the returned slice says, per input, whether a record was
	// created. A delivery CheckStorable refuses refuses the whole call with
	// its *ValidationError, and nothing is stored.
	Create(ctx context.Context, deliveries []Delivery) ([]bool, error)
	// Get returns the record, or an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (Delivery, error)
	// WasDelivered reports whether the delivery is recorded as delivered.
	// An unknown ID is not delivered.
	WasDelivered(ctx context.Context, id string) (bool, error)
	// MarkDelivered records the delivery as delivered with its final attempt.
	// Marking a delivered record again is a no-op.
	MarkDelivered(ctx context.Context, params MarkDeliveredParams) error
	// RecordRetry records a failed attempt and the next one: attempt number
	// and eligible time.
	RecordRetry(ctx context.Context, params RecordRetryParams) error
	// RecordDeadLetter records the delivery as dead with its reason (and the
	// final attempt, if one was made).
	RecordDeadLetter(ctx context.Context, params RecordDeadLetterParams) error
	// Attempts returns the attempt history in attempt order.
	Attempts(ctx context.Context, id string) ([]Attempt, error)
}

// MarkDeliveredParams are the inputs of Ledger.MarkDelivered.
type MarkDeliveredParams struct {
	ID      string
	Lease   Lease
	Attempt Attempt
	Now     time.Time
}

// RecordRetryParams are the inputs of Ledger.RecordRetry.
type RecordRetryParams struct {
	ID    string
	Lease Lease
	// Attempt is the failed attempt; its Number is the delivery's current
	// attempt.
	Attempt Attempt
	// NextAttempt is Attempt.Number + 1; NextAttemptAt is when it is due.
	NextAttempt   int
	NextAttemptAt time.Time
	Now           time.Time
}

// RecordDeadLetterParams are the inputs of Ledger.RecordDeadLetter.
type RecordDeadLetterParams struct {
	ID     string
	Lease  Lease
	Reason string
	// Attempt is the final attempt, or nil when the delivery was
	// dead-lettered without sending (delivery window passed, destination
	// unknown).
	Attempt *Attempt
	Now     time.Time
}

// LedgerWrite is one finished attempt's ledger write, as a BatchLedger
// takes it: exactly one field is set.
type LedgerWrite struct {
	Delivered  *MarkDeliveredParams
	Retry      *RecordRetryParams
	DeadLetter *RecordDeadLetterParams
}

// DeliveryID returns the ID of the delivery the write is for ("" when it
// sets no field).
func (w LedgerWrite) DeliveryID() string {
	switch {
	case w.Delivered != nil:
		return w.Delivered.ID
	case w.Retry != nil:
		return w.Retry.ID
	case w.DeadLetter != nil:
		return w.DeadLetter.ID
	}
	return ""
}

// BatchLedger is an optional ability of a Ledger: it records the writes of
// many finished attempts in one durable commit (group commit), which is
// where a durable store spends its time — an fsync on SQLite, a WAL flush
// and a round trip on PostgreSQL. The worker gathers the writes of attempts
// that finish close together and hands them over at once; nothing is
// acknowledged, scheduled, dead-lettered or reported before the batch
// holding its write committed, so the ordering rules do not change.
//
// RecordBatch applies writes in order, in one atomic commit, each exactly as
// the single method (MarkDelivered, RecordRetry, RecordDeadLetter) would,
// fenced by its own lease: one write refused with ErrLeaseLost,
// ErrInvalidState or ErrNotFound does not stop the others. When the batch
// committed it returns one entry per write, nil for a write that took effect
// (or was a no-op, as MarkDelivered again is), and a nil error. When nothing
// committed it returns a nil slice and the error: no write took effect, and
// every delivery stays leased until its lease expires, then claimable again.
// A write must never be reported as committed when the store may not have
// it durably. The writes and the params they point to are the caller's again
// once RecordBatch returns (the worker reuses them for its next write): keep
// copies, never the pointers. Implementations must be safe for concurrent
// use; the memory and SQL ledgers implement it.
type BatchLedger interface {
	Ledger
	RecordBatch(ctx context.Context, writes []LedgerWrite) ([]error, error)
}

// LeaseLedger is the port a broker queue is built on (hookrelay's NATS and
// AMQP queues, or your own): a Ledger that also leases one delivery at a
// time for a queue that is not the ledger's own store. The broker decides
// when a message is handed to a worker; the ledger still decides what that
// worker may do. When a broker hands out a message, its Queue adapter calls
// AcquireLease and uses the returned Claim — the ledger's record, which is
// authoritative over whatever the message carried, under a lease whose
// fencing token every later ledger write is checked against. The memory and
// SQL ledgers implement it. Its leases are the Queue's leases (see Queue):
// one token sequence per delivery, shared with Claim, and the Ledger's
// writes end them.
type LeaseLedger interface {
	Ledger
	// AcquireLease leases one delivery, exactly as Queue.Claim would: the
	// delivery must be pending, due at params.Now and not under a live lease
	// (an expired or ended one may be taken over), and the new token is greater
	// than any earlier one. Otherwise it returns an error wrapping ErrNotFound
	// (no such delivery), ErrInvalidState (delivered or dead: drop the
	// message), ErrLeaseLost (another holder's lease is live: try again after
	// it expires) or ErrNotDue (a *NotDueError with the due time: redeliver
	// then).
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

// LeaseBatchLedger is an optional ability of a LeaseLedger: leasing the
// deliveries of many messages in one call and one commit, as a broker queue
// does with the messages of one fetch (the NATS and AMQP queues use it when
// their ledger has it). AcquireLeases judges params in order, each exactly
// as AcquireLease would, with the leases of earlier entries already in
// place (a repeated ID finds the first entry's lease live). When it returns
// a nil error it returns one Claim and one error per entry, in the order of
// params: the Claim where the error is nil, else the error AcquireLease
// would have returned. When it returns an error, no lease was granted. The
// memory and SQL ledgers implement it.
type LeaseBatchLedger interface {
	LeaseLedger
	AcquireLeases(ctx context.Context, params []AcquireLeaseParams) ([]Claim, []error, error)
}

// AcquireLeaseParams are the inputs of LeaseLedger.AcquireLease.
type AcquireLeaseParams struct {
	ID       string
	Holder   string
	Now      time.Time
	LeaseFor time.Duration
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

// UnpublishedRecovery is an optional ability of a LeaseLedger used with a
// queue that is not its own store (a message broker): it finds pending
// records whose message looks lost. A broker queue's Enqueue publishes
// after Ledger.Create; a process that dies between the two leaves a
// pending record with no message, which nothing would ever lease. The
// worker publishes such records again (Queue.Enqueue); the lease and its
// fencing token make a surplus message harmless, so a wrong guess costs a
// message, never a second send. The memory and SQL ledgers implement it.
//
// TakeUnpublished returns, oldest due first, up to params.Limit pending
// records that have been due since Now−Grace or earlier, are not under a
// live lease, and were neither leased through AcquireLease nor taken by
// TakeUnpublished after Now−Grace; it marks each taken at Now in the same
// transaction, so a concurrent or later call returns it again only after
// another Grace without a lease. Implementations must be safe for
// concurrent use.
type UnpublishedRecovery interface {
	TakeUnpublished(ctx context.Context, params RecoverUnpublishedParams) ([]Delivery, error)
}

// RecoverUnpublishedParams are the inputs of
// UnpublishedRecovery.TakeUnpublished.
type RecoverUnpublishedParams struct {
	Now time.Time
	// Grace is how long a due delivery may go without being leased before
	// it counts as having no message.
	Grace time.Duration
	Limit int
	// SkipDestinations lists destinations whose deliveries are not taken:
	// the worker passes those it knows are paused or disabled, whose
	// messages wait in the broker without a lease by design. It may list
	// tens of thousands; every one is honoured.
	SkipDestinations []string
}

// DeadLetterLedger is an optional ability of a Ledger, found with As
// (through wrappers that Unwrap): inspecting dead-lettered deliveries and
// moving them back to pending. Client.DeadLetters and Client.PlanRedrive
// need it; a redrive needs it together with a RedriveAuditLog (see
// RedriveLedger). Implementations must be safe for concurrent use, also
// across processes sharing one store.
type DeadLetterLedger interface {
	// ListDead returns dead deliveries matching params.Filter, ordered by
	// dead-letter time (UpdatedAt), then ID, starting after params.After.
	ListDead(ctx context.Context, params ListDeadParams) (ListDeadPage, error)
	// PlanRedrive counts the dead deliveries matching filter, grouped by
	// tenant, destination and reason, ordered by those three. It changes
	// nothing.
	PlanRedrive(ctx context.Context, filter DeadLetterFilter) ([]PlanRow, error)
	// RedriveDelivery moves one delivery from dead to pending, only if it
	// is still dead (compare-and-set), and returns the record as it now
	// stands and whether it moved. Two racing calls move it once; a
	// delivered or pending record is left alone (false, nil). Moving keeps
	// the delivery ID, event, payload, policy version and attempt history;
	// it sets Attempt to the next unused attempt number (one past the last
	// recorded attempt, or the current Attempt if that was never made),
	// BudgetStart to that same number (a fresh attempt budget),
	// WindowStart, NextAttemptAt and UpdatedAt to params.Now (a fresh
	// delivery window; FirstQueuedAt is kept), and invalidates any lease
	// left on the record, so a stale holder's transition is refused with
	// ErrLeaseLost. LastOutcome and LastReason keep the dead-letter
	// evidence until the next attempt. An unknown ID wraps ErrNotFound.
	//
	// When the store holds the redrive audit entry params.AuditID names
	// (it is a RedriveAuditLog too), the same atomic step counts the
	// outcome in it: one added to Redriven when the delivery moved, to
	// Skipped when it was not dead, LastDeliveryID set to params.ID and
	// UpdatedAt to params.Now, whatever the entry's Run. So the entry
	// counts every move made, also when the redrive's process dies before
	// its next audit update. An AuditID naming no entry changes nothing
	// and is no error.
	RedriveDelivery(ctx context.Context, params RedriveDeliveryParams) (Delivery, bool, error)
}

// ListDeadParams are the inputs of DeadLetterLedger.ListDead.
type ListDeadParams struct {
	Filter DeadLetterFilter
	// Limit caps the page size; it is at least 1.
	Limit int
	// After, when set, starts the page after this position.
	After *DeadLetterCursor
}

// ListDeadPage is one page of dead-lettered deliveries in list order.
type ListDeadPage struct {
	Deliveries []Delivery
	// Next is the position to continue from, or nil on the last page.
	Next *DeadLetterCursor
}

// PlanRow counts the dead-lettered deliveries of one tenant, destination
// and failure reason in a selection.
type PlanRow struct {
	TenantID      string
	DestinationID string
	Reason        string
	Count         int64
}

// RedriveDeliveryParams are the inputs of DeadLetterLedger.RedriveDelivery.
type RedriveDeliveryParams struct {
	ID string
	// AuditID names the redrive doing it: its audit entry counts the
	// outcome (see DeadLetterLedger.RedriveDelivery).
	AuditID string
	Now     time.Time
}

// RedriveAuditLog is one half of a RedriveLedger: durable redrive audit
// entries, which also carry the stop control, so any process sharing the
// store can stop a redrive. Entries are never deleted by hookrelay.
// Implementations must be safe for concurrent use.
type RedriveAuditLog interface {
	// CreateRedriveAudit stores a new entry; an existing ID is an error.
	CreateRedriveAudit(ctx context.Context, audit RedriveAudit) error
	// RedriveAudit returns an entry, or an error wrapping
	// ErrRedriveNotFound.
	RedriveAudit(ctx context.Context, id string) (RedriveAudit, error)
	// UpdateRedriveAudit applies update atomically, sets UpdatedAt to
	// update.Now and returns the entry as it now stands. An unknown ID
	// wraps ErrRedriveNotFound.
	UpdateRedriveAudit(ctx context.Context, update RedriveAuditUpdate) (RedriveAudit, error)
}

// RedriveLedger is what a redrive needs (Client.Redrive, ResumeRedrive,
// StopRedrive, RedriveStatus): a DeadLetterLedger and a RedriveAuditLog in
// one store, so that the moves and the audit entry that counts (and stops)
// them are seen alike by every process sharing it. The memory and SQL
// ledgers implement it; found with As, through wrappers that Unwrap.
type RedriveLedger interface {
	DeadLetterLedger
	RedriveAuditLog
}

// RedriveAuditLister is an optional ability of a RedriveAuditLog, found with As
// (through wrappers that Unwrap): the audit log, newest first, for operator
// pages.
type RedriveAuditLister interface {
	// ListRedriveAudits returns at most params.Limit entries (at least 1),
	// ordered by CreatedAt descending, then ID descending.
	ListRedriveAudits(ctx context.Context, params ListRedriveAuditsParams) ([]RedriveAudit, error)
}

// ListRedriveAuditsParams are the inputs of
// RedriveAuditLister.ListRedriveAudits.
type ListRedriveAuditsParams struct {
	Limit int
}

// LedgerStats is an optional ability of a Ledger (the memory and SQL
// ledgers have it; found with As, through wrappers that Unwrap):
// per-destination counts and ages for dashboards, alerts and the CLI's
// stats command. Destinations with no pending or dead
// deliveries may be omitted. Results are ordered by DestinationID.
type LedgerStats interface {
	Stats(ctx context.Context, params StatsParams) ([]DestinationStats, error)
}

// StatsParams are the inputs of LedgerStats.Stats.
type StatsParams struct {
	Now time.Time
}

// AttemptStats is an optional ability of a Ledger (the memory and SQL ledgers
// have it; found with As): how recent attempts ended, per destination, for
// dashboards such as the operator console's overview. It counts the attempt
// history the ledger keeps, so it agrees with each delivery's attempts. Results
// are ordered by DestinationID, then Kind, then Reason.
type AttemptStats interface {
	RecentOutcomes(ctx context.Context, params RecentOutcomesParams) ([]OutcomeCount, error)
}

// RecentOutcomesParams are the inputs of AttemptStats.RecentOutcomes.
type RecentOutcomesParams struct {
	// Since selects attempts that finished at or after it.
	Since time.Time
}

// HistoryCleaner is an optional ability of a Ledger (the memory and SQL
// ledgers have it; found with As): it applies a RetentionPolicy. The
// hookrelaytest suite checks it (RunRetention).
//
// CleanHistory removes, oldest first, up to params.Limit records that the
// policy lets go — delivered records whose UpdatedAt is at or before
// Now−Delivered and, with RemoveDead, dead records at or before Now−Dead —
// together with their attempts and summaries; then compacts, oldest first,
// up to params.Limit delivered records at or before Now−AttemptDetails (and
// not yet removable) that still hold attempts, replacing their attempts by
// one AttemptSummary. A pending record is never touched. Each step is a
// short atomic write of its own that holds no lock on records it does not
// change (where the store has row locks); several cleaners, in one process
// or many, may run at once, and each record is removed or compacted by
// exactly one of them, counted once. A call that fails after one of its
// steps committed returns that step's counts with the error (no later call
// can count those records). Implementations must be safe for concurrent
// use.
type HistoryCleaner interface {
	CleanHistory(ctx context.Context, params CleanHistoryParams) (CleanHistoryResult, error)
	// AttemptSummary returns the summary of a record's compacted attempts
	// (Count zero: none was compacted), or an error wrapping ErrNotFound
	// when the record does not exist.
	AttemptSummary(ctx context.Context, id string) (AttemptSummary, error)
}

// CleanHistoryParams are the inputs of HistoryCleaner.CleanHistory.
type CleanHistoryParams struct {
	Now    time.Time
	Policy RetentionPolicy
	// Limit bounds the records one call removes, and separately the
	// records it compacts. It must be positive unless DryRun.
	Limit int
	// DryRun counts everything the policy would remove and compact at Now,
	// without a limit, and changes nothing.
	DryRun bool
}
