// Package measure says what each hookrelay.Event means for metrics, once,
// so that the Prometheus and OpenTelemetry adapters count the same things
// under the same bounded labels.
package measure

import (
	"context"
	"errors"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/internal/redact"
)

// Decisions: what the state machine decided after an attempt (the
// attempts metric's decision label; "outcome" is an attempt's
// accepted/rejected/unknown).
const (
	DecisionDelivered           = "delivered"
	DecisionRetryScheduled      = "retry_scheduled"
	DecisionPermanentlyRejected = "permanently_rejected"
	DecisionDeadLettered        = "dead_lettered"
)

// Other replaces a label value that is not a short lower_snake_case word,
// so a misbehaving Sender cannot blow up label cardinality or put free text
// (possibly a secret) into a label.
const Other = "other"

// Recorder receives what one event adds to the metrics. Label values passed
// to it are bounded: destination IDs (as Destination returns them), the
// outcomes above, reasons that passed
// Label, operation names of the core.
type Recorder interface {
	// Attempt counts one finished attempt by what was decided after it;
	// reason is the attempt's result reason ("" when delivered).
	Attempt(ctx context.Context, destination, decision, reason string)
	// AttemptLatency records how long one send took.
	AttemptLatency(ctx context.Context, destination string, d time.Duration)
	// DeadLettered counts one delivery moved to the dead-letter state, with
	// or without a final attempt.
	DeadLettered(ctx context.Context, destination, reason string)
	// Released counts a delivery handed back without spending an attempt
	// (destination paused, disabled or saturated; shutdown).
	Released(ctx context.Context, destination, reason string)
	// DestinationDisabled counts a destination disabled by its recipient.
	DestinationDisabled(ctx context.Context, destination, reason string)
	// Redriven counts a dead delivery moved back to pending by an operator.
	Redriven(ctx context.Context, destination string)
	// Duplicate counts a delivery acknowledged without sending because the
	// ledger already said delivered.
	Duplicate(ctx context.Context, destination string)
	// WorkerError counts a failed port call by operation.
	WorkerError(ctx context.Context, op string)
	// HistoryRemoved counts n records of one state (delivered, dead) that
	// the retention cleaner removed.
	HistoryRemoved(ctx context.Context, destination, state string, n int64)
	// AttemptsCompacted counts n delivered records whose attempts the
	// retention cleaner compacted into a summary.
	AttemptsCompacted(ctx context.Context, destination string, n int64)
	// Republished counts a pending delivery published again because its
	// broker message was presumably lost.
	Republished(ctx context.Context, destination string)
	// GuardChanged counts a change of a destination's guard: change is the
	// event kind (destination_held, circuit_opened, circuit_closed,
	// destination_guard_cleared).
	GuardChanged(ctx context.Context, destination, change string)
}

// Guard gauges derived from one DestinationStats row at now.
type Guard struct {
	CircuitOpen         int64   // 1 open or half-open, 0 closed
	ConsecutiveFailures int64   // failed attempts in a row
	HeldSeconds         float64 // left of a Retry-After hold
	FailingSeconds      float64 // how long every attempt has failed
}

// GuardOf returns the guard gauges of s at now, and false when s carries
// no guard state (a store that keeps none).
func GuardOf(s hookrelay.DestinationStats, now time.Time) (Guard, bool) {
	if s.Circuit == "" {
		return Guard{}, false
	}
	g := Guard{ConsecutiveFailures: int64(s.ConsecutiveFailures)}
	if s.Circuit == hookrelay.CircuitOpen || s.Circuit == hookrelay.CircuitHalfOpen {
		g.CircuitOpen = 1
	}
	if s.HeldUntil.After(now) {
		g.HeldSeconds = s.HeldUntil.Sub(now).Seconds()
	}
	if !s.FailingSince.IsZero() && now.After(s.FailingSince) {
		g.FailingSeconds = now.Sub(s.FailingSince).Seconds()
	}
	return g, true
}

