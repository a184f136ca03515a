// Package brokerq is the part of a broker-backed hookrelay.Queue that does
// not depend on the broker: turning a fetched message into a claim through
// the ledger's lease, keeping in-flight message handles by (delivery ID,
// lease token), and mapping the Queue transitions onto three broker
// operations (acknowledge, redeliver after a delay, dead-letter). The NATS
// JetStream and RabbitMQ adapters supply those operations.
//
// The broker decides when a message is handed out; the ledger decides what
// may run. A message the ledger refuses is never lost: it is acknowledged
// only when the ledger says the delivery is finished (delivered, dead) or
// does not exist, and is otherwise redelivered later.
package brokerq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/internal/redact"
)

// Broker is what an adapter provides for its message handle type M. Every
// method must be safe for concurrent use.
type Broker[M any] interface {
	// Publish sends one envelope per delivery and returns once the broker
	// has confirmed each (server acknowledgement, publisher confirm).
	Publish(ctx context.Context, deliveries []hookrelay.Delivery) error
	// Fetch returns up to n messages, waiting at most wait (real time) for
	// them to arrive; none is not an error. Messages returned with an error
	// are handed out all the same: the Queue claims or hands them back.
	Fetch(ctx context.Context, n int, wait time.Duration) ([]M, error)
	// Stale reports that m came over a channel that has since closed: the
	// broker put the message back, so this handle must not be handed out.
	Stale(m M) bool
	// Body is the message's envelope.
	Body(m M) []byte
	// Ack removes the message from the broker.
	Ack(ctx context.Context, m M) error
	// Redeliver hands the message out again after delay (at most the
	// adapter's longest delay; zero means at once) and lets go of this
	// handle. next, when not nil, is the record the message should carry
	// from now on; a broker that redelivers the same message may ignore it.
	Redeliver(ctx context.Context, m M, delay time.Duration, next *hookrelay.Delivery) error
	// DeadLetter publishes the envelope (d, or the raw body when d is nil)
	// to the dead-letter path with the reason (at most MaxReasonBytes,
	// valid UTF-8), then acknowledges m. On failure m is left as it was;
	// the Queue hands it back.
	DeadLetter(ctx context.Context, m M, d *hookrelay.Delivery, reason string) error
}

// Config holds the delays a Queue uses. Zero fields are invalid; adapters
// apply their documented defaults first.
type Config struct {
	// MaxDelay caps every broker delay. A delivery due later is redelivered
	// after MaxDelay, checked against the ledger (not due: delayed again),
	// so the broker never sleeps through a schedule the ledger changed.
	MaxDelay time.Duration
	// SkipDelay is how long a message for a skipped destination (paused,
	// disabled, or at the most the worker holds for it) waits before it is
	// offered again. It spends no attempt.
	SkipDelay time.Duration
	// ParkDelay is how long a message this library cannot read (a newer
	// envelope version) waits before it is offered again, for a newer
	// worker to pick up. It is never dropped.
	ParkDelay time.Duration
	// ErrorDelay is how long a message waits when the ledger could not be
	// asked about it.
	ErrorDelay time.Duration
	// ClaimWait is how long (real time) one Claim lets the broker push
	// messages that are on their way; zero for a broker that answers a
	// fetch with what it holds.
	ClaimWait time.Duration
	// Logger receives a record for every message acknowledged without
	// running (finished or unknown delivery), parked or dead-lettered as
	// unreadable.
	Logger *slog.Logger
}

// maxFetchRounds bounds the fetches of one Claim: messages for skipped
// destinations are set aside and the broker asked again, so a paused
// destination at the head of the queue cannot starve the others.
const maxFetchRounds = 8

type key struct {
	id    string
	token int64
}

type inflight[M any] struct {
	msg   M
	lease hookrelay.Lease
}

// Queue implements hookrelay.Queue over a Broker and a LeaseLedger. It is
// safe for concurrent use.
type Queue[M any] struct {
	broker Broker[M]
	ledger hookrelay.LeaseLedger
	batch  hookrelay.LeaseBatchLedger // the ledger, when it leases many at once; else nil
	cfg    Config

	mu       sync.Mutex
	inflight map[key]inflight[M]
}

// New returns a Queue.
func New[M any](b Broker[M], ledger hookrelay.LeaseLedger, cfg Config) (*Queue[M], error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	// Not hookrelay.As: a wrapper of the ledger that does not lease in
	// batches itself is called as it is, not bypassed.
	batch, _ := ledger.(hookrelay.LeaseBatchLedger)
	return &Queue[M]{broker: b, ledger: ledger, batch: batch, cfg: cfg, inflight: map[key]inflight[M]{}}, nil
}

