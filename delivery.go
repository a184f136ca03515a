package hookrelay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// State is a delivery's business state. There are exactly three; "unknown"
// is an attempt outcome, not a state.
type State string

const (
	// StatePending: automated delivery is still active.
	StatePending State = "pending"
	// StateDelivered: the recipient acknowledged it; terminal.
	StateDelivered State = "delivered"
	// StateDead: automation stopped (permanent rejection, attempts
	// exhausted, or delivery window passed); only an explicit redrive
	// returns it to pending.
	StateDead State = "dead"
)

// Delivery is the durable record of one event going to one destination. It
// holds no credentials and no sensitive headers: destination secrets are
// resolved at send time through the Destinations port.
type Delivery struct {
	// ID is the immutable delivery ID, derived by DeliveryID from EventID and
	// DestinationID. It is the idempotency key on every attempt.
	ID      string
	EventID string
	// TenantID owns the delivery; redrive across tenants needs authorization.
	TenantID string
	// Scope holds free-form labels (property, lease, shipment…).
	Scope         map[string]string
	DestinationID string
	EventType     string
	// Payload is opaque and never edited after enqueue.
	Payload []byte
	// EnvelopeVersion is the envelope format the record was written with.
	EnvelopeVersion int
	// Attempt is the number of the next (or current, while claimed) attempt,
	// starting at 1. Attempt−1 attempts have been made.
	Attempt int
	// BudgetStart is the attempt number the current attempt budget began
	// at: 1 (zero is read as 1), or the first attempt after the latest
	// redrive. A redrive keeps the numbering going, so attempt history stays
	// unambiguous, and gives a fresh budget by moving BudgetStart.
	BudgetStart   int
	FirstQueuedAt time.Time
	// WindowStart is when the current delivery window (the policy's MaxAge)
	// began: zero means FirstQueuedAt; a redrive sets it to the redrive's
	// time, so a delivery redriven after an outage longer than MaxAge gets
	// a fresh window as well as a fresh attempt budget. FirstQueuedAt is
	// never changed, so both the original enqueue and the latest redrive
	// stay on the record.
	WindowStart   time.Time
	NextAttemptAt time.Time
	PolicyVersion string
	State         State
	// LastOutcome and LastReason describe the latest attempt or decision.
	LastOutcome Outcome
	LastReason  string
	// UpdatedAt is when the record last changed.
	UpdatedAt time.Time
}

// WindowStartsAt is when the current delivery window began: WindowStart,
// or FirstQueuedAt when WindowStart is zero.
func (d Delivery) WindowStartsAt() time.Time {
	if d.WindowStart.IsZero() {
		return d.FirstQueuedAt
	}
	return d.WindowStart
}

// BudgetAttempt is the position of Attempt within the current attempt
// budget, starting at 1: what the policy's MaxAttempts and backoff count.
func (d Delivery) BudgetAttempt() int {
	return d.Attempt - max(d.BudgetStart, 1) + 1
}

// deliveryNamespace is the UUIDv5 namespace of delivery IDs. Changing it
// changes every delivery ID and defeats deduplication across versions.
var deliveryNamespace = uuid.MustParse("6f1c1b5e-7f3a-5b9e-9a54-2f0c8f6c1d11")

// DeliveryID derives the delivery ID from (event ID, destination ID): the same
// pair always yields the same ID, in every version of the library, so
// enqueueing the same event for the same destination twice yields one record.
// The two inputs are length-prefixed so ("ab","c") and ("a","bc") differ.
func DeliveryID(eventID, destinationID string) string {
	b := make([]byte, 0, 16+len(eventID)+len(destinationID))
	b = binary.BigEndian.AppendUint64(b, uint64(len(eventID)))
	b = append(b, eventID...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(destinationID)))
	b = append(b, destinationID...)
	return "whd_" + uuid.NewSHA1(deliveryNamespace, b).String()
}

// Lease is a claim's right to run one attempt of a delivery until ExpiresAt.
// Token is a fencing token: it increases with every claim of the delivery,
// and a transition carrying an older token is refused with ErrLeaseLost.
type Lease struct {
	Token     int64
	Holder    string
	ExpiresAt time.Time
}

