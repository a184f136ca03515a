package hookslog_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay"
	hookslog "github.com/hookrelay/hookrelay/adapters/slog"
	"github.com/hookrelay/hookrelay/internal/scriptedrun"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logLines runs fn with a JSON logger at level and returns each record.
func logLines(t *testing.T, level slog.Level, fn func(o *hookslog.Observer)) ([]map[string]any, string) {
	t.Helper()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
	fn(hookslog.New(hookslog.Config{Logger: logger}))
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return lines, buf.String()
}

func find(lines []map[string]any, event, dest string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["event"] == event && l["destination_id"] == dest {
			out = append(out, l)
		}
	}
	return out
}

// wantFields checks the named fields of one record; numbers compare as
// JSON numbers.
func wantFields(t *testing.T, what string, l map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if n, ok := v.(int); ok {
			v = float64(n)
		}
		if l[k] != v {
			t.Errorf("%s: %s = %#v, want %#v (record %v)", what, k, l[k], v, l)
		}
	}
}

func TestDefaultLevelsKeepRetriesQuietAndWarnOnDeadLetters(t *testing.T) {
	lines, _ := logLines(t, slog.LevelInfo, func(o *hookslog.Observer) { scriptedrun.New().Outcomes(t, o, nil) })
	if len(lines) != 2 {
		t.Fatalf("at Info, %d records, want only the 2 dead-letters: %v", len(lines), lines)
	}
	for _, l := range lines {
		if l["level"] != "WARN" || l["event"] != "dead_lettered" {
			t.Errorf("record at Info: %v, want a WARN dead_lettered", l)
		}
	}
}

func TestRecordsCarryTheDeliveryAndWhatHappened(t *testing.T) {
	lines, _ := logLines(t, slog.LevelDebug, func(o *hookslog.Observer) { scriptedrun.New().Outcomes(t, o, nil) })

	retry := find(lines, "retry_scheduled", "globex")
	if len(retry) != 1 {
		t.Fatalf("globex retry_scheduled records: %d, want 1", len(retry))
	}
	wantFields(t, "globex retry", retry[0], map[string]any{
		"level": "DEBUG", "msg": "retry scheduled",
		"event_id": "evt-1", "tenant_id": "tenant-1", "event_type": "lease.payment_recorded",
		"attempt": 1, "next_attempt": 2, "outcome": "rejected", "result": "retryable",
		"reason": "service_unavailable", "status": 503, "delay": 500e6, // nanoseconds
		"next_attempt_at": "2026-03-01T12:00:00.8Z", "time": "2026-03-01T12:00:00.3Z",
	})
	if id, _ := retry[0]["delivery_id"].(string); !strings.HasPrefix(id, "whd_") {
		t.Errorf("delivery_id %q", id)
	}
	if scope, _ := retry[0]["scope"].(map[string]any); scope["property"] != "prop-7" {
		t.Errorf("scope %v, want property prop-7", retry[0]["scope"])
	}

	finished := find(lines, "attempt_finished", "umbrella")
	if len(finished) != 2 {
		t.Fatalf("umbrella attempt_finished records: %d, want 2", len(finished))
	}
	wantFields(t, "umbrella attempt 2", finished[1], map[string]any{
		"attempt": 2, "latency": 400e6, "status": 500, "reason": "server_error",
	})

	dead := find(lines, "dead_lettered", "umbrella")
	if len(dead) != 1 {
		t.Fatalf("umbrella dead_lettered records: %d, want 1", len(dead))
	}
	wantFields(t, "umbrella dead-letter", dead[0], map[string]any{
		"level": "WARN", "attempt": 2, "reason": "attempts_exhausted", "attempt_reason": "server_error",
		"outcome": "rejected", "status": 500,
	})
	dead = find(lines, "dead_lettered", "initech")
	if len(dead) != 1 {
		t.Fatalf("initech dead_lettered records: %d, want 1", len(dead))
	}
	wantFields(t, "initech dead-letter", dead[0], map[string]any{
		"level": "WARN", "attempt": 1, "reason": "auth_rejected", "result": "permanent", "status": 401,
	})
	if _, ok := dead[0]["attempt_reason"]; ok {
		t.Errorf("attempt_reason repeated although equal to reason: %v", dead[0])
	}

	delivered := find(lines, "delivered", "globex")
	if len(delivered) != 1 {
		t.Fatalf("globex delivered records: %d, want 1", len(delivered))
	}
	wantFields(t, "globex delivered", delivered[0], map[string]any{"level": "DEBUG", "attempt": 2, "status": 204})
}