// Enqueue publishes one envelope per delivery and waits for the broker's
// confirmation. Enqueueing a delivery twice publishes two messages; the
// ledger's lease absorbs the second.
func (q *Queue[M]) Enqueue(ctx context.Context, deliveries []hookrelay.Delivery) error {
	if len(deliveries) == 0 {
		return nil
	}
	return q.broker.Publish(ctx, deliveries)
}

// Claim hands out up to p.Limit deliveries. It first takes back this
// process's in-flight messages whose lease expired on the caller's clock
// (what the broker would redeliver after its ack wait), then fetches from
// the broker. Each message becomes a claim only if the ledger grants a
// lease; the claim carries the ledger's record. A ledger that leases many
// at once (hookrelay.LeaseBatchLedger) is asked once for the messages of
// each fetch: one commit for them all instead of one each. Claims of one
// call are ordered by NextAttemptAt; the broker decides the order across
// calls.
func (q *Queue[M]) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	if p.LeaseFor <= 0 {
		return nil, fmt.Errorf("%w: claim: LeaseFor must be positive", hookrelay.ErrInvalidConfig)
	}
	var out []hookrelay.Claim
	var firstErr error
	note := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	// take decides message m (delivery d) by the ledger's answer to its
	// lease.
	take := func(m M, d hookrelay.Delivery, c hookrelay.Claim, err error) {
		c, ok, err := q.settle(ctx, m, d, p, c, err)
		note(err)
		if ok {
			out = append(out, c)
		}
	}
	admit := func(msgs []M) {
		var ready []M
		var ds []hookrelay.Delivery
		for _, m := range msgs {
			d, ok, err := q.prepare(ctx, m, p)
			note(err)
			if ok {
				ready, ds = append(ready, m), append(ds, d)
			}
		}
		if q.batch != nil && len(ready) > 1 {
			params := make([]hookrelay.AcquireLeaseParams, len(ds))
			for i, d := range ds {
				params[i] = hookrelay.AcquireLeaseParams{ID: d.ID, Holder: p.Holder, Now: p.Now, LeaseFor: p.LeaseFor}
			}
			claims, errs, err := q.batch.AcquireLeases(ctx, params)
			if err == nil && (len(claims) != len(params) || len(errs) != len(params)) {
				err = fmt.Errorf("%d claims and %d errors for %d leases asked", len(claims), len(errs), len(params))
			}
			if err != nil {
				// The ledger is unreachable: hand them all back untouched.
				for _, m := range ready {
					_ = q.broker.Redeliver(ctx, m, q.cfg.ErrorDelay, nil)
				}
				note(&hookrelay.OpError{Op: "ledger.acquire_leases", Err: err})
				return
			}
			for i, m := range ready {
				take(m, ds[i], claims[i], errs[i])
			}
			return
		}
		for i, m := range ready {
			if firstErr != nil {
				// The ledger is unreachable: hand the rest back untouched.
				for _, rest := range ready[i:] {
					_ = q.broker.Redeliver(ctx, rest, q.cfg.ErrorDelay, nil)
				}
				return
			}
			c, err := q.ledger.AcquireLease(ctx, hookrelay.AcquireLeaseParams{ID: ds[i].ID, Holder: p.Holder, Now: p.Now, LeaseFor: p.LeaseFor})
			take(m, ds[i], c, err)
		}
	}
	admit(q.expired(p.Now, p.Limit))
	// The wait is a budget for the whole call, on the real clock: it is the
	// broker's network time, not business time.
	deadline := time.Now().Add(q.cfg.ClaimWait)
	for round := 0; len(out) < p.Limit && round < maxFetchRounds && firstErr == nil; round++ {
		msgs, err := q.broker.Fetch(ctx, p.Limit-len(out), max(time.Until(deadline), 0))
		// Messages that came with an error are handed out to this process
		// all the same: admitted like any others, or they would stay out
		// of reach until the broker's ack wait.
		admit(msgs)
		note(err)
		if len(msgs) == 0 {
			break
		}
	}
	if firstErr != nil && len(out) == 0 {
		return nil, firstErr
	}
	slices.SortStableFunc(out, func(a, b hookrelay.Claim) int {
		return a.Delivery.NextAttemptAt.Compare(b.Delivery.NextAttemptAt)
	})
	return out, nil
}

// expired removes and returns up to limit in-flight messages whose lease
// ended at now. Handles from a closed channel are forgotten: the broker
// hands those messages out again itself.
func (q *Queue[M]) expired(now time.Time, limit int) []M {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []M
	for k, e := range q.inflight {
		if len(out) == limit {
			break
		}
		if q.broker.Stale(e.msg) {
			delete(q.inflight, k)
			continue
		}
		if !e.lease.ExpiresAt.After(now) {
			delete(q.inflight, k)
			out = append(out, e.msg)
		}
	}
	return out
}

