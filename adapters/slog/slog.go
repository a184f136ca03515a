// Package hookslog is a hookrelay.Observer that writes structured logs with
// log/slog.
//
// Each event is one record whose message names the transition ("delivery
// dead-lettered") and whose attributes identify the delivery:
//
//	event           the hookrelay.EventName
//	delivery_id     the idempotency key, to find the record and the recipient's copy
//	event_id, tenant_id, destination_id, event_type
//	                (an event about a destination and no delivery, such as
//	                destination_paused, has destination_id only)
//	attempt         the attempt the event is about (for retry_scheduled: the
//	                attempt that failed; next_attempt is the one scheduled)
//	scope           the delivery's scope labels, as a group: at most
//	                MaxScopeLabels of them in key order, each key and value
//	                cut to MaxScopeBytes; scope_omitted counts the rest;
//	                values masked as detail is, and the value of a label
//	                named like a credential (api_key, X-Auth-Token) whole
//	outcome         accepted, rejected or unknown (what the sender saw)
//	result          delivered, retryable or permanent
//	reason          why: the dead-letter, release or attempt reason
//	attempt_reason  the final attempt's reason when it differs from reason
//	                (a delivery dead-lettered for attempts_exhausted after a timeout)
//	status          the HTTP status, when there was one
//	detail          the sender's diagnostic, masked and cut to MaxDetailBytes
//	latency, delay, next_attempt_at, retry_after, op, error
//	held_until      when a destination's Retry-After hold ends (destination_held);
//	                for destination_guard_cleared, when the cleared guard would
//	                have let it be sent (left out when it held nothing)
//	consecutive_failures, cool_down, open_until
//	                the failures that opened a circuit, its cool-down and
//	                when its probe goes (circuit_opened); the failures in a
//	                row a cleared guard had (destination_guard_cleared)
//	state, count    the records the retention cleaner removed of a
//	                destination in one state (history_removed), or whose
//	                attempts it compacted (attempts_compacted, count only)
//	failing_for     the span every attempt failed that disabled a
//	                destination (destination_disabled, reason destination_failing)
//
// What is never logged: the payload, the destination's URL, signing secrets
// and headers (the Observer never sees them), and — as a second line of
// defence for a Sender or port that breaks its contract — URL credentials
// (user information and query tokens), Authorization values and whsec_
// secrets inside detail, error text and scope label values.
//
// # Levels
//
// Logs are for what needs attention; the ledger is the audit trail and the
// metrics count successes. DefaultLevel therefore logs the routine path —
// claimed, attempt finished, retry scheduled, delivered, duplicate, released
// — at Debug, so an expected retry is quiet. An operator's redrive, a
// destination's Retry-After hold and a circuit closing are Info; a
// dead-lettered delivery, a destination disabled (by its recipient, or for
// failing for Config.DisableAfterFailingFor) and a circuit opening are
// Warn (someone must act); a worker error (the store or a port failed) is
// Error. Set Config.Level to change any of it, e.g. to log deliveries at
// Info.
package hookslog

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/internal/measure"
	"github.com/hookrelay/hookrelay/adapters/internal/redact"
)

// Config configures an Observer. Zero fields take the documented defaults.
type Config struct {
	// Logger receives the records. Defaults to slog.Default() at the time
	// New is called.
	Logger *slog.Logger
	// Level chooses each event's level. Defaults to DefaultLevel.
	Level func(hookrelay.Event) slog.Level
	// MaxDetailBytes cuts Result.Detail and error text. Defaults to 256.
	MaxDetailBytes int
	// MaxScopeLabels caps the scope labels logged per event (the first in
	// key order; scope_omitted counts the others). Defaults to 16.
	MaxScopeLabels int
	// MaxScopeBytes cuts each logged scope key and value. Defaults to 128.
	MaxScopeBytes int
}

// Observer logs every hookrelay event. It is safe for concurrent use and
// cheap when the event's level is disabled.
type Observer struct {
	logger     *slog.Logger
	level      func(hookrelay.Event) slog.Level
	maxDetail  int
	maxLabels  int
	maxScopeSz int
}