func TestNoSecretOrPayloadInAnyRecord(t *testing.T) {
	lines, raw := logLines(t, slog.LevelDebug, func(o *hookslog.Observer) { scriptedrun.New().Leaky(t, o, nil) })
	for _, s := range scriptedrun.Secrets {
		if strings.Contains(raw, s) {
			t.Errorf("log output contains %q:\n%s", s, raw)
		}
	}
	// The leaked text is still logged, masked: the test looks at real output.
	var masked int
	for _, l := range lines {
		for _, k := range []string{"detail", "error"} {
			if v, _ := l[k].(string); strings.Contains(v, "[REDACTED]") {
				masked++
			}
		}
	}
	if masked != 5 { // two attempt_finished, the retry, the dead-letter, the worker error
		t.Errorf("%d masked detail or error fields, want 5:\n%s", masked, raw)
	}
}

func TestLevelCanBeChanged(t *testing.T) {
	var buf bytes.Buffer
	o := hookslog.New(hookslog.Config{
		Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Level: func(e hookrelay.Event) slog.Level {
			if e.Name == hookrelay.EventDelivered {
				return slog.LevelInfo
			}
			return hookslog.DefaultLevel(e)
		},
	})
	scriptedrun.New().Outcomes(t, o, nil)
	if n := strings.Count(buf.String(), `"event":"delivered"`); n != 2 {
		t.Errorf("%d delivered records at Info, want 2", n)
	}
}

func TestScopeIsCappedInEachRecord(t *testing.T) {
	scope := map[string]string{"huge": strings.Repeat("v", 20<<20)}
	for i := range 40 {
		scope[fmt.Sprintf("label_%02d", i)] = "x"
	}
	d := hookrelay.Delivery{ID: "whd_1", EventID: "evt_1", TenantID: "t", DestinationID: "acct", EventType: "e", Attempt: 1, Scope: scope}
	lines, raw := logLines(t, slog.LevelDebug, func(o *hookslog.Observer) {
		o.Observe(context.Background(), hookrelay.Event{Name: hookrelay.EventDeadLettered, Delivery: d, Reason: "attempts_exhausted"})
	})
	if len(raw) > 8<<10 {
		t.Fatalf("one record is %d bytes; the scope is not capped", len(raw))
	}
	got, _ := lines[0]["scope"].(map[string]any)
	if len(got) != 16 {
		t.Errorf("%d scope labels logged, want the first 16: %v", len(got), got)
	}
	if got["label_00"] != "x" {
		t.Errorf("labels are logged in key order: %v", got)
	}
	wantFields(t, "dead-letter", lines[0], map[string]any{"scope_omitted": 25})
}