// Dispatch tells r what e adds to the metrics.
//
// An attempt is counted when the decision after it is recorded: delivered,
// retry_scheduled, permanently_rejected (the recipient refused it for good)
// or dead_lettered (the budget or the delivery window ran out). An attempt
// whose decision could not be recorded (a port call failed) or that was cut
// short by shutdown shows up in the latency histogram and as a worker error
// or a release, not in the attempt count.
func Dispatch(ctx context.Context, e hookrelay.Event, r Recorder) {
	dest := Destination(e.Delivery.DestinationID)
	switch e.Name {
	case hookrelay.EventAttemptFinished:
		r.AttemptLatency(ctx, dest, e.Latency)
	case hookrelay.EventDelivered:
		r.Attempt(ctx, dest, DecisionDelivered, "")
	case hookrelay.EventRetryScheduled:
		r.Attempt(ctx, dest, DecisionRetryScheduled, resultReason(e))
	case hookrelay.EventDeadLettered:
		if e.Result != nil {
			decision := DecisionDeadLettered
			if e.Result.Kind == hookrelay.KindPermanent {
				decision = DecisionPermanentlyRejected
			}
			r.Attempt(ctx, dest, decision, resultReason(e))
		}
		r.DeadLettered(ctx, dest, Label(e.Reason))
	case hookrelay.EventReleased:
		r.Released(ctx, dest, Label(e.Reason))
	case hookrelay.EventDestinationDisabled:
		r.DestinationDisabled(ctx, dest, Label(e.Reason))
	case hookrelay.EventRedriven:
		r.Redriven(ctx, dest)
	case hookrelay.EventDuplicate:
		r.Duplicate(ctx, dest)
	case hookrelay.EventWorkerError:
		r.WorkerError(ctx, Op(e.Err))
	case hookrelay.EventHistoryRemoved:
		r.HistoryRemoved(ctx, dest, Label(string(e.Delivery.State)), e.Count)
	case hookrelay.EventAttemptsCompacted:
		r.AttemptsCompacted(ctx, dest, e.Count)
	case hookrelay.EventRepublished:
		r.Republished(ctx, dest)
	case hookrelay.EventDestinationHeld, hookrelay.EventCircuitOpened, hookrelay.EventCircuitClosed, hookrelay.EventDestinationGuardCleared:
		r.GuardChanged(ctx, dest, string(e.Name))
	}
}

func resultReason(e hookrelay.Event) string {
	if e.Result == nil {
		return Label(e.Reason)
	}
	return Label(e.Result.Reason)
}

// Label returns v when it is empty or a lower_snake_case word (dots
// allowed) of at most 64 bytes, as every reason and operation name of the
// core and the HTTP adapter is, and Other otherwise.
func Label(v string) string {
	if len(v) > 64 {
		return Other
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return Other
		}
	}
	return v
}

// Destination returns a destination ID as a label value: valid UTF-8 (each
// run of bytes that is not becomes U+FFFD) of at most
// hookrelay.MaxStoredStringBytes, "…" marking a cut. Every Ledger refuses
// other IDs at Create, but Prometheus panics on a label value that is not
// UTF-8 and an OTLP exporter drops the whole export, so a Ledger that
// skipped the check must not be able to crash the worker or lose metrics.
func Destination(id string) string { return redact.Cut(id, hookrelay.MaxStoredStringBytes) }

// ByLabel returns stats with each DestinationID as Destination returns it,
// rows that share one label value merged into one: counts summed, the
// oldest ages, and the worst guard (open or half-open over closed, the most
// failures, the latest hold, the earliest failing start). Two IDs that
// differ only in bytes that are not UTF-8 (from a Ledger that skipped
// CheckStorable) would otherwise be two series with the same labels, which
// fails a whole Prometheus scrape. Rows keep their first order.
func ByLabel(stats []hookrelay.DestinationStats) []hookrelay.DestinationStats {
	out := make([]hookrelay.DestinationStats, 0, len(stats))
	at := make(map[string]int, len(stats))
	for _, s := range stats {
		s.DestinationID = Destination(s.DestinationID)
		i, ok := at[s.DestinationID]
		if !ok {
			at[s.DestinationID] = len(out)
			out = append(out, s)
			continue
		}
		m := &out[i]
		m.Pending += s.Pending
		m.EligibleNow += s.EligibleNow
		m.Dead += s.Dead
		m.OldestEligibleAge = max(m.OldestEligibleAge, s.OldestEligibleAge)
		m.OldestDeadAge = max(m.OldestDeadAge, s.OldestDeadAge)
		if m.Circuit == "" || m.Circuit == hookrelay.CircuitClosed && s.Circuit != "" {
			m.Circuit = s.Circuit
		}
		m.ConsecutiveFailures = max(m.ConsecutiveFailures, s.ConsecutiveFailures)
		if s.HeldUntil.After(m.HeldUntil) {
			m.HeldUntil = s.HeldUntil
		}
		if s.RateLimitedUntil.After(m.RateLimitedUntil) {
			m.RateLimitedUntil = s.RateLimitedUntil
		}
		if !s.FailingSince.IsZero() && (m.FailingSince.IsZero() || s.FailingSince.Before(m.FailingSince)) {
			m.FailingSince = s.FailingSince
		}
	}
	return out
}

// Op names the core operation of a worker error ("queue.claim",
// "ledger.record_retry"…), or "unknown".
func Op(err error) string {
	var oe *hookrelay.OpError
	if errors.As(err, &oe) {
		if l := Label(oe.Op); l != Other && l != "" {
			return l
		}
	}
	return "unknown"
}

// ReadStats calls stats at clk's now, bounded by timeout, for a scrape or
// an observable-gauge callback, which have no context of their own.
func ReadStats(stats hookrelay.LedgerStats, clk clock.Clock, timeout time.Duration) ([]hookrelay.DestinationStats, error) {
	ctx, cancel := clk.WithTimeout(context.Background(), timeout)
	defer cancel()
	return stats.Stats(ctx, hookrelay.StatsParams{Now: clk.Now()})
}