// prepare reads one message's delivery. ok means it asks for a lease; else
// the message was parked (a newer library's), dead-lettered (unreadable)
// or put off (a skipped destination), and err reports a broker failure.
func (q *Queue[M]) prepare(ctx context.Context, m M, p hookrelay.ClaimParams) (hookrelay.Delivery, bool, error) {
	d, err := hookrelay.UnmarshalEnvelope(q.broker.Body(m))
	if errors.Is(err, hookrelay.ErrUnknownEnvelopeVersion) {
		q.cfg.Logger.WarnContext(ctx, "hookrelay broker queue: message from a newer library parked", "error", err, "delay", q.cfg.ParkDelay)
		return d, false, q.broker.Redeliver(ctx, m, q.cfg.ParkDelay, nil)
	}
	if err != nil {
		q.cfg.Logger.ErrorContext(ctx, "hookrelay broker queue: unreadable message dead-lettered", "error", err)
		return d, false, q.deadLetter(ctx, m, nil, hookrelay.ReasonMalformedEnvelope)
	}
	if slices.Contains(p.SkipDestinations, d.DestinationID) {
		return d, false, q.broker.Redeliver(ctx, m, q.cfg.SkipDelay, nil)
	}
	return d, true, nil
}

// settle decides one message by the ledger's answer to its lease (c, or
// err): a claim (ok), or acknowledged or redelivered later. The error it
// returns reports a ledger or broker failure.
func (q *Queue[M]) settle(ctx context.Context, m M, d hookrelay.Delivery, p hookrelay.ClaimParams, c hookrelay.Claim, err error) (hookrelay.Claim, bool, error) {
	var notDue *hookrelay.NotDueError
	switch {
	case err == nil:
		q.mu.Lock()
		q.inflight[key{c.Delivery.ID, c.Lease.Token}] = inflight[M]{msg: m, lease: c.Lease}
		q.mu.Unlock()
		return c, true, nil
	case errors.As(err, &notDue):
		return hookrelay.Claim{}, false, q.broker.Redeliver(ctx, m, q.delay(notDue.At.Sub(p.Now)), nil)
	case errors.Is(err, hookrelay.ErrLeaseLost):
		// Another holder's lease is live (a duplicate message, or a
		// redelivery while a slow worker still runs it): look again once
		// that lease can have ended.
		return hookrelay.Claim{}, false, q.broker.Redeliver(ctx, m, q.delay(p.LeaseFor), nil)
	case errors.Is(err, hookrelay.ErrInvalidState), errors.Is(err, hookrelay.ErrNotFound):
		// Delivered or dead: the message is a leftover copy. Not found: the
		// record was never committed (its create failed or rolled back).
		q.cfg.Logger.InfoContext(ctx, "hookrelay broker queue: message for a finished or unknown delivery acknowledged",
			"delivery_id", d.ID, "reason", err.Error())
		return hookrelay.Claim{}, false, q.broker.Ack(ctx, m)
	default:
		_ = q.broker.Redeliver(ctx, m, q.cfg.ErrorDelay, nil)
		return hookrelay.Claim{}, false, &hookrelay.OpError{Op: "ledger.acquire_lease", DeliveryID: d.ID, Err: err}
	}
}

func (q *Queue[M]) delay(d time.Duration) time.Duration {
	return min(max(d, 0), q.cfg.MaxDelay)
}

// take removes the in-flight message of (id, lease).
func (q *Queue[M]) take(id string, lease hookrelay.Lease) (M, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := key{id, lease.Token}
	e, ok := q.inflight[k]
	delete(q.inflight, k)
	return e.msg, ok
}

// unknownLease answers a transition whose message this process no longer
// holds: harmless (nil) when the ledger says the delivery is finished and
// finished is allowed, else ErrLeaseLost.
func (q *Queue[M]) unknownLease(ctx context.Context, id string, finished ...hookrelay.State) error {
	d, err := q.ledger.Get(ctx, id)
	if err == nil && slices.Contains(finished, d.State) {
		return nil
	}
	if err != nil && !errors.Is(err, hookrelay.ErrNotFound) {
		return err
	}
	return hookrelay.ErrLeaseLost
}

// Acknowledge acknowledges the message. Acknowledging a delivery that is
// already finished is a no-op; a lease this process does not hold for a
// pending delivery returns ErrLeaseLost.
func (q *Queue[M]) Acknowledge(ctx context.Context, p hookrelay.AckParams) error {
	m, ok := q.take(p.ID, p.Lease)
	if !ok {
		return q.unknownLease(ctx, p.ID, hookrelay.StateDelivered, hookrelay.StateDead)
	}
	return q.broker.Ack(ctx, m)
}

