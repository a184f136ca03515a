package hookrelay

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// EventName names a transition reported to an Observer.
type EventName string

const (
	// EventClaimed: a worker claimed the delivery under a lease.
	EventClaimed EventName = "claimed"
	// EventAttemptFinished: a send returned; Result and Latency are set.
	EventAttemptFinished EventName = "attempt_finished"
	// EventRetryScheduled: the next attempt is recorded; Delay and At are set.
	EventRetryScheduled EventName = "retry_scheduled"
	// EventDelivered: recorded as delivered and acknowledged.
	EventDelivered EventName = "delivered"
	// EventDuplicate: the ledger already said delivered; acknowledged
	// without sending.
	EventDuplicate EventName = "duplicate"
	// EventDeadLettered: recorded dead; Reason is set.
	EventDeadLettered EventName = "dead_lettered"
	// EventReleased: handed back without spending an attempt (destination
	// paused, disabled, saturated, held, rate-limited or behind an open
	// circuit, or work cancelled); Reason is set.
	EventReleased EventName = "released"
	// EventDestinationDisabled: the recipient said it is gone (Reason
	// destination_gone), or every attempt to it failed for
	// Config.DisableAfterFailingFor (Reason destination_failing, Delay the
	// span).
	EventDestinationDisabled EventName = "destination_disabled"
	// EventDestinationPaused and EventDestinationResumed: an operator
	// paused or resumed a destination; Delivery.DestinationID names it.
	EventDestinationPaused  EventName = "destination_paused"
	EventDestinationResumed EventName = "destination_resumed"
	// EventDestinationEnabled: an operator re-enabled a disabled
	// destination; Delivery.DestinationID names it.
	EventDestinationEnabled EventName = "destination_enabled"
	// EventDestinationHeld: a 429 or 503 with Retry-After holds every
	// delivery to the destination until At (Delay is the hold); Result is
	// the attempt that asked for it.
	EventDestinationHeld EventName = "destination_held"
	// EventCircuitOpened: the destination's circuit breaker opened after
	// Count failed attempts in a row (or a failed probe); nothing is sent
	// to it until At, when one probe delivery goes.
	EventCircuitOpened EventName = "circuit_opened"
	// EventCircuitClosed: a delivery to a destination whose circuit was
	// open got an answer; sending resumes.
	EventCircuitClosed EventName = "circuit_closed"
	// EventDestinationGuardCleared: an operator cleared the destination's
	// guard (Client.ClearDestinationGuard): its holds were lifted and its
	// circuit closed. Delivery.DestinationID names it; At is when the guard
	// would have let it be sent (zero or past: it held nothing), Count the
	// failures in a row it had.
	EventDestinationGuardCleared EventName = "destination_guard_cleared"
	// EventRedriven: an operator moved a dead delivery back to pending.
	EventRedriven EventName = "redriven"
	// EventHistoryRemoved: the retention cleaner removed Count records of
	// one destination (Delivery.DestinationID) in one state
	// (Delivery.State), with their attempts.
	EventHistoryRemoved EventName = "history_removed"
	// EventAttemptsCompacted: the retention cleaner compacted the attempts
	// of Count delivered records of one destination into summaries.
	EventAttemptsCompacted EventName = "attempts_compacted"
	// EventRepublished: a pending delivery that had gone unleased for the
	// recovery grace period (its message presumably lost between the
	// ledger's create and the broker's publish) was published again.
	EventRepublished EventName = "republished"
	// EventWorkerError: a port call failed; Err is set. The worker backs off
	// and resumes; the affected lease expires and is claimed again.
	EventWorkerError EventName = "worker_error"
)

// Event is one transition. Delivery carries the record (payload included);
// an Observer that logs or exports must not emit Delivery.Payload.
type Event struct {
	Name     EventName
	Delivery Delivery
	// Result is set for EventAttemptFinished and the transitions that
	// follow an attempt.
	Result *Result
	// Latency is the duration of the send, for EventAttemptFinished.
	Latency time.Duration
	// Delay and At describe a scheduled retry or a release.
	Delay time.Duration
	At    time.Time
	// Reason is the dead-letter or release reason.
	Reason string
	// Count is the number of records an EventHistoryRemoved or
	// EventAttemptsCompacted reports.
	Count int64
	// Err is set for EventWorkerError; it carries no secret.
	Err error
	// Time is when the event happened, from the client's clock.
	Time time.Time
}

// Observer is the one hook the core calls at every transition. It is called
// synchronously on the worker's goroutines, so it must be fast and safe for
// concurrent use. Adapters (logs, metrics, traces) implement it; the core
// imports none of them.
//
// An Observer is told of a transition after it is recorded, so a panic in
// Observe cannot undo it: the client recovers it, the worker carries on, and
// the panic is reported to the Observer as an EventWorkerError whose
// OpError.Op is "observer.observe". The other observers of an Observers
// are told of the event all the same.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// Observers fans one event out to several observers, in order.
type Observers []Observer

// Observe calls each observer. One that panics does not keep the event
// from the others: the first panic is passed on once they all ran.
func (os Observers) Observe(ctx context.Context, e Event) {
	var first any
	for _, o := range os {
		if r := observeOne(ctx, o, e); r != nil && first == nil {
			first = r
		}
	}
	if first != nil {
		panic(first)
	}
}

// observeOne calls o and returns what it panicked with, or nil.
func observeOne(ctx context.Context, o Observer, e Event) (panicked any) {
	defer func() { panicked = recover() }()
	o.Observe(ctx, e)
	return nil
}

type nopObserver struct{}

func (nopObserver) Observe(context.Context, Event) {}

// opObserve names an Observer that panicked, in the EventWorkerError
// that reports it.
const opObserve = "observer.observe"

func (c *Client) observe(ctx context.Context, e Event) {
	if e.Time.IsZero() {
		e.Time = c.clock.Now()
	}
	defer func() {
		if r := recover(); r != nil {
			c.observerPanicked(ctx, e, r)
		}
	}()
	c.observer.Observe(ctx, e)
}

// observerPanicked reports an Observer's panic on e as an EventWorkerError
// (op observer.observe) to the observer. The transition e told of is
// recorded already, so the worker goes on; a panic in the report itself,
// or in reporting an earlier panic, is dropped rather than reported again.
func (c *Client) observerPanicked(ctx context.Context, e Event, r any) {
	var oe *OpError
	if e.Name == EventWorkerError && errors.As(e.Err, &oe) && oe.Op == opObserve {
		return
	}
	defer func() { _ = recover() }()
	c.observer.Observe(ctx, Event{
		Name: EventWorkerError, Delivery: e.Delivery, Time: e.Time,
		Err: opErr(opObserve, e.Delivery.ID, fmt.Errorf("observer panicked on %s: %v", e.Name, r)),
	})
}
