package hookrelay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"
)

// RedriveState is where a redrive stands.
type RedriveState string

const (
	// RedriveRunning: a process is moving deliveries (or died doing so).
	RedriveRunning RedriveState = "running"
	// RedriveStopped: stopped on request (or its context ended) between
	// batches; it can be resumed.
	RedriveStopped RedriveState = "stopped"
	// RedriveFinished: every matching delivery was handled.
	RedriveFinished RedriveState = "finished"
	// RedriveFailed: a store call failed; Error says which. It can be
	// resumed.
	RedriveFailed RedriveState = "failed"
)

// RedriveAudit is the audit entry of one redrive: who started it, when,
// why, on which selection and how far it got. Its ID ("rdv_…") names the
// redrive action; it is never a delivery ID. The deliveries it moves keep
// their own IDs.
type RedriveAudit struct {
	ID     string
	Actor  string
	Reason string
	Filter DeadLetterFilter
	// Snapshot bounds the selection: only deliveries dead-lettered at or
	// before it are moved, so a delivery this redrive moved that dies again
	// is not moved a second time, also after a resume.
	Snapshot time.Time
	// RatePerSecond is the limit per destination.
	RatePerSecond float64
	BatchSize     int
	// Tenants are the tenants the selection spanned when it was authorized;
	// only their deliveries are moved.
	Tenants []string
	// Matched is how many deliveries matched when the redrive started.
	Matched int64
	// Redriven counts deliveries this redrive moved back to pending.
	Redriven int64
	// Skipped counts matching deliveries that were no longer dead when
	// reached (another redrive moved them first, or a cleaner with
	// RemoveDead removed them).
	Skipped int64
	State   RedriveState
	// StopRequested is set by Client.StopRedrive in any process; the
	// running redrive honours it between batches.
	StopRequested   bool
	StopRequestedBy string
	// ResumedBy is who last resumed the redrive (Client.ResumeRedrive);
	// empty if it never was.
	ResumedBy string
	// LastDeliveryID is the last delivery handled: how far it got.
	LastDeliveryID string
	// Run numbers the runs of the redrive: 1 for Redrive's, one more at
	// each ResumeRedrive. A run that finds a later one begun (a resume
	// that came before it saw its stop) ends without changing the state,
	// so one run at a time moves the selection. Zero in an entry written
	// before it was recorded.
	Run int64
	// Error says why a failed or interrupted redrive ended.
	Error     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// RedriveProgress is how far a redrive has got, for progress displays
// (the CLI's terminal line, the console's page).
type RedriveProgress struct {
	// Handled counts the matched deliveries dealt with: moved or skipped.
	Handled int64
	// Matched is the audit's Matched.
	Matched int64
	// PerSecond is the observed pace since the redrive was created; zero
	// before anything was handled.
	PerSecond float64
	// ETA estimates the time left at that pace; zero when unknown or when
	// the redrive is no longer running.
	ETA time.Duration
}

// Progress computes the redrive's progress at now (the caller's clock).
func (a RedriveAudit) Progress(now time.Time) RedriveProgress {
	p := RedriveProgress{Handled: a.Redriven + a.Skipped, Matched: a.Matched}
	if elapsed := now.Sub(a.CreatedAt); p.Handled > 0 && elapsed > 0 {
		p.PerSecond = float64(p.Handled) / elapsed.Seconds()
	}
	if left := p.Matched - p.Handled; a.State == RedriveRunning && left > 0 && p.PerSecond > 0 {
		p.ETA = time.Duration(float64(left) / p.PerSecond * float64(time.Second)).Round(time.Second)
	}
	return p
}

// RedriveAuditUpdate changes an audit entry. Counts are added, not set, so
// two processes working on one redrive never lose each other's counts.
type RedriveAuditUpdate struct {
	ID  string
	Now time.Time
	// State, when not empty, becomes the state, and Error replaces the
	// error text.
	State RedriveState
	Error string
	// AddRedriven and AddSkipped are added to the counts.
	AddRedriven int64
	AddSkipped  int64
	// LastDeliveryID, when not empty, is recorded.
	LastDeliveryID string
	// ClearStop clears a stop request (resume); it applies before
	// StopRequestedBy.
	ClearStop bool
	// StopRequestedBy, when not empty, sets StopRequested.
	StopRequestedBy string
	// ResumedBy, when not empty, is recorded as who resumed it.
	ResumedBy string
	// NewRun adds one to Run (a resume begins a run).
	NewRun bool
	// IfRun, when not zero, makes the update apply only while Run equals
	// it: otherwise nothing changes, not even UpdatedAt.
	IfRun int64
}

// Apply changes a to what the update says, as RedriveAuditLog
// implementations must: the state and error replaced when State is set, the
// counts added to, the stop request cleared and then set, Run stepped,
// UpdatedAt = Now; nothing at all when IfRun is set and is not a.Run.
func (u RedriveAuditUpdate) Apply(a *RedriveAudit) {
	if u.IfRun != 0 && a.Run != u.IfRun {
		return
	}
	if u.State != "" {
		a.State, a.Error = u.State, u.Error
	}
	a.Redriven += u.AddRedriven
	a.Skipped += u.AddSkipped
	if u.LastDeliveryID != "" {
		a.LastDeliveryID = u.LastDeliveryID
	}
	if u.ClearStop {
		a.StopRequested, a.StopRequestedBy = false, ""
	}
	if u.StopRequestedBy != "" {
		a.StopRequested, a.StopRequestedBy = true, u.StopRequestedBy
	}
	if u.ResumedBy != "" {
		a.ResumedBy = u.ResumedBy
	}
	if u.NewRun {
		a.Run++
	}
	a.UpdatedAt = u.Now
}

// RedriveParams describe one redrive.
type RedriveParams struct {
	// Filter selects the dead-lettered deliveries.
	Filter DeadLetterFilter
	// Actor names who asks (required, not only white space); it is
	// recorded and given to the Authorizer.
	Actor string
	// Reason says why, in free text (required, not only white space); it
	// is recorded.
	Reason string
	// RatePerSecond caps how many deliveries per second go back to each
	// destination (required, positive, at most MaxRedriveRate). The
	// worker sends them as they become due.
	RatePerSecond float64
	// BatchSize is how many deliveries are handled between two checks of
	// the stop control and two audit updates. Defaults to
	// DefaultRedriveBatchSize; at most MaxPageSize.
	BatchSize int
	// Progress, if set, is called with the audit entry once the entry is
	// written (so its ID is known) and after each batch.
	Progress func(RedriveAudit)
	// Authorizer, if set, is the caller's own rule, asked with the same
	// RedriveAuthorization as Config.Authorizer and before it: the plan
	// counted at the start, whose tenants are the only ones the redrive
	// moves. A caller that decides on tenants itself (the console's
	// Authorize hook) should decide here rather than on a plan of its own
	// counted beforehand: a dead letter of another tenant committed in
	// between would be in the redrive's plan without the caller ever
	// having been asked about its tenant. A refusal is a
	// *RedriveRefusedError wrapping the error, and nothing is written. It
	// is not recorded: ResumeRedrive asks Config.Authorizer only (and moves
	// no tenant but the audit's Tenants).
	Authorizer Authorizer
	// NarrowTenants, if set, is given the tenants the selection spans as
	// the redrive starts (sorted) and returns those it may move: the
	// redrive then counts, is authorized for (Authorizer and
	// Config.Authorizer see the narrowed plan) and moves only those, as if
	// Filter named them, and its audit's Tenants and Matched say so
	// (Filter is recorded as given). Returning none leaves the redrive as
	// one matching nothing. A caller that may redrive only some tenants
	// (the console, for an operator scoped to some) narrows here so that
	// another tenant's dead letters neither move nor make the redrive
	// refused. It is not recorded: ResumeRedrive moves the audit's
	// Tenants.
	NarrowTenants func(ctx context.Context, spanned []string) []string
}

// MaxRedriveRate is the highest RedriveParams.RatePerSecond: a million
// deliveries per second per destination, far above what a recipient
// takes, so a rate above it is a mistake (a unit, a stray exponent).
const MaxRedriveRate = 1e6

// Validate returns a *ValidationError (wrapping ErrInvalidRequest) naming
// the first field of p that Redrive refuses: an Actor or Reason empty or
// only white space; a RatePerSecond that is not a positive, finite number
// of at most MaxRedriveRate; a negative BatchSize; or a Filter its
// Validate refuses. Redrive calls it before it reads anything.
func (p RedriveParams) Validate() error {
	switch {
	case strings.TrimSpace(p.Actor) == "":
		return invalid(ErrInvalidRequest, "Actor", "must not be blank (empty or only white space)")
	case strings.TrimSpace(p.Reason) == "":
		return invalid(ErrInvalidRequest, "Reason", "must not be blank (empty or only white space)")
	case !(p.RatePerSecond > 0 && p.RatePerSecond <= MaxRedriveRate): // NaN too
		return invalid(ErrInvalidRequest, "RatePerSecond", fmt.Sprintf("must be a positive number of deliveries per second per destination, at most %g, not %g", float64(MaxRedriveRate), p.RatePerSecond))
	case p.BatchSize < 0:
		return invalid(ErrInvalidRequest, "BatchSize", "must not be negative")
	}
	return p.Filter.Validate()
}

// Redrive moves the dead-lettered deliveries matching params.Filter back to
// pending, at most params.RatePerSecond per second per destination, and
// returns the audit entry as it ended.
//
// Before anything moves, it counts the selection (as PlanRedrive does), asks
// params.Authorizer if set and the authorization rule (see Authorizer; a
// refusal is a *RedriveRefusedError naming the tenants and nothing is
// written), and writes the audit entry. Only the tenants of that count
// are moved: a dead letter of another tenant committed afterwards stays
// dead. Each delivery keeps its delivery ID, payload and
// attempt history and gets a fresh attempt budget; a delivered delivery is
// never redriven, and two redrives racing over the same deliveries move
// each once (see DeadLetterLedger.RedriveDelivery). Each move is written
// to the ledger, then handed to Queue.Enqueue (a no-op for the memory and
// SQL stores, a publish for a broker queue), then reported to the Observer
// as EventRedriven. If Enqueue fails, the redrive ends failed, naming the
// delivery: it is pending in the ledger and needs enqueueing again.
//
// Redrive runs in the caller's goroutine until the selection is done, a
// stop is requested (StopRedrive, from any process), or ctx ends; the last
// two leave the entry stopped, to be resumed with ResumeRedrive. Time comes
// from the client's clock, so a mock clock drives the rate in tests. A
// redriven delivery gets a fresh delivery window too (WindowStart is set to
// the moment it moved), so deliveries that died in an outage longer than
// the policy's MaxAge are delivered after the redrive instead of dying
// again at once.
func (c *Client) Redrive(ctx context.Context, params RedriveParams) (RedriveAudit, error) {
	dl, log, err := c.redriveStores()
	if err != nil {
		return RedriveAudit{}, err
	}
	if err := params.Validate(); err != nil {
		return RedriveAudit{}, err
	}
	params.BatchSize = min(cmp.Or(params.BatchSize, DefaultRedriveBatchSize), MaxPageSize)
	now := c.clock.Now()
	filter := params.Filter
	filter.DeadBefore = snapshotBound(filter.DeadBefore, now)
	plan, err := planRedrive(ctx, dl, filter)
	if err != nil {
		return RedriveAudit{}, err
	}
	if params.NarrowTenants != nil {
		plan = plan.OnlyTenants(params.NarrowTenants(ctx, slices.Clone(plan.Tenants)))
	}
	req := RedriveAuthorization{
		Actor: params.Actor, Reason: params.Reason, Filter: params.Filter, Tenants: plan.Tenants, Plan: plan,
	}
	if params.Authorizer != nil {
		if err := params.Authorizer.AuthorizeRedrive(ctx, req); err != nil {
			return RedriveAudit{}, &RedriveRefusedError{Actor: req.Actor, Tenants: req.Tenants, Err: err}
		}
	}
	if err := c.authorize(ctx, req); err != nil {
		return RedriveAudit{}, err
	}
	audit := RedriveAudit{
		ID: "rdv_" + uuid.NewString(), Actor: params.Actor, Reason: params.Reason,
		Filter: params.Filter, Snapshot: now, RatePerSecond: params.RatePerSecond,
		BatchSize: params.BatchSize, Tenants: plan.Tenants, Matched: plan.Total,
		State: RedriveRunning, Run: 1, CreatedAt: now, UpdatedAt: now,
	}
	if err := log.CreateRedriveAudit(ctx, audit); err != nil {
		return RedriveAudit{}, opErr("ledger.create_redrive_audit", "", err)
	}
	return c.runRedrive(ctx, dl, log, audit, params.Progress, time.Time{})
}

// ResumeRedrive continues a stopped or failed redrive (or a running one
// whose stop was requested but whose process died) with its recorded
// selection, rate and batch size (the rate counted on from the runs
// before: a destination's first move waits for its slot after their last
// one), after asking the authorization rule
// again, for actor: the one resuming it, who need not be the one who
// started it. The rule is asked about what is left to move, in the
// tenants the redrive was authorized for (its audit's Tenants): the only
// ones it moves. The audit entry records actor as ResumedBy and begins a
// new Run: a run that had not yet seen its stop when resumed (it looks
// every second while it waits for a slot) ends when it looks, leaving the entry to this one, so one run
// at a time moves the selection. It runs like Redrive and returns the
// entry as it ended; the overtaken run's Redrive returns the entry as it
// found it, with no error.
func (c *Client) ResumeRedrive(ctx context.Context, id, actor string, progress func(RedriveAudit)) (RedriveAudit, error) {
	dl, log, err := c.redriveStores()
	if err != nil {
		return RedriveAudit{}, err
	}
	if strings.TrimSpace(actor) == "" {
		return RedriveAudit{}, invalid(ErrInvalidRequest, "actor", "must not be blank (empty or only white space)")
	}
	a, err := log.RedriveAudit(ctx, id)
	if err != nil {
		return RedriveAudit{}, opErr("ledger.redrive_audit", "", err)
	}
	switch {
	case a.State == RedriveStopped, a.State == RedriveFailed:
	case a.State == RedriveRunning && a.StopRequested:
	default:
		return a, fmt.Errorf("resume redrive %s: %w: it is %s", id, ErrInvalidState, a.State)
	}
	// The rule is asked about what the resume moves: what is left of the
	// selection in the tenants the redrive was authorized for (a dead
	// letter of another tenant committed since is not moved, so it is not
	// asked about either).
	filter := a.Filter
	filter.DeadBefore = snapshotBound(filter.DeadBefore, a.Snapshot)
	filter.TenantIDs = a.Tenants
	plan := RedrivePlan{Filter: filter} // no tenant: it moves nothing
	if len(a.Tenants) > 0 {
		if plan, err = planRedrive(ctx, dl, filter); err != nil {
			return RedriveAudit{}, err
		}
	}
	if err := c.authorize(ctx, RedriveAuthorization{
		Actor: actor, Reason: a.Reason, Filter: a.Filter, Tenants: plan.Tenants, Plan: plan,
	}); err != nil {
		return a, err
	}
	// The runs before moved nothing after the entry's last update: if
	// they moved any, the rate's next slot of each destination is counted
	// from there.
	var lastRun time.Time
	if a.Redriven > 0 {
		lastRun = a.UpdatedAt
	}
	a, err = log.UpdateRedriveAudit(ctx, RedriveAuditUpdate{ID: id, Now: c.clock.Now(), State: RedriveRunning, ClearStop: true, ResumedBy: actor, NewRun: true})
	if err != nil {
		return RedriveAudit{}, opErr("ledger.update_redrive_audit", "", err)
	}
	return c.runRedrive(ctx, dl, log, a, progress, lastRun)
}

// StopRedrive asks a running redrive to stop; it stops before its next
// move, in whichever process runs it — within a second on its clock
// while it waits for a far rate slot — and nothing else is affected. The
// request is durable. Stopping a stopped redrive is a no-op; stopping a
// finished one returns an error wrapping ErrInvalidState.
func (c *Client) StopRedrive(ctx context.Context, id, actor string) (RedriveAudit, error) {
	_, log, err := c.redriveStores()
	if err != nil {
		return RedriveAudit{}, err
	}
	if strings.TrimSpace(actor) == "" {
		return RedriveAudit{}, invalid(ErrInvalidRequest, "actor", "must not be blank (empty or only white space)")
	}
	a, err := log.RedriveAudit(ctx, id)
	if err != nil {
		return RedriveAudit{}, opErr("ledger.redrive_audit", "", err)
	}
	switch a.State {
	case RedriveStopped:
		return a, nil
	case RedriveFinished:
		return a, fmt.Errorf("stop redrive %s: %w: it already finished", id, ErrInvalidState)
	}
	a, err = log.UpdateRedriveAudit(ctx, RedriveAuditUpdate{ID: id, Now: c.clock.Now(), StopRequestedBy: actor})
	if err != nil {
		return RedriveAudit{}, opErr("ledger.update_redrive_audit", "", err)
	}
	return a, nil
}

// RedriveStatus returns a redrive's audit entry, or an error wrapping
// ErrRedriveNotFound.
func (c *Client) RedriveStatus(ctx context.Context, id string) (RedriveAudit, error) {
	_, log, err := c.redriveStores()
	if err != nil {
		return RedriveAudit{}, err
	}
	a, err := log.RedriveAudit(ctx, id)
	if err != nil {
		return RedriveAudit{}, opErr("ledger.redrive_audit", "", err)
	}
	return a, nil
}

func (c *Client) redriveStores() (DeadLetterLedger, RedriveAuditLog, error) {
	rl, ok := As[RedriveLedger](c.ledger)
	if !ok {
		return nil, nil, fmt.Errorf("redrive: %w (the Ledger is not a RedriveLedger: a DeadLetterLedger and a RedriveAuditLog)", ErrUnsupported)
	}
	return rl, rl, nil
}

// snapshotBound narrows an exclusive DeadBefore bound so that the
// selection includes deliveries dead-lettered at or before snapshot only.
func snapshotBound(before, snapshot time.Time) time.Time {
	bound := snapshot.Add(time.Nanosecond)
	if before.IsZero() || bound.Before(before) {
		return bound
	}
	return before
}

// runRedrive moves the audit's selection batch by batch, checking the stop
// control before each batch and recording progress after it. A resumed
// run gives lastRun, when the runs before it last moved a delivery (or
// later): each destination's first move waits for its slot after it, so a
// stop and a resume do not let one more delivery per destination through.
func (c *Client) runRedrive(ctx context.Context, dl DeadLetterLedger, log RedriveAuditLog, a RedriveAudit, progress func(RedriveAudit), lastRun time.Time) (RedriveAudit, error) {
	filter := a.Filter
	filter.DeadBefore = snapshotBound(filter.DeadBefore, a.Snapshot)
	// Move only the tenants that were authorized: a delivery of another
	// tenant whose dead-letter committed after the plan stays dead.
	filter.TenantIDs = a.Tenants
	limiters := map[string]*rate.Limiter{}
	// run is this run's number: a state it writes applies only while no
	// later run (a resume elsewhere) has begun; its counts apply always.
	run := a.Run
	update := func(u RedriveAuditUpdate) error {
		u.ID, u.Now = a.ID, c.clock.Now()
		if u.State != "" {
			u.IfRun = run
		}
		na, err := log.UpdateRedriveAudit(context.WithoutCancel(ctx), u)
		if err != nil {
			return opErr("ledger.update_redrive_audit", u.LastDeliveryID, err)
		}
		a = na
		return nil
	}
	fail := func(cause error) (RedriveAudit, error) {
		if err := update(RedriveAuditUpdate{State: RedriveFailed, Error: cause.Error()}); err != nil {
			return a, errors.Join(cause, err)
		}
		return a, cause
	}
	// interrupted records that ctx ended the redrive.
	interrupted := func() (RedriveAudit, error) {
		if err := update(RedriveAuditUpdate{State: RedriveStopped, Error: "interrupted: " + ctx.Err().Error()}); err != nil {
			return a, errors.Join(ctx.Err(), err)
		}
		return a, ctx.Err()
	}
	if progress != nil {
		progress(a) // the ID is known from here on, so it can be stopped
	}
	var after *DeadLetterCursor
	for {
		cur, err := log.RedriveAudit(ctx, a.ID)
		if err != nil {
			if ctx.Err() != nil {
				return interrupted()
			}
			return fail(opErr("ledger.redrive_audit", "", err))
		}
		a = cur
		if a.Run != run {
			return a, nil // a resume began a later run, which goes on
		}
		if a.StopRequested {
			err := update(RedriveAuditUpdate{State: RedriveStopped, Error: "stopped by " + a.StopRequestedBy})
			return a, err
		}
		if ctx.Err() != nil {
			return interrupted()
		}
		page, err := dl.ListDead(ctx, ListDeadParams{Filter: filter, Limit: a.BatchSize, After: after})
		if err != nil {
			if ctx.Err() != nil {
				return interrupted()
			}
			return fail(opErr("ledger.list_dead", "", err))
		}
		if len(page.Deliveries) == 0 || len(filter.TenantIDs) == 0 {
			if err := update(RedriveAuditUpdate{State: RedriveFinished}); err != nil {
				return a, err
			}
			if progress != nil {
				progress(a)
			}
			return a, nil
		}
		// The ledger counted each move and skip in the entry as it made it
		// (DeadLetterLedger.RedriveDelivery); what is left to add are the
		// deliveries gone before they were reached. With none, the entry
		// is only read again, for progress and the checks below: a write
		// would change nothing.
		moved, gone, last, runErr := c.redriveBatch(ctx, dl, log, a, limiters, lastRun, page.Deliveries)
		if gone > 0 {
			if err := update(RedriveAuditUpdate{AddSkipped: gone, LastDeliveryID: last}); err != nil {
				return a, errors.Join(runErr, err)
			}
		} else if cur, err := log.RedriveAudit(ctx, a.ID); err == nil {
			a = cur // on an error the loop's head reads it again
		}
		if moved > 0 {
			c.worker.wakeUp()
		}
		if progress != nil {
			progress(a)
		}
		// A delivery the ledger moved but the queue did not take is named
		// even when ctx ended meanwhile: a resume would skip it.
		var op *OpError
		leftOut := errors.As(runErr, &op) && op.Op == "queue.enqueue"
		switch {
		case runErr != nil && ctx.Err() != nil && !leftOut:
			return interrupted()
		case runErr != nil:
			return fail(runErr)
		case a.StopRequested, a.Run != run:
			continue // the loop's head records the stop, or ends this run
		case page.Next == nil:
			return a, update(RedriveAuditUpdate{State: RedriveFinished})
		}
		after = page.Next
	}
}

// redriveBatch moves one batch at the per-destination rate. Each delivery
// reserves its slot on its destination's limiter up front; the batch then
// runs in slot order, so a slow rate on one destination does not hold up
// another destination's deliveries in the same batch. After every wait for
// a slot, and at least every redriveStopPoll while waiting for a far one,
// it looks at the stop control again, so a stop takes effect within
// seconds even at a low rate; it then returns early and the caller records
// the stop. It returns how many deliveries it moved and how many were gone
// (the ledger counts the moves and the other skips in the audit entry
// itself), and the last one handled.
func (c *Client) redriveBatch(ctx context.Context, dl DeadLetterLedger, log RedriveAuditLog, a RedriveAudit, limiters map[string]*rate.Limiter, lastRun time.Time, ds []Delivery) (moved, gone int64, last string, err error) {
	type slot struct {
		d  Delivery
		at time.Time
		r  *rate.Reservation
	}
	now := c.clock.Now()
	slots := make([]slot, len(ds))
	for i, d := range ds {
		lim, ok := limiters[d.DestinationID]
		if !ok {
			lim = rate.NewLimiter(rate.Limit(a.RatePerSecond), 1)
			if !lastRun.IsZero() {
				lim.ReserveN(lastRun, 1) // a run before may have moved one then
			}
			limiters[d.DestinationID] = lim
		}
		r := lim.ReserveN(now, 1)
		slots[i] = slot{d: d, at: now.Add(r.DelayFrom(now)), r: r}
	}
	slices.SortStableFunc(slots, func(x, y slot) int { return x.at.Compare(y.at) })
	for i, s := range slots {
		// A slot the rate put in the future is where a stop is looked for,
		// whether or not the clock has passed it by the time it is reached
		// (a slow process, or a busy store, must not skip the check).
		stop, err := c.waitForSlot(ctx, log, a, s.at, s.at.After(now))
		if err != nil || stop {
			for _, rest := range slots[i:] {
				rest.r.CancelAt(c.clock.Now())
			}
			return moved, gone, last, err
		}
		at := c.clock.Now()
		rec, ok, err := dl.RedriveDelivery(ctx, RedriveDeliveryParams{ID: s.d.ID, AuditID: a.ID, Now: at})
		if errors.Is(err, ErrNotFound) {
			// A cleaner with RemoveDead took it since the listing: no
			// longer dead, like one a worker or another redrive moved,
			// but no record was there to count it with.
			ok, err = false, nil
			gone++
		}
		if err != nil {
			for _, rest := range slots[i:] {
				rest.r.CancelAt(at)
			}
			return moved, gone, last, opErr("ledger.redrive_delivery", s.d.ID, err)
		}
		last = s.d.ID
		if !ok {
			continue
		}
		moved++
		// A redrive usually follows a fix to the destination: its next
		// attempt reads the destination afresh.
		c.worker.dests.forget(s.d.DestinationID)
		// Ledger first, then the queue: where the queue is not the ledger's
		// own store (a broker), this is what puts the message back on it.
		// Where it is (a LedgerQueue), the move made the delivery
		// claimable, and there is nothing to hand on: a context ended
		// here would otherwise fail the redrive naming a delivery that is
		// pending.
		if !c.ledgerQueue {
			if err := c.queue.Enqueue(ctx, []Delivery{rec}); err != nil {
				for _, rest := range slots[i+1:] {
					rest.r.CancelAt(at)
				}
				return moved, gone, last, opErr("queue.enqueue", s.d.ID, err)
			}
		}
		c.observe(ctx, Event{Name: EventRedriven, Delivery: rec, Reason: s.d.LastReason, Time: at})
	}
	return moved, gone, last, nil
}

// redriveStopPoll is how often a redrive waiting for a far slot looks at
// its stop control.
const redriveStopPoll = time.Second

// waitForSlot waits on the client's clock until t. When the slot was in
// the future (waited), it looks at the stop control every redriveStopPoll
// on the way and once more at t; stop reports a stop requested (or a later
// run begun). An error is ctx's, or the store's.
func (c *Client) waitForSlot(ctx context.Context, log RedriveAuditLog, a RedriveAudit, t time.Time, waited bool) (stop bool, err error) {
	for waited {
		next := c.clock.Now().Add(redriveStopPoll)
		until := t
		if next.Before(t) {
			until = next
		}
		if err := c.sleepUntil(ctx, until); err != nil {
			return false, err
		}
		cur, err := log.RedriveAudit(ctx, a.ID)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, opErr("ledger.redrive_audit", "", err)
		}
		if cur.StopRequested || cur.Run != a.Run {
			return true, nil
		}
		if !next.Before(t) {
			return false, nil
		}
	}
	return false, c.sleepUntil(ctx, t)
}