// Claim is a delivery handed to a worker under a lease.
type Claim struct {
	Delivery Delivery
	Lease    Lease
}

// Attempt is one row of a delivery's attempt history.
type Attempt struct {
	DeliveryID string
	// Number is the attempt number (1-based); redriven deliveries continue
	// the numbering, so old attempts are kept.
	Number     int
	StartedAt  time.Time
	FinishedAt time.Time
	Kind       Kind
	Outcome    Outcome
	Reason     string
	StatusCode int
	// Detail is a truncated, secret-free diagnostic.
	Detail string
	// NextAttemptAt is when a retry was scheduled, zero otherwise.
	NextAttemptAt time.Time
}

// Process runs the state machine for one claimed delivery, in exactly this
// order:
//
//  1. If the ledger says delivered → acknowledge and stop (duplicate message).
//  2. Resolve the destination (paused or disabled → release without spending
//     an attempt; unknown → dead-letter) and send.
//  3. Delivered → record delivered durably, then acknowledge.
//  4. Permanent, attempts exhausted, or past the delivery window → record the
//     dead-letter durably, then move it to the dead-letter path.
//  5. Otherwise → record the retry (attempt + 1, next time) durably, then
//     schedule it.
//
// The same delivery ID flows through every branch. If the process dies
// between any two steps, running the same delivery again is safe: step 1,
// the lease's fencing token and the recipient's deduplication see to it.
// Writes after the send do not observe ctx cancellation, so a result that
// was seen is recorded; if ctx was cancelled during the send (StopAndCancel)
// and the attempt did not succeed, the delivery is released without spending
// an attempt and ctx's error is returned.
//
// When the client's Queue and Ledger are one LedgerQueue, the ledger write
// is also the queue transition (it ends the lease in the same write), so
// steps 3–5 make no separate queue call; the worker also skips step 1 for a
// claim it has just taken, which read the record as pending. The worker
// also gathers the writes of steps 3–5 into batches when the Ledger is a
// BatchLedger; Process itself writes one at a time.
//
// Process returns an *OpError when a port call fails; the lease then expires
// and the delivery is claimed again.
func (c *Client) Process(ctx context.Context, claim Claim) error {
	return c.process(ctx, claim, attemptRun{})
}

// attemptRun is what the worker adds to one run of the state machine.
type attemptRun struct {
	// fresh says the claim was handed out by c.queue just now, which for a
	// LedgerQueue already answers step 1.
	fresh bool
	// batch, when set, takes the ledger writes of steps 3–5.
	batch *batcher
	// freeSlot, when set, gives the attempt's worker slot back once its
	// write is queued for a batch (the worker frees it at the end anyway).
	freeSlot func()
}

// record makes one of the ledger writes of steps 3–5, through the worker's
// batcher when there is one.
func (c *Client) record(ctx context.Context, run attemptRun, w LedgerWrite) error {
	var err error
	switch {
	case run.batch != nil:
		err = run.batch.write(w, run.freeSlot)
	case w.Delivered != nil:
		err = c.ledger.MarkDelivered(ctx, *w.Delivered)
	case w.Retry != nil:
		err = c.ledger.RecordRetry(ctx, *w.Retry)
	default:
		err = c.ledger.RecordDeadLetter(ctx, *w.DeadLetter)
	}
	if err == nil {
		return nil
	}
	op := "ledger.record_dead_letter"
	switch {
	case w.Delivered != nil:
		op = "ledger.mark_delivered"
	case w.Retry != nil:
		op = "ledger.record_retry"
	}
	return opErr(op, w.deliveryID(), err)
}