// An opened circuit and a destination disabled for failing are Warn, with
// the destination and the reason; a Retry-After hold and a closed circuit
// are Info, with when the hold ends and when the probe goes.
func TestGuardEventsAreLoggedAtTheirLevels(t *testing.T) {
	lines, _ := logLines(t, slog.LevelInfo, func(o *hookslog.Observer) {
		run := scriptedrun.New()
		run.Guards(t, o, nil)
		run.GuardsRecover(t)
	})
	held := find(lines, "destination_held", "acme")
	if len(held) != 1 {
		t.Fatalf("destination_held records: %v", lines)
	}
	wantFields(t, "held", held[0], map[string]any{
		"level": "INFO", "msg": "destination held: it asked for a pause (Retry-After)", "reason": "rate_limited", "status": 429,
		"held_until": scriptedrun.T0.Add(30100 * time.Millisecond).Format(time.RFC3339Nano), "delay": float64(30 * time.Second),
	})
	opened := find(lines, "circuit_opened", "globex")
	if len(opened) != 1 {
		t.Fatalf("circuit_opened records: %v", lines)
	}
	wantFields(t, "opened", opened[0], map[string]any{
		"level": "WARN", "reason": "server_error", "status": 500, "consecutive_failures": 2,
		"open_until": scriptedrun.T0.Add(61400 * time.Millisecond).Format(time.RFC3339Nano), "cool_down": float64(time.Minute),
	})
	closed := find(lines, "circuit_closed", "globex")
	if len(closed) != 1 {
		t.Fatalf("circuit_closed records: %v", lines)
	}
	wantFields(t, "closed", closed[0], map[string]any{"level": "INFO", "msg": "destination circuit closed: sending resumed"})

	lines, _ = logLines(t, slog.LevelWarn, func(o *hookslog.Observer) { scriptedrun.New().FailingDisabled(t, o) })
	disabled := find(lines, "destination_disabled", "hooli")
	if len(disabled) != 1 {
		t.Fatalf("destination_disabled records: %v", lines)
	}
	wantFields(t, "disabled", disabled[0], map[string]any{
		"level": "WARN", "msg": "destination disabled: every attempt failed for the configured span",
		"reason": "destination_failing", "attempt_reason": "server_error", "failing_for": float64(time.Second),
	})
}

// Scope labels are the publisher's free text, logged with every record:
// the same masks as detail apply to their values (URL credentials, query
// tokens, whsec_ keys), and a label named like a credential (api_key,
// X-Auth-Token, password) has its value masked whole. Other labels are
// logged as they are.
func TestScopeValuesAreMasked(t *testing.T) {
	scope := map[string]string{
		"callback":     "https://hookuser:ScopePass77@hooks.example.invalid/in?token=ScopeTok88",
		"api_key":      "ScopeKey99",
		"X-Auth-Token": "ScopeHdr66",
		"signing":      "whsec_U2NvcGVTZWNyZXQ1NQ==",
		"property":     "prop-12",
	}
	d := hookrelay.Delivery{ID: "whd_1", EventID: "evt_1", TenantID: "t", DestinationID: "acct", EventType: "e", Attempt: 1, Scope: scope}
	lines, raw := logLines(t, slog.LevelDebug, func(o *hookslog.Observer) {
		o.Observe(context.Background(), hookrelay.Event{Name: hookrelay.EventDeadLettered, Delivery: d, Reason: "attempts_exhausted"})
	})
	for _, s := range []string{"ScopePass77", "ScopeTok88", "ScopeKey99", "ScopeHdr66", "U2NvcGVTZWNyZXQ1NQ"} {
		if strings.Contains(raw, s) {
			t.Errorf("log output contains %q:\n%s", s, raw)
		}
	}
	got, _ := lines[0]["scope"].(map[string]any)
	if got["property"] != "prop-12" {
		t.Errorf("an ordinary label is changed: %v", got)
	}
	if got["api_key"] != "[REDACTED]" || !strings.Contains(fmt.Sprint(got["callback"]), "hooks.example.invalid") {
		t.Errorf("scope %v: want api_key masked whole, the callback's host kept", got)
	}
}

// A Result.Outcome outside the contract (free text from a broken Sender)
// is logged masked and cut, as detail is.
func TestOutcomeIsMaskedAndCut(t *testing.T) {
	res := hookrelay.Retryable(hookrelay.ReasonServerError)
	res.Outcome = hookrelay.Outcome("failed posting to https://u:OutcomePw1@h.invalid/ " + strings.Repeat("x", 10<<10))
	d := hookrelay.Delivery{ID: "whd_1", EventID: "evt_1", TenantID: "t", DestinationID: "acct", EventType: "e", Attempt: 1}
	_, raw := logLines(t, slog.LevelDebug, func(o *hookslog.Observer) {
		o.Observe(context.Background(), hookrelay.Event{Name: hookrelay.EventAttemptFinished, Delivery: d, Result: &res})
	})
	if strings.Contains(raw, "OutcomePw1") || len(raw) > 2<<10 {
		t.Errorf("outcome logged as it was (%d bytes):\n%.300s", len(raw), raw)
	}
}

