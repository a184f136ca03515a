package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hookrelay/hookrelay"
)

// table starts an aligned table on stdout, with a header row if given.
func (g *globals) table(header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
	if len(header) > 0 {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	return tw
}

// row writes one table row. Cells are stored text (IDs, reasons, a
// recipient's response): each is made one line of terminal-safe text.
func row(tw *tabwriter.Writer, cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = terminalText(strings.ReplaceAll(fmt.Sprint(c), "\t", " "))
		if parts[i] == "" {
			parts[i] = "-"
		}
	}
	fmt.Fprintln(tw, strings.Join(parts, "\t"))
}

func (g *globals) writeJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func fmtAge(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.Round(time.Second).String()
}

// terminalText makes s safe to print on a terminal: every control
// character (C0 including newline and ESC, DEL, C1 including CSI) and every
// byte that is not UTF-8 is written as its Go escape (\x1b, \n, \u009b),
// so stored text cannot move the cursor, clear the screen, retitle the
// window or hide a line.
func terminalText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return s
}

// payloadText shows a payload as text when it is, and its size otherwise.
func payloadText(p []byte) string {
	if utf8.Valid(p) {
		return oneLine(string(p), 200)
	}
	return fmt.Sprintf("(%d bytes of binary)", len(p))
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// deliveryView is a delivery in the CLI's JSON output. The payload is
// embedded as JSON when it is JSON, as a string otherwise.
type deliveryView struct {
	ID              string            `json:"id"`
	EventID         string            `json:"event_id"`
	TenantID        string            `json:"tenant_id"`
	Scope           map[string]string `json:"scope,omitempty"`
	DestinationID   string            `json:"destination_id"`
	EventType       string            `json:"event_type"`
	State           hookrelay.State   `json:"state"`
	LastOutcome     hookrelay.Outcome `json:"last_outcome,omitempty"`
	LastReason      string            `json:"last_reason,omitempty"`
	Attempt         int               `json:"attempt"`
	BudgetStart     int               `json:"budget_start"`
	PolicyVersion   string            `json:"policy_version"`
	EnvelopeVersion int               `json:"envelope_version"`
	FirstQueuedAt   string            `json:"first_queued_at"`
	WindowStart     string            `json:"window_start"`
	NextAttemptAt   string            `json:"next_attempt_at"`
	UpdatedAt       string            `json:"updated_at"`
	Payload         json.RawMessage   `json:"payload"`
}

func viewDelivery(d hookrelay.Delivery) deliveryView {
	payload := json.RawMessage(d.Payload)
	if !json.Valid(d.Payload) {
		payload, _ = json.Marshal(string(d.Payload))
	}
	return deliveryView{
		ID: d.ID, EventID: d.EventID, TenantID: d.TenantID, Scope: d.Scope, DestinationID: d.DestinationID,
		EventType: d.EventType, State: d.State, LastOutcome: d.LastOutcome, LastReason: d.LastReason,
		Attempt: d.Attempt, BudgetStart: max(d.BudgetStart, 1), PolicyVersion: d.PolicyVersion,
		EnvelopeVersion: d.EnvelopeVersion, FirstQueuedAt: fmtTime(d.FirstQueuedAt), WindowStart: fmtTime(d.WindowStartsAt()),
		NextAttemptAt: fmtTime(d.NextAttemptAt), UpdatedAt: fmtTime(d.UpdatedAt), Payload: payload,
	}
}

type attemptView struct {
	Number        int               `json:"number"`
	StartedAt     string            `json:"started_at"`
	FinishedAt    string            `json:"finished_at"`
	Kind          string            `json:"kind"`
	Outcome       hookrelay.Outcome `json:"outcome"`
	Reason        string            `json:"reason,omitempty"`
	StatusCode    int               `json:"status_code,omitempty"`
	Detail        string            `json:"detail,omitempty"`
	NextAttemptAt string            `json:"next_attempt_at,omitempty"`
}

func viewAttempt(a hookrelay.Attempt) attemptView {
	return attemptView{
		Number: a.Number, StartedAt: fmtTime(a.StartedAt), FinishedAt: fmtTime(a.FinishedAt),
		Kind: a.Kind.String(), Outcome: a.Outcome, Reason: a.Reason, StatusCode: a.StatusCode,
		Detail: a.Detail, NextAttemptAt: fmtTime(a.NextAttemptAt),
	}
}

// summaryView is the summary of attempts a retention pass compacted.
type summaryView struct {
	Count          int               `json:"count"`
	FirstStartedAt string            `json:"first_started_at"`
	LastFinishedAt string            `json:"last_finished_at"`
	LastStatusCode int               `json:"last_status_code,omitempty"`
	LastOutcome    hookrelay.Outcome `json:"last_outcome"`
	LastReason     string            `json:"last_reason,omitempty"`
}

func viewSummary(s *hookrelay.AttemptSummary) *summaryView {
	if s == nil {
		return nil
	}
	return &summaryView{
		Count: s.Count, FirstStartedAt: fmtTime(s.FirstStartedAt), LastFinishedAt: fmtTime(s.LastFinishedAt),
		LastStatusCode: s.LastStatusCode, LastOutcome: s.LastOutcome, LastReason: s.LastReason,
	}
}

type filterView struct {
	TenantIDs      []string `json:"tenant_ids,omitempty"`
	DestinationIDs []string `json:"destination_ids,omitempty"`
	EventTypes     []string `json:"event_types,omitempty"`
	Reasons        []string `json:"reasons,omitempty"`
	DeadSince      string   `json:"dead_since,omitempty"`
	DeadBefore     string   `json:"dead_before,omitempty"`
}

func viewFilter(f hookrelay.DeadLetterFilter) filterView {
	return filterView{
		TenantIDs: f.TenantIDs, DestinationIDs: f.DestinationIDs, EventTypes: f.EventTypes,
		Reasons: f.Reasons, DeadSince: fmtTime(f.DeadSince), DeadBefore: fmtTime(f.DeadBefore),
	}
}

type planRowView struct {
	TenantID      string `json:"tenant_id"`
	DestinationID string `json:"destination_id"`
	Reason        string `json:"reason"`
	Count         int64  `json:"count"`
}

type planView struct {
	Filter  filterView    `json:"filter"`
	Rows    []planRowView `json:"rows"`
	Total   int64         `json:"total"`
	Tenants []string      `json:"tenants"`
}

func viewPlan(p hookrelay.RedrivePlan) planView {
	out := planView{Filter: viewFilter(p.Filter), Rows: []planRowView{}, Total: p.Total, Tenants: p.Tenants}
	if out.Tenants == nil {
		out.Tenants = []string{}
	}
	for _, r := range p.Rows {
		out.Rows = append(out.Rows, planRowView(r))
	}
	return out
}

type auditView struct {
	ID              string                 `json:"id"`
	State           hookrelay.RedriveState `json:"state"`
	Actor           string                 `json:"actor"`
	Reason          string                 `json:"reason"`
	Filter          filterView             `json:"filter"`
	Tenants         []string               `json:"tenants"`
	RatePerSecond   float64                `json:"rate_per_second"`
	BatchSize       int                    `json:"batch_size"`
	Matched         int64                  `json:"matched"`
	Redriven        int64                  `json:"redriven"`
	Skipped         int64                  `json:"skipped"`
	StopRequested   bool                   `json:"stop_requested"`
	StopRequestedBy string                 `json:"stop_requested_by,omitempty"`
	ResumedBy       string                 `json:"resumed_by,omitempty"`
	LastDeliveryID  string                 `json:"last_delivery_id,omitempty"`
	Error           string                 `json:"error,omitempty"`
	Snapshot        string                 `json:"snapshot"`
	CreatedAt       string                 `json:"created_at"`
	UpdatedAt       string                 `json:"updated_at"`
}

func viewAudit(a hookrelay.RedriveAudit) auditView {
	v := auditView{
		ID: a.ID, State: a.State, Actor: a.Actor, Reason: a.Reason, Filter: viewFilter(a.Filter),
		Tenants: a.Tenants, RatePerSecond: a.RatePerSecond, BatchSize: a.BatchSize, Matched: a.Matched,
		Redriven: a.Redriven, Skipped: a.Skipped, StopRequested: a.StopRequested,
		StopRequestedBy: a.StopRequestedBy, ResumedBy: a.ResumedBy, LastDeliveryID: a.LastDeliveryID, Error: a.Error,
		Snapshot: fmtTime(a.Snapshot), CreatedAt: fmtTime(a.CreatedAt), UpdatedAt: fmtTime(a.UpdatedAt),
	}
	if v.Tenants == nil {
		v.Tenants = []string{}
	}
	return v
}

type statsView struct {
	DestinationID            string  `json:"destination_id"`
	Pending                  int64   `json:"pending"`
	EligibleNow              int64   `json:"eligible_now"`
	OldestEligibleAgeSeconds float64 `json:"oldest_eligible_age_seconds"`
	Dead                     int64   `json:"dead"`
	OldestDeadAgeSeconds     float64 `json:"oldest_dead_age_seconds"`
	Circuit                  string  `json:"circuit"`
	ConsecutiveFailures      int     `json:"consecutive_failures"`
	HeldUntil                string  `json:"held_until,omitempty"`
	RateLimitedUntil         string  `json:"rate_limited_until,omitempty"`
	FailingSince             string  `json:"failing_since,omitempty"`
}

// fmtGuardTime is a guard time for output: RFC 3339 in UTC, "" when zero.
func fmtGuardTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func viewStats(s hookrelay.DestinationStats) statsView {
	return statsView{
		DestinationID: s.DestinationID, Pending: s.Pending, EligibleNow: s.EligibleNow,
		OldestEligibleAgeSeconds: s.OldestEligibleAge.Seconds(), Dead: s.Dead,
		OldestDeadAgeSeconds: s.OldestDeadAge.Seconds(),
		Circuit:              string(cmp.Or(s.Circuit, hookrelay.CircuitClosed)), ConsecutiveFailures: s.ConsecutiveFailures,
		HeldUntil: fmtGuardTime(s.HeldUntil), RateLimitedUntil: fmtGuardTime(s.RateLimitedUntil),
		FailingSince: fmtGuardTime(s.FailingSince),
	}
}