var _ hookrelay.Observer = (*Observer)(nil)

// New returns an Observer.
func New(cfg Config) *Observer {
	o := &Observer{logger: cfg.Logger, level: cfg.Level, maxDetail: cfg.MaxDetailBytes, maxLabels: cfg.MaxScopeLabels, maxScopeSz: cfg.MaxScopeBytes}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	if o.level == nil {
		o.level = DefaultLevel
	}
	if o.maxDetail <= 0 {
		o.maxDetail = redact.DefaultMax
	}
	if o.maxLabels <= 0 {
		o.maxLabels = 16
	}
	if o.maxScopeSz <= 0 {
		o.maxScopeSz = 128
	}
	return o
}

// DefaultLevel is the default level of each event kind (see the package
// documentation for why).
func DefaultLevel(e hookrelay.Event) slog.Level {
	switch e.Name {
	case hookrelay.EventWorkerError:
		return slog.LevelError
	case hookrelay.EventDeadLettered, hookrelay.EventDestinationDisabled, hookrelay.EventCircuitOpened:
		return slog.LevelWarn
	case hookrelay.EventRedriven:
		return slog.LevelInfo
	case hookrelay.EventClaimed, hookrelay.EventAttemptFinished, hookrelay.EventRetryScheduled,
		hookrelay.EventDelivered, hookrelay.EventDuplicate, hookrelay.EventReleased:
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

var messages = map[hookrelay.EventName]string{
	hookrelay.EventClaimed:                 "delivery claimed",
	hookrelay.EventAttemptFinished:         "attempt finished",
	hookrelay.EventRetryScheduled:          "retry scheduled",
	hookrelay.EventDelivered:               "delivery delivered",
	hookrelay.EventDuplicate:               "duplicate acknowledged without sending",
	hookrelay.EventDeadLettered:            "delivery dead-lettered",
	hookrelay.EventReleased:                "delivery released without spending an attempt",
	hookrelay.EventDestinationDisabled:     "destination disabled by its recipient",
	hookrelay.EventRedriven:                "delivery redriven",
	hookrelay.EventDestinationPaused:       "destination paused by an operator",
	hookrelay.EventDestinationResumed:      "destination resumed by an operator",
	hookrelay.EventDestinationEnabled:      "destination re-enabled by an operator",
	hookrelay.EventDestinationHeld:         "destination held: it asked for a pause (Retry-After)",
	hookrelay.EventCircuitOpened:           "destination circuit opened: nothing is sent until the probe",
	hookrelay.EventCircuitClosed:           "destination circuit closed: sending resumed",
	hookrelay.EventDestinationGuardCleared: "destination guard cleared by an operator: holds lifted, circuit closed",
	hookrelay.EventHistoryRemoved:          "delivery history removed by retention",
	hookrelay.EventAttemptsCompacted:       "attempt details compacted by retention",
	hookrelay.EventRepublished:             "pending delivery published again after its message was lost",
	hookrelay.EventWorkerError:             "worker error",
}

// Observe implements hookrelay.Observer. The record's time is e.Time (the
// client's clock), so logs agree with the ledger; a zero e.Time leaves the
// record without a time rather than reading the wall clock.
func (o *Observer) Observe(ctx context.Context, e hookrelay.Event) {
	level := o.level(e)
	if !o.logger.Enabled(ctx, level) {
		return
	}
	msg, ok := messages[e.Name]
	if !ok {
		msg = "hookrelay event"
	}
	if e.Name == hookrelay.EventDestinationDisabled && e.Reason == hookrelay.ReasonDestinationFailing {
		msg = "destination disabled: every attempt failed for the configured span"
	}
	attrs := make([]slog.Attr, 0, 20)
	attrs = append(attrs, slog.String("event", string(e.Name)))
	if d := e.Delivery; d.ID != "" {
		attempt := d.Attempt
		if e.Name == hookrelay.EventRetryScheduled {
			// The record already names the next attempt.
			attempt--
		}
		attrs = append(attrs,
			slog.String("delivery_id", d.ID),
			slog.String("event_id", d.EventID),
			slog.String("tenant_id", d.TenantID),
			slog.String("destination_id", d.DestinationID),
			slog.String("event_type", d.EventType),
			slog.Int("attempt", attempt),
		)
		if len(d.Scope) > 0 {
			keys := slices.Sorted(maps.Keys(d.Scope))
			shown := keys[:min(len(keys), o.maxLabels)]
			scope := make([]any, 0, len(shown))
			for _, k := range shown {
				scope = append(scope, slog.String(redact.Cut(k, o.maxScopeSz), redact.Field(k, d.Scope[k], o.maxScopeSz)))
			}
			attrs = append(attrs, slog.Group("scope", scope...))
			if omitted := len(keys) - len(shown); omitted > 0 {
				attrs = append(attrs, slog.Int("scope_omitted", omitted))
			}
		}
	} else if d.DestinationID != "" {
		// An event about a destination, not a delivery (an operator's
		// pause, the retention cleaner's counts).
		attrs = append(attrs, slog.String("destination_id", d.DestinationID))
	}
	reason := e.Reason
	if r := e.Result; r != nil {
		attrs = append(attrs, slog.String("outcome", o.text(string(r.Outcome))), slog.String("result", r.Kind.String()))
		if reason == "" {
			reason = r.Reason
		} else if r.Reason != "" && r.Reason != reason {
			attrs = append(attrs, slog.String("attempt_reason", o.text(r.Reason)))
		}
		if r.StatusCode != 0 {
			attrs = append(attrs, slog.Int("status", r.StatusCode))
		}
		if r.RetryAfter > 0 {
			attrs = append(attrs, slog.Duration("retry_after", r.RetryAfter))
		}
		if r.Detail != "" {
			attrs = append(attrs, slog.String("detail", o.text(r.Detail)))
		}
	}
	if reason != "" {
		attrs = append(attrs, slog.String("reason", o.text(reason)))
	}
	switch e.Name {
	case hookrelay.EventAttemptFinished:
		attrs = append(attrs, slog.Duration("latency", e.Latency))
	case hookrelay.EventRetryScheduled, hookrelay.EventReleased:
		attrs = append(attrs, slog.Duration("delay", e.Delay), slog.Time("next_attempt_at", e.At))
		if e.Name == hookrelay.EventRetryScheduled {
			attrs = append(attrs, slog.Int("next_attempt", e.Delivery.Attempt))
		}
	case hookrelay.EventDestinationHeld:
		attrs = append(attrs, slog.Duration("delay", e.Delay), slog.Time("held_until", e.At))
	case hookrelay.EventCircuitOpened:
		attrs = append(attrs, slog.Int64("consecutive_failures", e.Count), slog.Duration("cool_down", e.Delay), slog.Time("open_until", e.At))
	case hookrelay.EventDestinationGuardCleared:
		if !e.At.IsZero() {
			attrs = append(attrs, slog.Time("held_until", e.At))
		}
		attrs = append(attrs, slog.Int64("consecutive_failures", e.Count))
	case hookrelay.EventHistoryRemoved:
		attrs = append(attrs, slog.String("state", string(e.Delivery.State)), slog.Int64("count", e.Count))
	case hookrelay.EventAttemptsCompacted:
		attrs = append(attrs, slog.Int64("count", e.Count))
	case hookrelay.EventDestinationDisabled:
		if e.Delay > 0 {
			attrs = append(attrs, slog.Duration("failing_for", e.Delay))
		}
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("op", measure.Op(e.Err)), slog.String("error", o.text(e.Err.Error())))
	}
	rec := slog.NewRecord(e.Time, level, msg, 0)
	rec.AddAttrs(attrs...)
	_ = o.logger.Handler().Handle(ctx, rec) // a handler's write error has nowhere better to go
}

// text masks secrets in free text and cuts it.
func (o *Observer) text(s string) string { return redact.Text(s, o.maxDetail) }