func (c *Client) process(ctx context.Context, claim Claim, run attemptRun) error {
	if c.sender == nil {
		return invalid(ErrInvalidConfig, "Sender", "is required to process deliveries")
	}
	d, lease := claim.Delivery, claim.Lease

	delivered := false
	if !run.fresh || !c.ledgerQueue {
		var err error
		delivered, err = c.ledger.WasDelivered(ctx, d.ID)
		if err != nil {
			return c.failBeforeSend(ctx, d, lease, opErr("ledger.was_delivered", d.ID, err))
		}
	}
	if delivered {
		if err := c.queue.Acknowledge(ctx, AckParams{ID: d.ID, Lease: lease, Now: c.clock.Now()}); err != nil {
			return opErr("queue.acknowledge", d.ID, err)
		}
		c.observe(ctx, Event{Kind: EventDuplicate, Delivery: d})
		return nil
	}

	now := c.clock.Now()
	dest, err := c.destination(ctx, d.DestinationID, run.fresh)
	if errors.Is(err, ErrDestinationNotFound) {
		return c.deadLetter(ctx, run, d, lease, ReasonDestinationNotFound, nil, nil, now)
	}
	if err != nil {
		return c.failBeforeSend(ctx, d, lease, opErr("destinations.get", d.ID, err))
	}
	c.worker.noteDestination(dest, now, c.cfg)
	if dest.Paused || dest.Disabled {
		reason := ReasonDestinationPaused
		if dest.Disabled {
			reason = ReasonDestinationDisabled
		}
		return c.release(ctx, d, lease, reason, now.Add(c.cfg.PausedRecheck), now)
	}
	policy := c.policyFor(d, &dest)
	if policy.MaxAge > 0 && !now.Before(d.WindowStartsAt().Add(policy.MaxAge)) {
		return c.deadLetter(ctx, run, d, lease, ReasonWindowExpired, nil, nil, now)
	}

	rules := c.rulesFor(dest)
	adm, err := c.admitSend(ctx, d, rules, run.fresh, now)
	if err != nil {
		return c.failBeforeSend(ctx, d, lease, err)
	}
	if !adm.ok {
		// Held, over its rate or behind an open circuit: wait without
		// spending an attempt, and claim nothing more for it until then.
		c.worker.block(d.DestinationID, adm.until)
		return c.release(ctx, d, lease, adm.reason, adm.until, now)
	}

	sendCtx, cancel := c.clock.WithDeadline(ctx, lease.ExpiresAt)
	res := c.sender.Send(sendCtx, SendParams{Delivery: d, Destination: dest, Now: now})
	cancel()
	finished := c.clock.Now()
	if res.Kind < KindDelivered || res.Kind > KindPermanent {
		res = Unknown(ReasonSenderError).WithDetail(fmt.Sprintf("sender returned invalid kind %d", int(res.Kind)))
	}
	c.observe(ctx, Event{Kind: EventAttemptFinished, Delivery: d, Result: &res, Latency: finished.Sub(now)})

	if ctx.Err() != nil && res.Kind != KindDelivered {
		// Cancelled by our own shutdown: the attempt is not the recipient's
		// fault, so it does not spend the budget. The recipient may still
		// have applied it; the next attempt carries the same ID.
		if err := c.release(context.WithoutCancel(ctx), d, lease, ReasonSenderError, finished, finished); err != nil {
			return err
		}
		return ctx.Err()
	}
	ctx = context.WithoutCancel(ctx)
	c.recordOutcome(ctx, &d, &res, rules, policy, adm.probe, finished)

	if res.DisableDestination {
		if err := c.destinations.Disable(ctx, DisableParams{ID: d.DestinationID, Reason: res.Reason, Now: finished}); err != nil {
			return opErr("destinations.disable", d.ID, err)
		}
		c.worker.dests.forget(d.DestinationID)
		c.observe(ctx, Event{Kind: EventDestinationDisabled, Delivery: d, Result: &res, Reason: res.Reason})
	}

	attempt := Attempt{
		DeliveryID: d.ID, Number: d.Attempt, StartedAt: now, FinishedAt: finished,
		Kind: res.Kind, Outcome: res.Outcome, Reason: res.Reason,
		StatusCode: res.StatusCode, Detail: res.Detail,
	}
	switch {
	case res.Kind == KindDelivered:
		if err := c.record(ctx, run, LedgerWrite{Delivered: &MarkDeliveredParams{ID: d.ID, Lease: lease, Attempt: attempt, Now: finished}}); err != nil {
			return err
		}
		if !c.ledgerQueue {
			if err := c.queue.Acknowledge(ctx, AckParams{ID: d.ID, Lease: lease, Now: finished}); err != nil {
				return opErr("queue.acknowledge", d.ID, err)
			}
		}
		d.State, d.LastOutcome, d.LastReason, d.UpdatedAt = StateDelivered, res.Outcome, res.Reason, finished
		c.observe(ctx, Event{Kind: EventDelivered, Delivery: d, Result: &res})
		return nil
	case res.Kind == KindPermanent:
		return c.deadLetter(ctx, run, d, lease, res.Reason, &attempt, &res, finished)
	case d.BudgetAttempt() >= policy.MaxAttempts:
		return c.deadLetter(ctx, run, d, lease, ReasonAttemptsExhausted, &attempt, &res, finished)
	}

	delay := NextDelay(policy, d.BudgetAttempt(), c.randomFloat(), res.RetryAfter)
	at := finished.Add(delay)
	if policy.MaxAge > 0 && !at.Before(d.WindowStartsAt().Add(policy.MaxAge)) {
		return c.deadLetter(ctx, run, d, lease, ReasonWindowExpired, &attempt, &res, finished)
	}
	attempt.NextAttemptAt = at
	if err := c.record(ctx, run, LedgerWrite{Retry: &RecordRetryParams{
		ID: d.ID, Lease: lease, Attempt: attempt, NextAttempt: d.Attempt + 1, NextAttemptAt: at, Now: finished,
	}}); err != nil {
		return err
	}
	next := d
	next.Attempt, next.NextAttemptAt = d.Attempt+1, at
	next.LastOutcome, next.LastReason, next.UpdatedAt = res.Outcome, res.Reason, finished
	if !c.ledgerQueue {
		if err := c.queue.RetryAt(ctx, RetryAtParams{Delivery: next, Lease: lease, At: at, Now: finished}); err != nil {
			return opErr("queue.retry_at", d.ID, err)
		}
	}
	c.observe(ctx, Event{Kind: EventRetryScheduled, Delivery: next, Result: &res, Delay: delay, At: at})
	return nil
}

