package measure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay"
)

type calls []string

func (c *calls) add(format string, args ...any) { *c = append(*c, fmt.Sprintf(format, args...)) }

func (c *calls) Attempt(_ context.Context, dest, outcome, reason string) {
	c.add("attempt %s %s %s", dest, outcome, reason)
}
func (c *calls) AttemptLatency(_ context.Context, dest string, d time.Duration) {
	c.add("latency %s %v", dest, d)
}
func (c *calls) DeadLettered(_ context.Context, dest, reason string) {
	c.add("dead %s %s", dest, reason)
}
func (c *calls) Released(_ context.Context, dest, reason string) {
	c.add("released %s %s", dest, reason)
}
func (c *calls) DestinationDisabled(_ context.Context, dest, reason string) {
	c.add("disabled %s %s", dest, reason)
}
func (c *calls) Redriven(_ context.Context, dest string)  { c.add("redriven %s", dest) }
func (c *calls) Duplicate(_ context.Context, dest string) { c.add("duplicate %s", dest) }
func (c *calls) WorkerError(_ context.Context, op string) { c.add("worker_error %s", op) }
func (c *calls) HistoryRemoved(_ context.Context, dest, state string, n int64) {
	c.add("removed %s %s %d", dest, state, n)
}
func (c *calls) AttemptsCompacted(_ context.Context, dest string, n int64) {
	c.add("compacted %s %d", dest, n)
}
func (c *calls) Republished(_ context.Context, dest string) { c.add("republished %s", dest) }
func (c *calls) GuardChanged(_ context.Context, dest, change string) {
	c.add("guard %s %s", dest, change)
}

