package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/hookrelay/hookrelay"
	hooksql "github.com/hookrelay/hookrelay/adapters/sql"
	"github.com/hookrelay/hookrelay/internal/filterlist"
)

// listFlag is a repeatable, comma-separated string flag, read as CSV
// (internal/filterlist): a value holding a comma is written in double
// quotes ("acct,eu"). Blank entries between others are dropped; a value
// with no entry at all is refused, as a filter left empty would select
// everything.
type listFlag []string

func (l *listFlag) String() string { return filterlist.Join(*l) }

func (l *listFlag) Set(v string) error {
	vs, err := filterlist.Split(v)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return errors.New("empty: give at least one value (leave the flag out to select all)")
	}
	*l = append(*l, vs...)
	return nil
}

// timeFlag is an RFC 3339 time or a duration before now.
type timeFlag struct {
	t   time.Time
	now func() time.Time
}

func (f *timeFlag) String() string {
	if f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(v string) error {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		f.t = t
		return nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(v, "-"))
	if err != nil || d < 0 {
		return fmt.Errorf("%q is neither an RFC 3339 time nor a duration ago like 24h", v)
	}
	f.t = f.now().Add(-d)
	return nil
}

// filterFlags registers the selection flags.
type filterFlags struct {
	tenants, destinations, eventTypes, reasons listFlag
	since, before                              timeFlag
}

func addFilterFlags(fs *flag.FlagSet) *filterFlags {
	f := &filterFlags{since: timeFlag{now: time.Now}, before: timeFlag{now: time.Now}}
	fs.Var(&f.tenants, "tenant", "tenant ID (repeatable)")
	fs.Var(&f.destinations, "destination", "destination ID (repeatable)")
	fs.Var(&f.eventTypes, "event-type", "event type (repeatable)")
	fs.Var(&f.reasons, "failure", "dead-letter reason, e.g. attempts_exhausted (repeatable)")
	fs.Var(&f.since, "since", "dead-lettered at or after (RFC 3339 or duration ago)")
	fs.Var(&f.before, "before", "dead-lettered before (RFC 3339 or duration ago)")
	return f
}

// check refuses a selection the library refuses (hookrelay.DeadLetterFilter.Validate:
// a value no record holds, a list too long, a --since not before
// --before, whose window would match nothing and be reported as if
// nothing had been dead-lettered), before the database is opened.
func (f *filterFlags) check(cmd string) error {
	return flagError(cmd, f.filter().Validate())
}

// flags names the flag that fills each field of hookrelay.RedriveParams
// and its Filter.
var flags = map[string]string{
	"Filter.TenantIDs": "--tenant", "Filter.DestinationIDs": "--destination", "Filter.EventTypes": "--event-type",
	"Filter.Reasons": "--failure", "Filter.DeadSince": "--since", "Filter.DeadBefore": "--before",
	"Actor": "--actor", "Reason": "--reason", "RatePerSecond": "--rate", "BatchSize": "--batch",
}

// flagError turns the library's *ValidationError of a field a flag fills
// into a usage error naming the flag (and the value's position among the
// flag's values is left out: the message quotes the value). Other errors
// are returned as they are.
func flagError(cmd string, err error) error {
	var ve *hookrelay.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	field, _, _ := strings.Cut(ve.Field, "[")
	name, ok := flags[field]
	if !ok {
		return err
	}
	return fail(exitUsage, "%s: %s %s", cmd, name, strings.ReplaceAll(ve.Problem, "Filter.DeadBefore", flags["Filter.DeadBefore"]))
}

// checkPageFlag refuses a page-size flag outside 1..MaxPageSize, which
// the library would otherwise replace quietly (0 by its default, more by
// its maximum).
func checkPageFlag(cmd, flag string, n int) error {
	if n < 1 || n > hookrelay.MaxPageSize {
		return fail(exitUsage, "%s: %s must be between 1 and %d, not %d", cmd, flag, hookrelay.MaxPageSize, n)
	}
	return nil
}