// deadLetter records the dead-letter in the ledger, then moves the delivery
// to the queue's dead-letter path.
func (c *Client) deadLetter(ctx context.Context, run attemptRun, d Delivery, lease Lease, reason string, attempt *Attempt, res *Result, now time.Time) error {
	if err := c.record(ctx, run, LedgerWrite{DeadLetter: &RecordDeadLetterParams{ID: d.ID, Lease: lease, Reason: reason, Attempt: attempt, Now: now}}); err != nil {
		return err
	}
	d.State, d.LastReason, d.UpdatedAt = StateDead, reason, now
	if attempt != nil {
		d.LastOutcome = attempt.Outcome
	}
	if !c.ledgerQueue {
		if err := c.queue.DeadLetter(ctx, DeadLetterParams{Delivery: d, Lease: lease, Reason: reason, Now: now}); err != nil {
			return opErr("queue.dead_letter", d.ID, err)
		}
	}
	// Result (nil when nothing was sent) lets observers tell a permanent
	// rejection from an exhausted budget.
	c.observe(ctx, Event{Kind: EventDeadLettered, Delivery: d, Reason: reason, Result: res})
	return nil
}

// failBeforeSend returns the error of a port call made before the send. If
// our own shutdown cancelled ctx (StopAndCancel) — which a store that honours
// ctx reports as that call's failure — the delivery is released at once
// without spending an attempt, as a cancelled send is, rather than left to
// its lease.
func (c *Client) failBeforeSend(ctx context.Context, d Delivery, lease Lease, err error) error {
	if ctx.Err() == nil {
		return err
	}
	now := c.clock.Now()
	if rerr := c.release(context.WithoutCancel(ctx), d, lease, ReasonSenderError, now, now); rerr != nil {
		return rerr
	}
	return ctx.Err()
}

func (c *Client) release(ctx context.Context, d Delivery, lease Lease, reason string, at, now time.Time) error {
	if err := c.queue.Release(ctx, ReleaseParams{ID: d.ID, Lease: lease, At: at, Now: now}); err != nil {
		return opErr("queue.release", d.ID, err)
	}
	c.observe(ctx, Event{Kind: EventReleased, Delivery: d, Reason: reason, At: at, Delay: at.Sub(now)})
	return nil
}