func TestDispatchCountsEachAttemptByTheDecisionAfterIt(t *testing.T) {
	d := hookrelay.Delivery{ID: "whd_1", DestinationID: "acme"}
	res := func(r hookrelay.Result) *hookrelay.Result { return &r }
	tests := []struct {
		name string
		e    hookrelay.Event
		want []string
	}{
		{"claimed counts nothing", hookrelay.Event{Name: hookrelay.EventClaimed, Delivery: d}, nil},
		{"attempt finished records latency",
			hookrelay.Event{Name: hookrelay.EventAttemptFinished, Delivery: d, Result: res(hookrelay.Delivered(200)), Latency: 250 * time.Millisecond},
			[]string{"latency acme 250ms"}},
		{"delivered", hookrelay.Event{Name: hookrelay.EventDelivered, Delivery: d, Result: res(hookrelay.Delivered(200))},
			[]string{"attempt acme delivered "}},
		{"retry scheduled carries the attempt's reason",
			hookrelay.Event{Name: hookrelay.EventRetryScheduled, Delivery: d, Result: res(hookrelay.Retryable(hookrelay.ReasonServiceUnavailable))},
			[]string{"attempt acme retry_scheduled service_unavailable"}},
		{"permanent rejection",
			hookrelay.Event{Name: hookrelay.EventDeadLettered, Delivery: d, Reason: hookrelay.ReasonAuthRejected, Result: res(hookrelay.Permanent(hookrelay.ReasonAuthRejected))},
			[]string{"attempt acme permanently_rejected auth_rejected", "dead acme auth_rejected"}},
		{"budget exhausted",
			hookrelay.Event{Name: hookrelay.EventDeadLettered, Delivery: d, Reason: hookrelay.ReasonAttemptsExhausted, Result: res(hookrelay.Unknown(hookrelay.ReasonTimeout))},
			[]string{"attempt acme dead_lettered timeout", "dead acme attempts_exhausted"}},
		{"dead-lettered without an attempt",
			hookrelay.Event{Name: hookrelay.EventDeadLettered, Delivery: d, Reason: hookrelay.ReasonWindowExpired},
			[]string{"dead acme delivery_window_expired"}},
		{"released", hookrelay.Event{Name: hookrelay.EventReleased, Delivery: d, Reason: hookrelay.ReasonDestinationPaused},
			[]string{"released acme destination_paused"}},
		{"disabled", hookrelay.Event{Name: hookrelay.EventDestinationDisabled, Delivery: d, Reason: hookrelay.ReasonDestinationGone},
			[]string{"disabled acme destination_gone"}},
		{"redriven", hookrelay.Event{Name: hookrelay.EventRedriven, Delivery: d}, []string{"redriven acme"}},
		{"duplicate", hookrelay.Event{Name: hookrelay.EventDuplicate, Delivery: d}, []string{"duplicate acme"}},
		{"worker error names the operation",
			hookrelay.Event{Name: hookrelay.EventWorkerError, Err: &hookrelay.OpError{Op: "queue.claim", Err: errors.New("down")}},
			[]string{"worker_error queue.claim"}},
		{"worker error without an operation",
			hookrelay.Event{Name: hookrelay.EventWorkerError, Err: errors.New("boom")},
			[]string{"worker_error unknown"}},
		{"history removed counts the batch by state",
			hookrelay.Event{Name: hookrelay.EventHistoryRemoved, Delivery: hookrelay.Delivery{DestinationID: "acme", State: hookrelay.StateDelivered}, Count: 500},
			[]string{"removed acme delivered 500"}},
		{"attempts compacted counts the batch",
			hookrelay.Event{Name: hookrelay.EventAttemptsCompacted, Delivery: hookrelay.Delivery{DestinationID: "acme", State: hookrelay.StateDelivered}, Count: 3},
			[]string{"compacted acme 3"}},
		{"republished", hookrelay.Event{Name: hookrelay.EventRepublished, Delivery: d}, []string{"republished acme"}},
		{"held", hookrelay.Event{Name: hookrelay.EventDestinationHeld, Delivery: d}, []string{"guard acme destination_held"}},
		{"circuit opened", hookrelay.Event{Name: hookrelay.EventCircuitOpened, Delivery: d}, []string{"guard acme circuit_opened"}},
		{"circuit closed", hookrelay.Event{Name: hookrelay.EventCircuitClosed, Delivery: d}, []string{"guard acme circuit_closed"}},
		{"guard cleared", hookrelay.Event{Name: hookrelay.EventDestinationGuardCleared, Delivery: d}, []string{"guard acme destination_guard_cleared"}},
		{"free-text reason is bounded",
			hookrelay.Event{Name: hookrelay.EventRetryScheduled, Delivery: d, Result: res(hookrelay.Retryable("Bearer abc123 refused"))},
			[]string{"attempt acme retry_scheduled other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got calls
			Dispatch(context.Background(), tt.e, &got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLabel(t *testing.T) {
	for in, want := range map[string]string{
		"":                        "",
		"rate_limited":            "rate_limited",
		"queue.claim":             "queue.claim",
		"Rate Limited":            Other,
		"https://u:p@x":           Other,
		string(make([]byte, 65)):  Other,
		"a_reason_of_exactly_ok1": "a_reason_of_exactly_ok1",
	} {
		if got := Label(in); got != want {
			t.Errorf("Label(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGuardOfReadsTheGuardFieldsAtNow(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	_, ok := GuardOf(hookrelay.DestinationStats{DestinationID: "acme"}, now)
	if ok {
		t.Fatal("a row with no guard state has no guard gauges")
	}
	g, ok := GuardOf(hookrelay.DestinationStats{DestinationID: "acme", Circuit: hookrelay.CircuitHalfOpen, ConsecutiveFailures: 4,
		HeldUntil: now.Add(30 * time.Second), FailingSince: now.Add(-time.Hour)}, now)
	if !ok || g != (Guard{CircuitOpen: 1, ConsecutiveFailures: 4, HeldSeconds: 30, FailingSeconds: 3600}) {
		t.Fatalf("got %+v, %v", g, ok)
	}
}

func TestDestinationIsValidUTF8AndBounded(t *testing.T) {
	long := strings.Repeat("d", hookrelay.MaxStoredStringBytes+10)
	for in, want := range map[string]string{
		"acme":     "acme",
		"ac\xffme": "ac\uFFFDme",
		long:       long[:hookrelay.MaxStoredStringBytes] + "…",
	} {
		if got := Destination(in); got != want {
			t.Errorf("Destination(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestByLabelMergesRowsThatShareALabel(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got := ByLabel([]hookrelay.DestinationStats{
		{DestinationID: "a\xffb", Pending: 1, OldestEligibleAge: time.Second, Circuit: hookrelay.CircuitClosed},
		{DestinationID: "other", Pending: 7},
		{DestinationID: "a\xfeb", Pending: 2, Dead: 3, OldestEligibleAge: time.Minute, Circuit: hookrelay.CircuitOpen,
			ConsecutiveFailures: 4, HeldUntil: t0, FailingSince: t0},
	})
	if len(got) != 2 || got[0].DestinationID != "a\uFFFDb" || got[1].DestinationID != "other" {
		t.Fatalf("rows %+v, want a\uFFFDb merged, then other", got)
	}
	m := got[0]
	if m.Pending != 3 || m.Dead != 3 || m.OldestEligibleAge != time.Minute || m.Circuit != hookrelay.CircuitOpen ||
		m.ConsecutiveFailures != 4 || !m.HeldUntil.Equal(t0) || !m.FailingSince.Equal(t0) {
		t.Errorf("merged row %+v", m)
	}
}