func (f *filterFlags) filter() hookrelay.DeadLetterFilter {
	return hookrelay.DeadLetterFilter{
		TenantIDs: f.tenants, DestinationIDs: f.destinations, EventTypes: f.eventTypes,
		Reasons: f.reasons, DeadSince: f.since.t, DeadBefore: f.before.t,
	}
}

// withClient opens the store for a command that changes it, runs fn with
// a client and closes the store.
func (g *globals) withClient(ctx context.Context, crossTenant bool, fn func(*hooksql.Store, *hookrelay.Client) error) error {
	return g.withAccess(ctx, accessWrite, crossTenant, fn)
}

// withReader is withClient for a command that only reads: a SQLite file
// is opened read-only.
func (g *globals) withReader(ctx context.Context, fn func(*hooksql.Store, *hookrelay.Client) error) error {
	return g.withAccess(ctx, accessRead, false, fn)
}

func (g *globals) withAccess(ctx context.Context, mode access, crossTenant bool, fn func(*hooksql.Store, *hookrelay.Client) error) error {
	s, err := g.openStore(ctx, mode)
	if err != nil {
		return err
	}
	defer s.Close()
	c, err := g.client(s, crossTenant)
	if err != nil {
		return err
	}
	return classify(fn(s, c))
}

// classify maps library errors to exit statuses.
func classify(err error) error {
	var ee *exitError
	switch {
	case err == nil, errors.As(err, &ee):
		return err
	case errors.Is(err, hookrelay.ErrRedriveRefused):
		return &exitError{code: exitRefused, err: fmt.Errorf("%w\n(if you are authorized to redrive across tenants, add --cross-tenant; the audit entry records you and every tenant involved)", err)}
	case errors.Is(err, hookrelay.ErrNotFound), errors.Is(err, hookrelay.ErrRedriveNotFound), errors.Is(err, hookrelay.ErrDestinationNotFound):
		return &exitError{code: exitNotFound, err: err}
	case errors.Is(err, hookrelay.ErrInvalidRequest):
		return &exitError{code: exitUsage, err: err}
	case errors.Is(err, hooksql.ErrDatabase):
		return &exitError{code: exitDatabase, err: err}
	}
	return &exitError{code: exitFailed, err: err}
}

func (g *globals) migrate(ctx context.Context, args []string) error {
	fs := g.flagSet("migrate")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	s, err := g.openStore(ctx, accessMigrate)
	if err != nil {
		return err
	}
	defer s.Close()
	before, err := s.Version(ctx)
	if err != nil {
		return fail(exitDatabase, "cannot read the schema version: %v", err)
	}
	if err := s.Migrate(ctx); err != nil {
		return fail(exitDatabase, "migrate: %v", err)
	}
	after, err := s.Version(ctx)
	if err != nil {
		return fail(exitDatabase, "cannot read the schema version: %v", err)
	}
	if g.json {
		return g.writeJSON(map[string]any{"dialect": s.Dialect(), "table_prefix": s.TablePrefix(), "from_version": before, "version": after})
	}
	if before == after {
		fmt.Fprintf(g.stdout, "schema already at version %d (%s, prefix %s)\n", after, s.Dialect(), s.TablePrefix())
	} else {
		fmt.Fprintf(g.stdout, "migrated schema from version %d to %d (%s, prefix %s)\n", before, after, s.Dialect(), s.TablePrefix())
	}
	return nil
}