// An operator's change to a destination (and the retention cleaner's
// counts) is an event about a destination with no delivery: its record
// still names the destination, or a log of "destination paused by an
// operator" would not say which.
func TestDestinationEventsWithoutADeliveryNameTheDestination(t *testing.T) {
	names := []hookrelay.EventName{hookrelay.EventDestinationPaused, hookrelay.EventDestinationResumed,
		hookrelay.EventDestinationEnabled, hookrelay.EventDestinationGuardCleared, hookrelay.EventHistoryRemoved, hookrelay.EventAttemptsCompacted}
	lines, _ := logLines(t, slog.LevelDebug, func(o *hookslog.Observer) {
		for _, n := range names {
			o.Observe(context.Background(), hookrelay.Event{Name: n, Delivery: hookrelay.Delivery{DestinationID: "acme"}, Time: scriptedrun.T0})
		}
	})
	for _, n := range names {
		got := find(lines, string(n), "acme")
		if len(got) != 1 {
			t.Errorf("%s: %d records naming destination acme, want 1: %v", n, len(got), lines)
			continue
		}
		for _, k := range []string{"delivery_id", "attempt", "tenant_id"} {
			if _, ok := got[0][k]; ok {
				t.Errorf("%s: %s logged for an event about no delivery: %v", n, k, got[0])
			}
		}
	}
}

// A cleared guard's record says what the guard held, as the held and
// circuit-opened records do: when it would have let the destination be
// sent to (held_until, left out when it held nothing) and the failures in
// a row it had (consecutive_failures). The retention cleaner's records
// carry their count.
func TestGuardClearedAndRetentionRecordsCarryTheirNumbers(t *testing.T) {
	until := scriptedrun.T0.Add(90 * time.Second)
	lines, _ := logLines(t, slog.LevelDebug, func(o *hookslog.Observer) {
		ctx := context.Background()
		o.Observe(ctx, hookrelay.Event{Name: hookrelay.EventDestinationGuardCleared, Delivery: hookrelay.Delivery{DestinationID: "acme"}, At: until, Count: 4, Time: scriptedrun.T0})
		o.Observe(ctx, hookrelay.Event{Name: hookrelay.EventDestinationGuardCleared, Delivery: hookrelay.Delivery{DestinationID: "idle"}, Time: scriptedrun.T0})
		o.Observe(ctx, hookrelay.Event{Name: hookrelay.EventHistoryRemoved, Delivery: hookrelay.Delivery{DestinationID: "acme", State: hookrelay.StateDelivered}, Count: 120, Time: scriptedrun.T0})
		o.Observe(ctx, hookrelay.Event{Name: hookrelay.EventAttemptsCompacted, Delivery: hookrelay.Delivery{DestinationID: "acme"}, Count: 7, Time: scriptedrun.T0})
	})
	cleared := find(lines, "destination_guard_cleared", "acme")
	if len(cleared) != 1 {
		t.Fatalf("destination_guard_cleared records: %v", lines)
	}
	wantFields(t, "cleared", cleared[0], map[string]any{
		"level": "INFO", "held_until": until.Format(time.RFC3339Nano), "consecutive_failures": 4,
	})
	idle := find(lines, "destination_guard_cleared", "idle")
	if len(idle) != 1 {
		t.Fatalf("destination_guard_cleared records: %v", lines)
	}
	wantFields(t, "cleared idle", idle[0], map[string]any{"consecutive_failures": 0})
	if _, ok := idle[0]["held_until"]; ok {
		t.Errorf("a guard that held nothing logs held_until: %v", idle[0])
	}
	removed := find(lines, "history_removed", "acme")
	if len(removed) != 1 {
		t.Fatalf("history_removed records: %v", lines)
	}
	wantFields(t, "removed", removed[0], map[string]any{"count": 120, "state": "delivered"})
	compacted := find(lines, "attempts_compacted", "acme")
	if len(compacted) != 1 {
		t.Fatalf("attempts_compacted records: %v", lines)
	}
	wantFields(t, "compacted", compacted[0], map[string]any{"count": 7})
}
