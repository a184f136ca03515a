package hookrelay

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Process runs the state machine for one claimed delivery, in exactly this
// order:
//
//  1. If the ledger says delivered → acknowledge and stop (duplicate message).
//  2. Resolve the destination (paused or disabled → release without spending
//     an attempt; unknown → dead-letter), dead-letter a delivery past its
//     window or past an attempt budget its policy shrank below, and send.
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
	// overLimit, when set, is asked once the destination is looked up
	// whether the attempt would exceed the destination's concurrency
	// limit; if so it has taken the claim back (Client.overLimit) and the
	// attempt ends without sending.
	overLimit func(Claim) bool
	// handover is the batch write of the goroutine running the attempt
	// (batcher.write).
	handover *batchedWrite
	// settleCtx, when set, is context.WithoutCancel of the ctx the attempt
	// runs under, made once by the worker rather than once per attempt.
	settleCtx context.Context
}

// record makes one of the ledger writes of steps 3–5, through the worker's
// batcher when there is one.
func (c *Client) record(ctx context.Context, run attemptRun, w LedgerWrite) error {
	var err error
	switch {
	case run.batch != nil:
		err = run.batch.write(run.handover, w, run.freeSlot)
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
	return opErr(op, w.DeliveryID(), err)
}

// process is the state machine of Process, in three steps: resolve what
// to send (or settle the delivery without sending), send, then record the
// result and move the delivery on.
func (c *Client) process(ctx context.Context, claim Claim, run attemptRun) error {
	if c.sender == nil {
		return invalid(ErrInvalidConfig, "Sender", "is required to process deliveries")
	}
	a, ok, err := c.resolve(ctx, claim, run)
	if !ok {
		return err
	}
	res, finished, err := c.send(ctx, a)
	if err != nil {
		return err
	}
	settleCtx := run.settleCtx
	if settleCtx == nil {
		settleCtx = context.WithoutCancel(ctx)
	}
	return c.settle(settleCtx, run, a, res, finished)
}

// attemptPlan is what resolve decided: the delivery, under its lease, is
// to be sent to dest now.
type attemptPlan struct {
	d      Delivery
	lease  Lease
	dest   Destination
	policy Policy
	rules  guardRules
	probe  bool      // the attempt is a half-open circuit's probe
	now    time.Time // when the attempt starts
}

// resolve is steps 1 and 2 up to the send: it returns the attempt to make,
// or ok false when the delivery was settled without sending (duplicate,
// dead-lettered, released) or a port call failed (err).
func (c *Client) resolve(ctx context.Context, claim Claim, run attemptRun) (a attemptPlan, ok bool, err error) {
	d, lease := claim.Delivery, claim.Lease
	delivered := false
	if !run.fresh || !c.ledgerQueue {
		delivered, err = c.ledger.WasDelivered(ctx, d.ID)
		if err != nil {
			return a, false, c.failBeforeSend(ctx, d, lease, opErr("ledger.was_delivered", d.ID, err))
		}
	}
	if delivered {
		if err := c.queue.Acknowledge(ctx, AckParams{ID: d.ID, Lease: lease, Now: c.clock.Now()}); err != nil {
			return a, false, opErr("queue.acknowledge", d.ID, err)
		}
		c.observe(ctx, Event{Name: EventDuplicate, Delivery: d})
		return a, false, nil
	}

	now := c.clock.Now()
	dest, err := c.destination(ctx, d.DestinationID, run.fresh)
	if errors.Is(err, ErrDestinationNotFound) {
		return a, false, c.deadLetter(ctx, run, d, lease, ReasonDestinationNotFound, nil, nil, now)
	}
	if err != nil {
		return a, false, c.failBeforeSend(ctx, d, lease, opErr("destinations.get", d.ID, err))
	}
	c.worker.noteDestination(dest, now, c.cfg)
	policy := c.policyFor(d, &dest)
	if policy.MaxAge > 0 && !now.Before(d.WindowStartsAt().Add(policy.MaxAge)) {
		// Before the pause: a delivery past its window is never sent, so
		// a paused destination does not hold it as pending until resumed.
		return a, false, c.deadLetter(ctx, run, d, lease, ReasonWindowExpired, nil, nil, now)
	}
	if dest.Paused || dest.Disabled {
		reason := ReasonDestinationPaused
		if dest.Disabled {
			reason = ReasonDestinationDisabled
		}
		return a, false, c.release(ctx, d, lease, reason, now.Add(c.cfg.PausedRecheck), now)
	}
	if run.overLimit != nil && run.overLimit(claim) {
		// Before the rate limit takes a token: this attempt waits for a
		// slot of its destination instead of sending.
		return a, false, nil
	}
	if d.BudgetAttempt() > policy.MaxAttempts {
		// The policy shrank while the delivery waited: its budget is
		// already spent, and another request would exceed it.
		return a, false, c.deadLetter(ctx, run, d, lease, ReasonAttemptsExhausted, nil, nil, now)
	}

	rules := c.rulesFor(dest)
	adm, err := c.admitSend(ctx, d, rules, run.fresh, now)
	if err != nil {
		return a, false, c.failBeforeSend(ctx, d, lease, err)
	}
	if !adm.ok {
		// Held, over its rate or behind an open circuit: wait without
		// spending an attempt, and claim nothing more for it until then.
		// The delivery itself is due again within PausedRecheck, as a
		// paused destination's is: claims skip it while the guard holds
		// (this worker's by its block, the SQL store's by the stored
		// state), and once an operator clears the guard
		// (ClearDestinationGuard) it goes then, not when the hold of up
		// to the policy's MaxDelay would have ended.
		c.worker.block(d.DestinationID, adm.until)
		at := adm.until
		if recheck := now.Add(c.cfg.PausedRecheck); recheck.Before(at) {
			at = recheck
		}
		return a, false, c.release(ctx, d, lease, adm.reason, at, now)
	}
	return attemptPlan{d: d, lease: lease, dest: dest, policy: policy, rules: rules, probe: adm.probe, now: now}, true, nil
}

// send makes the attempt, bounded by the lease, and reports it to the
// observer. If our own shutdown cancelled ctx during a send that did not
// succeed, the delivery is released without spending an attempt and ctx's
// error returned.
func (c *Client) send(ctx context.Context, a attemptPlan) (Result, time.Time, error) {
	sendCtx, cancel := c.sendContext(ctx, a)
	// The latency is the send's own: a.now came before the destination
	// read and the guard's store write, which a busy store (a guard row
	// other workers hold locked) can make last longer than the send.
	started := c.clock.Now()
	res := c.sender.Send(sendCtx, SendParams{Delivery: a.d, Destination: a.dest, Now: a.now})
	if cancel != nil {
		cancel()
	}
	finished := c.clock.Now()
	if res.Kind < KindDelivered || res.Kind > KindPermanent {
		res = Unknown(ReasonSenderError).WithDetail(fmt.Sprintf("sender returned invalid kind %d", int(res.Kind)))
	}
	c.observe(ctx, Event{Name: EventAttemptFinished, Delivery: a.d, Result: &res, Latency: finished.Sub(started)})

	if ctx.Err() != nil && res.Kind != KindDelivered {
		// Cancelled by our own shutdown: the attempt is not the recipient's
		// fault, so it does not spend the budget. The recipient may still
		// have applied it; the next attempt carries the same ID.
		if a.probe {
			c.giveBackProbe(context.WithoutCancel(ctx), a.d, finished)
		}
		if err := c.release(context.WithoutCancel(ctx), a.d, a.lease, ReasonSenderError, finished, finished); err != nil {
			return res, finished, err
		}
		return res, finished, ctx.Err()
	}
	return res, finished, nil
}

// sendContext bounds a send by its lease: no attempt may run past it, or
// another worker could claim and send the delivery meanwhile. A sender
// that bounds its own attempts (SendTimeouter) by a timeout that ends
// well before the lease needs no second bound, and the client then adds
// none: a deadline context costs a timer, a channel and a child
// registered with (and removed from) the worker's context under its lock,
// on every send. cancel is nil when ctx is returned as it is.
func (c *Client) sendContext(ctx context.Context, a attemptPlan) (context.Context, context.CancelFunc) {
	if c.timedSender != nil {
		// The margin covers what the sender does before its timer starts.
		if t := c.timedSender.SendTimeout(a.dest); t > 0 && a.now.Add(t+sendTimeoutMargin).Before(a.lease.ExpiresAt) {
			return ctx, nil
		}
	}
	return c.clock.WithDeadline(ctx, a.lease.ExpiresAt)
}

// sendTimeoutMargin is how much earlier than its lease a sender's own
// timeout must end for sendContext to add no deadline.
const sendTimeoutMargin = time.Second

// settle is steps 3 to 5: it records what the attempt showed (the guard's
// state, a destination the recipient said is gone) and moves the delivery
// on — delivered, dead-lettered or retried — ledger write first. ctx is not
// cancelled: a result that was seen is recorded.
func (c *Client) settle(ctx context.Context, run attemptRun, a attemptPlan, res Result, finished time.Time) error {
	d, lease, policy := a.d, a.lease, a.policy
	c.recordOutcome(ctx, &d, &res, a.rules, policy, a.probe, finished)

	if res.DisableDestination {
		if err := c.destinations.Disable(ctx, DisableParams{ID: d.DestinationID, Reason: res.Reason, Now: finished}); err != nil {
			return opErr("destinations.disable", d.ID, err)
		}
		c.worker.dests.forget(d.DestinationID)
		c.observe(ctx, Event{Name: EventDestinationDisabled, Delivery: d, Result: &res, Reason: res.Reason})
	}

	attempt := Attempt{
		DeliveryID: d.ID, Number: d.Attempt, StartedAt: a.now, FinishedAt: finished,
		Kind: res.Kind, Outcome: res.Outcome, Reason: res.Reason,
		StatusCode: res.StatusCode, Detail: res.Detail,
	}
	switch {
	case res.Kind == KindDelivered:
		return c.markDelivered(ctx, run, d, lease, attempt, res)
	case res.Kind == KindPermanent:
		return c.deadLetterAttempt(ctx, run, d, lease, res.Reason, attempt, &res, finished)
	case d.BudgetAttempt() >= policy.MaxAttempts:
		return c.deadLetterAttempt(ctx, run, d, lease, ReasonAttemptsExhausted, attempt, &res, finished)
	}
	delay := NextDelay(policy, d.BudgetAttempt(), c.randomFloat(), res.RetryAfter)
	// An uncapped policy may meet a Retry-After of centuries: no store
	// holds that time, and a refused write would send the delivery again
	// each time its lease ran out. It waits as long as a store can say.
	at := storableAfter(finished, delay)
	delay = at.Sub(finished)
	if policy.MaxAge > 0 && !at.Before(d.WindowStartsAt().Add(policy.MaxAge)) {
		return c.deadLetterAttempt(ctx, run, d, lease, ReasonWindowExpired, attempt, &res, finished)
	}
	return c.scheduleRetry(ctx, run, d, lease, attempt, res, delay, at)
}

// markDelivered records the delivery delivered in the ledger, then
// acknowledges it to the queue (step 3).
func (c *Client) markDelivered(ctx context.Context, run attemptRun, d Delivery, lease Lease, attempt Attempt, res Result) error {
	finished := attempt.FinishedAt
	if err := c.record(ctx, run, LedgerWrite{Delivered: &MarkDeliveredParams{ID: d.ID, Lease: lease, Attempt: attempt, Now: finished}}); err != nil {
		return err
	}
	if !c.ledgerQueue {
		if err := c.queue.Acknowledge(ctx, AckParams{ID: d.ID, Lease: lease, Now: finished}); err != nil {
			return opErr("queue.acknowledge", d.ID, err)
		}
	}
	d.State, d.LastOutcome, d.LastReason, d.UpdatedAt = StateDelivered, res.Outcome, res.Reason, finished
	c.observe(ctx, Event{Name: EventDelivered, Delivery: d, Result: &res})
	return nil
}

// scheduleRetry records the failed attempt and the next one in the
// ledger, then schedules it on the queue (step 5).
func (c *Client) scheduleRetry(ctx context.Context, run attemptRun, d Delivery, lease Lease, attempt Attempt, res Result, delay time.Duration, at time.Time) error {
	finished := attempt.FinishedAt
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
	c.observe(ctx, Event{Name: EventRetryScheduled, Delivery: next, Result: &res, Delay: delay, At: at})
	return nil
}

// deadLetterAttempt is deadLetter after an attempt. It takes the attempt
// by value so that settle's copy stays on the stack on the paths that do
// not dead-letter (a delivered attempt's, most of all).
func (c *Client) deadLetterAttempt(ctx context.Context, run attemptRun, d Delivery, lease Lease, reason string, attempt Attempt, res *Result, now time.Time) error {
	return c.deadLetter(ctx, run, d, lease, reason, &attempt, res, now)
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
	c.observe(ctx, Event{Name: EventDeadLettered, Delivery: d, Reason: reason, Result: res})
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

// release hands a claim back without spending an attempt. It asks the
// queue to announce the release (ReleaseParams.Announce) when the reason
// says nothing here will take the delivery — the worker stopping, or a
// call's context that ended — so that workers in other processes take it
// at once; not for the releases of normal operation (a destination
// without room, paused or held), where an announcement would wake every
// worker to find the destination as it was.
func (c *Client) release(ctx context.Context, d Delivery, lease Lease, reason string, at, now time.Time) error {
	return c.releaseAnnounced(ctx, d, lease, reason, at, now, reason == ReasonWorkerStopped || reason == ReasonSenderError)
}

// releaseStopped hands back, at now, claims a stopping worker will not
// start, with no attempt spent, and asks the queue to announce them once:
// the last Release carries Announce, so a DueNotifier store (PostgreSQL)
// sends one notification for the batch, not one per claim, each waking
// every listening worker to claim what the first one's claim took. The
// announcement is made after the others were written, so a worker it wakes
// finds them all; if that last Release fails, the batch goes unannounced
// and the other workers find it at their next poll. A failed Release is
// reported as a worker error.
func (c *Client) releaseStopped(ctx context.Context, claims []Claim) {
	now := c.clock.Now()
	for i, cl := range claims {
		if err := c.releaseAnnounced(ctx, cl.Delivery, cl.Lease, ReasonWorkerStopped, now, now, i == len(claims)-1); err != nil {
			c.observe(ctx, Event{Name: EventWorkerError, Delivery: cl.Delivery, Err: err})
		}
	}
}

func (c *Client) releaseAnnounced(ctx context.Context, d Delivery, lease Lease, reason string, at, now time.Time, announce bool) error {
	if at.After(maxStorableTime) {
		// A PausedRecheck (or a hold) of centuries: no store keeps the
		// time, and a refused release would leave the delivery to be
		// claimed again at every lease's end. Wait as long as one can.
		at = maxStorableTime
	}
	if err := c.queue.Release(ctx, ReleaseParams{ID: d.ID, Lease: lease, At: at, Now: now, Announce: announce}); err != nil {
		return opErr("queue.release", d.ID, err)
	}
	c.observe(ctx, Event{Name: EventReleased, Delivery: d, Reason: reason, At: at, Delay: at.Sub(now)})
	return nil
}