func (g *globals) deadList(ctx context.Context, args []string) error {
	fs := g.flagSet("dead list")
	ff := addFilterFlags(fs)
	limit := fs.Int("limit", 50, "page size (at most 1000)")
	cursor := fs.String("cursor", "", "continue from a previous page")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := ff.check("dead list"); err != nil {
		return err
	}
	if err := checkPageFlag("dead list", "--limit", *limit); err != nil {
		return err
	}
	return g.withReader(ctx, func(_ *hooksql.Store, c *hookrelay.Client) error {
		page, err := c.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: ff.filter(), Limit: *limit, Cursor: *cursor})
		if err != nil {
			return err
		}
		if g.json {
			out := struct {
				Deliveries []deliveryView `json:"deliveries"`
				Next       string         `json:"next,omitempty"`
			}{Deliveries: []deliveryView{}, Next: page.Next}
			for _, d := range page.Deliveries {
				out.Deliveries = append(out.Deliveries, viewDelivery(d))
			}
			return g.writeJSON(out)
		}
		if len(page.Deliveries) == 0 {
			fmt.Fprintln(g.stdout, "no dead-lettered deliveries match")
			return nil
		}
		tw := g.table("DELIVERY ID", "TENANT", "DESTINATION", "EVENT TYPE", "REASON", "ATTEMPTS", "DEAD-LETTERED")
		for _, d := range page.Deliveries {
			row(tw, d.ID, d.TenantID, d.DestinationID, d.EventType, d.LastReason, d.Attempt, fmtTime(d.UpdatedAt))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if page.Next != "" {
			fmt.Fprintf(g.stdout, "more: --cursor %s\n", page.Next)
		}
		return nil
	})
}

func (g *globals) deadShow(ctx context.Context, args []string) error {
	fs := g.flagSet("dead show")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	return g.withReader(ctx, func(_ *hooksql.Store, c *hookrelay.Client) error {
		det, err := c.Delivery(ctx, pos[0])
		if err != nil {
			return err
		}
		if g.json {
			out := struct {
				Delivery  deliveryView  `json:"delivery"`
				Attempts  []attemptView `json:"attempts"`
				Compacted *summaryView  `json:"compacted_attempts,omitempty"`
			}{Delivery: viewDelivery(det.Delivery), Attempts: []attemptView{}, Compacted: viewSummary(det.Compacted)}
			for _, a := range det.Attempts {
				out.Attempts = append(out.Attempts, viewAttempt(a))
			}
			return g.writeJSON(out)
		}
		d := det.Delivery
		kv := g.table()
		row(kv, "delivery", d.ID)
		row(kv, "event", d.EventID)
		row(kv, "tenant", d.TenantID)
		for _, k := range sortedKeys(d.Scope) {
			row(kv, "scope."+k, d.Scope[k])
		}
		row(kv, "destination", d.DestinationID)
		row(kv, "event type", d.EventType)
		row(kv, "state", d.State)
		row(kv, "reason", d.LastReason)
		row(kv, "last outcome", d.LastOutcome)
		row(kv, "next attempt", d.Attempt)
		row(kv, "budget starts at", max(d.BudgetStart, 1))
		row(kv, "policy", d.PolicyVersion)
		row(kv, "first queued", fmtTime(d.FirstQueuedAt))
		row(kv, "window starts", fmtTime(d.WindowStartsAt()))
		row(kv, "updated", fmtTime(d.UpdatedAt))
		row(kv, "payload", payloadText(d.Payload))
		if err := kv.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(g.stdout)
		if c := det.Compacted; c != nil {
			fmt.Fprintf(g.stdout, "%d earlier attempts compacted by retention: first started %s, last finished %s, last result %s",
				c.Count, fmtTime(c.FirstStartedAt), fmtTime(c.LastFinishedAt), terminalText(string(c.LastOutcome)))
			if c.LastStatusCode != 0 {
				fmt.Fprintf(g.stdout, " %d", c.LastStatusCode)
			}
			if c.LastReason != "" {
				fmt.Fprintf(g.stdout, " (%s)", terminalText(c.LastReason))
			}
			fmt.Fprintln(g.stdout)
		}
		if len(det.Attempts) == 0 {
			if det.Compacted == nil {
				fmt.Fprintln(g.stdout, "no attempts recorded")
			}
			return nil
		}
		tw := g.table("#", "STARTED", "TOOK", "KIND", "OUTCOME", "REASON", "STATUS", "RETRY AT", "DETAIL")
		for _, a := range det.Attempts {
			status := ""
			if a.StatusCode != 0 {
				status = fmt.Sprint(a.StatusCode)
			}
			row(tw, a.Number, fmtTime(a.StartedAt), a.FinishedAt.Sub(a.StartedAt), a.Kind, a.Outcome, a.Reason, status, fmtTime(a.NextAttemptAt), oneLine(a.Detail, 60))
		}
		return tw.Flush()
	})
}