// sleepUntil waits on the client's clock until t or until ctx ends.
func (c *Client) sleepUntil(ctx context.Context, t time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := t.Sub(c.clock.Now())
	if d <= 0 {
		return nil
	}
	timer := c.clock.Timer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Destinations lists every destination's status (no URL, secret or
// header), ordered by ID. It returns ErrUnsupported when Destinations is
// not a DestinationLister.
func (c *Client) Destinations(ctx context.Context) ([]DestinationStatus, error) {
	dl, ok := As[DestinationLister](c.destinations)
	if !ok {
		return nil, fmt.Errorf("list destinations: %w (Destinations is not a DestinationLister)", ErrUnsupported)
	}
	out, err := dl.ListDestinations(ctx)
	if err != nil {
		return nil, fmt.Errorf("hookrelay: list destinations: %w", err)
	}
	return out, nil
}

// DestinationStatus returns one destination's status (no URL, secret or
// header), or an error wrapping ErrDestinationNotFound.
func (c *Client) DestinationStatus(ctx context.Context, id string) (DestinationStatus, error) {
	d, err := c.destinations.Destination(ctx, id)
	if err != nil {
		return DestinationStatus{}, fmt.Errorf("hookrelay: destination %s: %w", quote(id), shortNotFound(err))
	}
	return d.Status(), nil
}

// RedriveAudits returns the newest redrive audit entries, at most limit
// (defaults to DefaultRedriveAuditsLimit; at most MaxPageSize). It returns
// ErrUnsupported when the Ledger is not a RedriveAuditLister.
func (c *Client) RedriveAudits(ctx context.Context, limit int) ([]RedriveAudit, error) {
	l, ok := As[RedriveAuditLister](c.ledger)
	if !ok {
		return nil, fmt.Errorf("redrive audits: %w (the Ledger is not a RedriveAuditLister)", ErrUnsupported)
	}
	if limit <= 0 {
		limit = DefaultRedriveAuditsLimit
	}
	out, err := l.ListRedriveAudits(ctx, ListRedriveAuditsParams{Limit: min(limit, MaxPageSize)})
	if err != nil {
		return nil, opErr("ledger.list_redrive_audits", "", err)
	}
	return out, nil
}