// RetryAt redelivers the same message (same delivery ID) at p.At.
func (q *Queue[M]) RetryAt(ctx context.Context, p hookrelay.RetryAtParams) error {
	m, ok := q.take(p.Delivery.ID, p.Lease)
	if !ok {
		return q.unknownLease(ctx, p.Delivery.ID)
	}
	next := p.Delivery
	return q.handBack(ctx, m, hookrelay.ReleaseLeaseParams{ID: p.Delivery.ID, Lease: p.Lease, Now: p.Now}, q.delay(p.At.Sub(p.Now)), &next)
}

// handBack ends the ledger lease, so the delivery can be leased again as
// soon as it is due, and redelivers the message after delay. The message is
// redelivered even when the lease was lost: the ledger decides then.
func (q *Queue[M]) handBack(ctx context.Context, m M, rel hookrelay.ReleaseLeaseParams, delay time.Duration, next *hookrelay.Delivery) error {
	relErr := q.ledger.ReleaseLease(ctx, rel)
	if err := q.broker.Redeliver(ctx, m, delay, next); err != nil {
		return err
	}
	if relErr != nil {
		return &hookrelay.OpError{Op: "ledger.release_lease", DeliveryID: rel.ID, Err: relErr}
	}
	return nil
}

// MaxReasonBytes bounds the reason a dead-letter message carries in a
// header: a Sender's reason can be any length (the ledger keeps
// hookrelay.StorableText of it), and a long one made the broker refuse
// the message (over NATS max_payload, over an AMQP frame).
const MaxReasonBytes = 256

// DeadLetter publishes the delivery to the dead-letter path with its reason
// (cut to MaxReasonBytes, "…" marking the cut) and acknowledges the message. Dead-lettering a delivery this process no
// longer holds is a no-op when the ledger already says dead.
func (q *Queue[M]) DeadLetter(ctx context.Context, p hookrelay.DeadLetterParams) error {
	m, ok := q.take(p.Delivery.ID, p.Lease)
	if !ok {
		return q.unknownLease(ctx, p.Delivery.ID, hookrelay.StateDead)
	}
	// Fence: an operator may have redriven the delivery between the
	// ledger's dead-letter and this transition. The redrive gave it a new
	// token, and the message then belongs to the pending record.
	err := q.ledger.ReleaseLease(ctx, hookrelay.ReleaseLeaseParams{ID: p.Delivery.ID, Lease: p.Lease, Now: p.Now})
	if err != nil {
		_ = q.broker.Redeliver(ctx, m, 0, nil)
		return &hookrelay.OpError{Op: "ledger.release_lease", DeliveryID: p.Delivery.ID, Err: err}
	}
	d := p.Delivery
	return q.deadLetter(ctx, m, &d, redact.Cut(p.Reason, MaxReasonBytes))
}

// deadLetter moves m to the dead-letter path, or hands it back when that
// fails: a message neither acknowledged nor handed back stays out of reach
// (on RabbitMQ, held on its channel with its prefetch slot until the
// connection closes). Once back, the ledger decides: a dead record's
// message is acknowledged, a pending one's claimed again.
func (q *Queue[M]) deadLetter(ctx context.Context, m M, d *hookrelay.Delivery, reason string) error {
	err := q.broker.DeadLetter(ctx, m, d, reason)
	if err != nil {
		_ = q.broker.Redeliver(ctx, m, q.cfg.ErrorDelay, nil)
	}
	return err
}

// Release redelivers the message at p.At without spending an attempt.
func (q *Queue[M]) Release(ctx context.Context, p hookrelay.ReleaseParams) error {
	m, ok := q.take(p.ID, p.Lease)
	if !ok {
		return q.unknownLease(ctx, p.ID)
	}
	// The ledger learns At, so the message is refused if the broker
	// brings it back early (a delay capped at the longest broker delay).
	return q.handBack(ctx, m, hookrelay.ReleaseLeaseParams{ID: p.ID, Lease: p.Lease, At: p.At, Now: p.Now}, q.delay(p.At.Sub(p.Now)), nil)
}

// InFlight returns how many messages this process holds under a lease.
func (q *Queue[M]) InFlight() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.inflight)
}

// Bucket rounds d up to the smallest bucket that holds it, or the largest
// bucket. buckets must be sorted ascending and non-empty.
func Bucket(buckets []time.Duration, d time.Duration) time.Duration {
	i, _ := slices.BinarySearchFunc(buckets, d, cmp.Compare[time.Duration])
	if i == len(buckets) {
		return buckets[len(buckets)-1]
	}
	return buckets[i]
}