func (g *globals) redrivePlan(ctx context.Context, args []string) error {
	fs := g.flagSet("redrive plan")
	ff := addFilterFlags(fs)
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := ff.check("redrive plan"); err != nil {
		return err
	}
	return g.withReader(ctx, func(_ *hooksql.Store, c *hookrelay.Client) error {
		plan, err := c.PlanRedrive(ctx, ff.filter())
		if err != nil {
			return err
		}
		if g.json {
			return g.writeJSON(viewPlan(plan))
		}
		if plan.Total == 0 {
			fmt.Fprintln(g.stdout, "no dead-lettered deliveries match; nothing to redrive")
			return nil
		}
		tw := g.table("TENANT", "DESTINATION", "REASON", "COUNT")
		for _, r := range plan.Rows {
			row(tw, r.TenantID, r.DestinationID, r.Reason, r.Count)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		tenants := make([]string, len(plan.Tenants))
		for i, t := range plan.Tenants {
			tenants[i] = terminalText(t)
		}
		fmt.Fprintf(g.stdout, "total %d across %d tenant(s): %s\n", plan.Total, len(plan.Tenants), strings.Join(tenants, ", "))
		if len(plan.Tenants) > 1 {
			fmt.Fprintln(g.stdout, "note: this selection spans several tenants; redrive start needs --cross-tenant")
		}
		return nil
	})
}

func (g *globals) redriveStart(ctx context.Context, args []string) error {
	fs := g.flagSet("redrive start")
	ff := addFilterFlags(fs)
	rate := fs.Float64("rate", 0, "deliveries per second per destination (required)")
	actor := fs.String("actor", "", "who runs this redrive (required)")
	reason := fs.String("reason", "", "why, in free text (required)")
	batch := fs.Int("batch", 100, "deliveries between stop checks and audit updates")
	cross := fs.Bool("cross-tenant", false, "you are authorized to redrive across tenants")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	// A flag left out is named as missing; a value given is checked by
	// the library (RedriveParams.Validate), before the database is opened.
	switch {
	case *rate == 0:
		return fail(exitUsage, "redrive start: --rate N is required (deliveries per second per destination)")
	case *actor == "":
		return fail(exitUsage, "redrive start: --actor NAME is required")
	case *reason == "":
		return fail(exitUsage, "redrive start: --reason TEXT is required")
	}
	if err := checkPageFlag("redrive start", "--batch", *batch); err != nil {
		return err
	}
	params := hookrelay.RedriveParams{
		Filter: ff.filter(), Actor: *actor, Reason: *reason, RatePerSecond: *rate, BatchSize: *batch,
		Progress: g.progress,
	}
	if err := flagError("redrive start", params.Validate()); err != nil {
		return err
	}
	return g.withClient(ctx, *cross, func(_ *hooksql.Store, c *hookrelay.Client) error {
		a, err := c.Redrive(ctx, params)
		return g.redriveResult(a, err)
	})
}

func (g *globals) redriveResume(ctx context.Context, args []string) error {
	fs := g.flagSet("redrive resume")
	cross := fs.Bool("cross-tenant", false, "you are authorized to redrive across tenants")
	actor := fs.String("actor", "", "who resumes it (default $USER); recorded in the audit")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	if *actor == "" {
		*actor = g.getenv("USER")
	}
	if strings.TrimSpace(*actor) == "" {
		return fail(exitUsage, "redrive resume: --actor NAME is required and must not be blank ($USER is not set)")
	}
	return g.withClient(ctx, *cross, func(_ *hooksql.Store, c *hookrelay.Client) error {
		a, err := c.ResumeRedrive(ctx, pos[0], *actor, g.progress)
		return g.redriveResult(a, err)
	})
}

// progress reports a redrive after each batch on stderr: on a terminal,
// one line rewritten in place with moved/matched, rate and ETA; piped or
// with --json, one plain line per batch.
func (g *globals) progress(a hookrelay.RedriveAudit) {
	if g.tty && !g.json {
		fmt.Fprint(g.stderr, "\r\033[K"+progressLine(a, time.Now()))
		g.progressOpen = true
		return
	}
	fmt.Fprintf(g.stderr, "redrive %s: %d/%d re-enqueued, %d skipped, %s\n", terminalText(a.ID), a.Redriven, a.Matched, a.Skipped, a.State)
}

// progressLine is the terminal's progress line.
func progressLine(a hookrelay.RedriveAudit, now time.Time) string {
	p := a.Progress(now)
	pct := 0
	if p.Matched > 0 {
		pct = int(100 * p.Handled / p.Matched)
	}
	line := fmt.Sprintf("redrive %s: %d/%d moved (%d%%)", terminalText(a.ID), a.Redriven, a.Matched, pct)
	if a.Skipped > 0 {
		line += fmt.Sprintf(", %d skipped", a.Skipped)
	}
	if p.PerSecond > 0 {
		line += fmt.Sprintf(" · %.1f/s", p.PerSecond)
	}
	if p.ETA > 0 {
		line += " · ETA " + p.ETA.String()
	}
	return line + " · " + string(a.State)
}

func (g *globals) redriveResult(a hookrelay.RedriveAudit, err error) error {
	if g.progressOpen {
		// The line's last state, then its newline.
		fmt.Fprintln(g.stderr, "\r\033[K"+progressLine(a, time.Now()))
		g.progressOpen = false
	}
	if a.ID != "" {
		if werr := g.showAudit(a); werr != nil {
			return werr
		}
	}
	switch {
	case err != nil && errors.Is(err, context.Canceled) && a.State == hookrelay.RedriveStopped:
		return fail(exitFailed, "interrupted; the redrive is stopped (resume with: hookrelay redrive resume %s)", a.ID)
	case err != nil:
		return err
	case a.State == hookrelay.RedriveStopped:
		return fail(exitFailed, "redrive %s was stopped by %s (resume with: hookrelay redrive resume %s)", a.ID, a.StopRequestedBy, a.ID)
	}
	return nil
}

func (g *globals) redriveStop(ctx context.Context, args []string) error {
	fs := g.flagSet("redrive stop")
	actor := fs.String("actor", "", "who stops it (default $USER)")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	if *actor == "" {
		*actor = g.getenv("USER")
	}
	if strings.TrimSpace(*actor) == "" {
		return fail(exitUsage, "redrive stop: --actor NAME is required and must not be blank ($USER is not set)")
	}
	return g.withClient(ctx, false, func(_ *hooksql.Store, c *hookrelay.Client) error {
		a, err := c.StopRedrive(ctx, pos[0], *actor)
		if err != nil {
			return err
		}
		if !g.json && a.State == hookrelay.RedriveRunning {
			fmt.Fprintln(g.stderr, "stop requested; the redrive stops before its next batch")
		}
		return g.showAudit(a)
	})
}

func (g *globals) redriveStatus(ctx context.Context, args []string) error {
	fs := g.flagSet("redrive status")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	return g.withReader(ctx, func(_ *hooksql.Store, c *hookrelay.Client) error {
		a, err := c.RedriveStatus(ctx, pos[0])
		if err != nil {
			return err
		}
		return g.showAudit(a)
	})
}

func (g *globals) showAudit(a hookrelay.RedriveAudit) error {
	if g.json {
		return g.writeJSON(viewAudit(a))
	}
	kv := g.table()
	row(kv, "redrive", a.ID)
	row(kv, "state", a.State)
	row(kv, "actor", a.Actor)
	row(kv, "reason", a.Reason)
	row(kv, "selection", a.Filter.String())
	row(kv, "tenants", strings.Join(a.Tenants, ", "))
	row(kv, "rate", fmt.Sprintf("%g/s per destination", a.RatePerSecond))
	row(kv, "matched", a.Matched)
	row(kv, "re-enqueued", a.Redriven)
	row(kv, "skipped", a.Skipped)
	row(kv, "last delivery", a.LastDeliveryID)
	if a.StopRequested || a.StopRequestedBy != "" {
		row(kv, "stop requested by", a.StopRequestedBy)
	}
	if a.ResumedBy != "" {
		row(kv, "resumed by", a.ResumedBy)
	}
	if a.Error != "" {
		row(kv, "note", a.Error)
	}
	row(kv, "started", fmtTime(a.CreatedAt))
	row(kv, "updated", fmtTime(a.UpdatedAt))
	return kv.Flush()
}

func (g *globals) destination(ctx context.Context, args []string, pause bool) error {
	name := "destination resume"
	if pause {
		name = "destination pause"
	}
	fs := g.flagSet(name)
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	return g.withClient(ctx, false, func(_ *hooksql.Store, c *hookrelay.Client) error {
		if pause {
			err = c.PauseDestination(ctx, pos[0])
		} else {
			err = c.ResumeDestination(ctx, pos[0])
		}
		if err != nil {
			return err
		}
		if g.json {
			return g.writeJSON(map[string]any{"destination": pos[0], "paused": pause})
		}
		if pause {
			fmt.Fprintf(g.stdout, "destination %s paused: its deliveries wait without spending attempts\n", pos[0])
		} else {
			fmt.Fprintf(g.stdout, "destination %s resumed\n", pos[0])
		}
		return nil
	})
}

func (g *globals) stats(ctx context.Context, args []string) error {
	fs := g.flagSet("stats")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	return g.withReader(ctx, func(s *hooksql.Store, _ *hookrelay.Client) error {
		var stats hookrelay.LedgerStats = s
		st, err := stats.Stats(ctx, hookrelay.StatsParams{Now: time.Now()})
		if err != nil {
			return err
		}
		if g.json {
			out := []statsView{}
			for _, x := range st {
				out = append(out, viewStats(x))
			}
			return g.writeJSON(out)
		}
		if len(st) == 0 {
			fmt.Fprintln(g.stdout, "no pending or dead-lettered deliveries, and no destination failing or held")
			return nil
		}
		tw := g.table("DESTINATION", "PENDING", "ELIGIBLE NOW", "OLDEST ELIGIBLE", "DEAD", "OLDEST DEAD", "CIRCUIT", "FAILURES", "HELD UNTIL", "FAILING SINCE")
		for _, x := range st {
			v := viewStats(x)
			row(tw, x.DestinationID, x.Pending, x.EligibleNow, fmtAge(x.OldestEligibleAge), x.Dead, fmtAge(x.OldestDeadAge),
				v.Circuit, x.ConsecutiveFailures, cmp.Or(v.HeldUntil, "-"), cmp.Or(v.FailingSince, "-"))
		}
		return tw.Flush()
	})
}

func (g *globals) destinationEnable(ctx context.Context, args []string) error {
	pos, err := parse(g.flagSet("destination enable"), args, 1)
	if err != nil {
		return err
	}
	return g.withClient(ctx, false, func(_ *hooksql.Store, c *hookrelay.Client) error {
		if err := c.EnableDestination(ctx, pos[0]); err != nil {
			return err
		}
		if g.json {
			return g.writeJSON(map[string]any{"destination": pos[0], "disabled": false})
		}
		fmt.Fprintf(g.stdout, "destination %s re-enabled: its waiting deliveries go out again\n", pos[0])
		return nil
	})
}

// destinationClearGuard lifts a destination's holds and closes its circuit
// (hookrelay.Client.ClearDestinationGuard): the workers sharing the
// database send to it again within their PausedRecheck.
func (g *globals) destinationClearGuard(ctx context.Context, args []string) error {
	pos, err := parse(g.flagSet("destination clear-guard"), args, 1)
	if err != nil {
		return err
	}
	return g.withClient(ctx, false, func(_ *hooksql.Store, c *hookrelay.Client) error {
		if err := c.ClearDestinationGuard(ctx, pos[0]); err != nil {
			return err
		}
		if g.json {
			return g.writeJSON(map[string]any{"destination": pos[0], "guard_cleared": true})
		}
		fmt.Fprintf(g.stdout, "destination %s guard cleared: holds lifted and circuit closed; its waiting deliveries go out again (its rate limit still holds)\n", pos[0])
		return nil
	})
}
