package hookrelaytest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// configGate stands for a recipient whose integration only works with the
// corrected destination configuration: requests made with any other
// configuration (seen by the sender as SendParams.Destination) get refusal
// and apply nothing; the rest reach the deduplicating Recipient.
type configGate struct {
	rec     *Recipient
	accepts func(hookrelay.Destination) bool
	refusal hookrelay.Result

	mu      sync.Mutex
	refused []Request
}

func (g *configGate) Send(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
	if !g.accepts(p.Destination) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.refused = append(g.refused, Request{DeliveryID: p.Delivery.ID, EventID: p.Delivery.EventID, Attempt: p.Delivery.Attempt})
		return g.refusal
	}
	return g.rec.Send(ctx, p)
}

func (g *configGate) refusedFor(id string) []Request {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Request
	for _, r := range g.refused {
		if r.DeliveryID == id {
			out = append(out, r)
		}
	}
	return out
}

const (
	brokenURL = "https://accounting.example/v1/webhooks"
	fixedURL  = "https://accounting.example/v2/webhooks"
	oldSecret = "whsec_b2xkLXNlY3JldC1vbGQtc2VjcmV0LW9sZA=="
	newSecret = "whsec_bmV3LXNlY3JldC1uZXctc2VjcmV0LW5ldw=="
)

// deadNowAndLater gives e a second tenant's destination and two
// deliveries failing for good: a (tenant_a, dest_1), dead-lettered now, and
// b (tenant_b, dest_b), pending, for a case to dead-letter mid-redrive
// (deadLetterLate); the clock is a minute on.
func (e *engine) deadNowAndLater(t *testing.T) (a, b string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_b", TenantID: "tenant_b", URL: "https://b.example/"}))
	e.rec.Script = failTimes(100, hookrelay.Permanent(hookrelay.ReasonBadRequest))
	a = e.enqueueFor("evt_a", "tenant_a", "dest_1", "t")
	e.step()
	b = e.enqueueFor("evt_b", "tenant_b", "dest_b", "t")
	e.clock.Add(time.Minute)
	return a, b
}

// deadLetterLate dead-letters b (see deadNowAndLater) now, stamped a
// second after base: before any redrive's snapshot, committed after it.
func (e *engine) deadLetterLate(t *testing.T, b string) {
	t.Helper()
	ctx := context.Background()
	cs, err := e.h.Queue.Claim(ctx, hookrelay.ClaimParams{Now: e.clock.Now(), Limit: 1, LeaseFor: leaseFor})
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.Equal(t, b, cs[0].Delivery.ID)
	require.NoError(t, e.h.Ledger.RecordDeadLetter(ctx, hookrelay.RecordDeadLetterParams{
		ID: b, Lease: cs[0].Lease, Reason: hookrelay.ReasonBadRequest, Now: base.Add(time.Second),
	}))
}

// redriveEngine is an engine whose client talks to the harness's own
// Queue and Ledger (so their optional abilities are visible) and whose
// sender is g.
func redriveEngine(t *testing.T, h Harness, g *configGate, opts ...engineOption) *engine {
	t.Helper()
	if _, ok := hookrelay.As[hookrelay.RedriveLedger](h.Ledger); !ok {
		t.Skip("the Ledger does not implement hookrelay.RedriveLedger (DeadLetterLedger and RedriveAuditLog, optional abilities)")
	}
	opts = append([]engineOption{func(c *hookrelay.Config) {
		c.Queue, c.Ledger, c.Destinations = h.Queue, h.Ledger, h.Destinations
		if g != nil {
			c.Sender = g
		}
	}}, opts...)
	e := newEngine(t, h, opts...)
	if g != nil {
		g.rec = e.rec
	}
	return e
}

// drive advances the mock clock in small steps until done is closed, so a
// redrive waiting on its rate limiter makes progress. The redrive's own
// timestamps, not this loop's pace, are what tests check.
func drive(c *clock.Mock, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
			c.Add(50 * time.Millisecond)
		}
	}
}

// redriveDriven runs a redrive while driving the mock clock.
func (e *engine) redriveDriven(p hookrelay.RedriveParams) (hookrelay.RedriveAudit, error) {
	return e.driving(func() (hookrelay.RedriveAudit, error) { return e.client.Redrive(context.Background(), p) })
}

// resumeDriven resumes redrive id as actor while the mock clock moves.
func (e *engine) resumeDriven(id, actor string) (hookrelay.RedriveAudit, error) {
	return e.driving(func() (hookrelay.RedriveAudit, error) {
		return e.client.ResumeRedrive(context.Background(), id, actor, nil)
	})
}

// driving runs f while driving the mock clock, and stops driving it once
// f returns.
func (e *engine) driving(f func() (hookrelay.RedriveAudit, error)) (hookrelay.RedriveAudit, error) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); drive(e.clock, done) }()
	defer wg.Wait()
	defer close(done)
	return f()
}

func (e *engine) enqueueFor(eventID, tenant, destID, eventType string) string {
	e.t.Helper()
	res, err := e.client.Enqueue(context.Background(), hookrelay.EnqueueParams{
		EventID: eventID, TenantID: tenant, DestinationID: destID, EventType: eventType,
		Payload: []byte(`{"event":"` + eventID + `"}`),
	})
	require.NoError(e.t, err)
	return res.ID
}

func (e *engine) redrivenEvents() []hookrelay.Event { return e.events.of(hookrelay.EventRedriven) }

// assertRateHonoured checks that the k-th redrive to a destination happened
// no earlier than start + k/rate.
func assertRateHonoured(t *testing.T, events []hookrelay.Event, start time.Time, perSecond float64) {
	t.Helper()
	byDest := map[string]int{}
	for _, ev := range events {
		k := byDest[ev.Delivery.DestinationID]
		byDest[ev.Delivery.DestinationID]++
		earliest := start.Add(time.Duration(float64(k) / perSecond * float64(time.Second)))
		assert.False(t, ev.Time.Before(earliest), "redrive %d to %s at %v, before %v: the rate was not honoured",
			k, ev.Delivery.DestinationID, ev.Time.Sub(start), earliest.Sub(start))
	}
}

// RunRedrive runs the operator-recovery contract: dead-letter listing and
// plan, the fenced per-delivery redrive, audited and rate-limited redrives
// with stop and resume, tenant authorization, destination pause, and the
// recovery rehearsal (a broken destination, corrected, then redriven), end
// to end. It skips when the harness's Ledger is not a hookrelay.RedriveLedger
// (a DeadLetterLedger and a RedriveAuditLog: optional abilities).
func RunRedrive(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()

	// The recovery rehearsal: a payment webhook meets a broken
	// destination configuration, retries with one ID, exhausts its budget,
	// is inspected, the configuration is corrected, and an audited redrive
	// at a limited rate gets it (and its siblings) through with one effect.
	t.Run("RecoveryRehearsalRetryable", func(t *testing.T) {
		g := &configGate{
			accepts: func(d hookrelay.Destination) bool { return d.ID != "dest_acct" || d.URL == fixedURL },
			refusal: hookrelay.Retryable(hookrelay.ReasonServiceUnavailable).WithStatus(503),
		}
		e := redriveEngine(t, newHarness(t), g)
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_acct", TenantID: "tenant_a", URL: brokenURL, Secrets: []string{oldSecret}}))
		other := e.enqueue("evt_other", "dest_1") // another destination keeps flowing

		id := e.enqueueFor("pay_7319", "tenant_a", "dest_acct", "lease.payment_recorded")
		e.step()
		d := e.get(id)
		assert.Equal(t, hookrelay.StatePending, d.State, "a retryable result keeps it pending")
		assert.Equal(t, id, d.ID, "the delayed copy keeps the delivery ID")
		assert.Equal(t, 2, d.Attempt)
		assert.Equal(t, base.Add(500*time.Millisecond), d.NextAttemptAt.UTC(), "delayed by the backoff")
		require.Len(t, g.refusedFor(id), 1)
		assert.Equal(t, hookrelay.StateDelivered, e.get(other).State)

		d = e.run(id)
		require.Equal(t, hookrelay.StateDead, d.State, "the attempt budget is exhausted")
		assert.Equal(t, hookrelay.ReasonAttemptsExhausted, d.LastReason)
		refused := g.refusedFor(id)
		require.Len(t, refused, 7)
		for i, r := range refused {
			assert.Equal(t, id, r.DeliveryID, "every attempt carried the one ID")
			assert.Equal(t, i+1, r.Attempt)
		}
		// Three more payments to the same destination died the same way.
		siblings := []string{id}
		for i := range 3 {
			sid := e.enqueueFor(fmt.Sprintf("pay_%d", 8000+i), "tenant_a", "dest_acct", "lease.payment_recorded")
			require.Equal(t, hookrelay.StateDead, e.run(sid).State)
			siblings = append(siblings, sid)
		}

		// Inspect.
		sel := hookrelay.DeadLetterFilter{DestinationIDs: []string{"dest_acct"}, EventTypes: []string{"lease.payment_recorded"}}
		page, err := e.client.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: sel})
		require.NoError(t, err)
		require.Len(t, page.Deliveries, 4)
		assert.Equal(t, id, page.Deliveries[0].ID, "oldest dead-letter first")
		detail, err := e.client.Delivery(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StateDead, detail.Delivery.State)
		assert.JSONEq(t, `{"event":"pay_7319"}`, string(detail.Delivery.Payload))
		require.Len(t, detail.Attempts, 7)
		assert.Equal(t, hookrelay.ReasonServiceUnavailable, detail.Attempts[6].Reason)

		// Dry run: counts by destination and reason; nothing changes.
		plan, err := e.client.PlanRedrive(ctx, sel)
		require.NoError(t, err)
		assert.Equal(t, []hookrelay.PlanRow{{TenantID: "tenant_a", DestinationID: "dest_acct", Reason: hookrelay.ReasonAttemptsExhausted, Count: 4}}, plan.Rows)
		assert.EqualValues(t, 4, plan.Total)
		assert.Equal(t, []string{"tenant_a"}, plan.Tenants)
		assert.Equal(t, hookrelay.StateDead, e.get(id).State, "the plan changed nothing")

		// Correct the destination's configuration.
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_acct", TenantID: "tenant_a", URL: fixedURL, Secrets: []string{newSecret}}))

		// Redrive at two per second.
		audit, err := e.redriveDriven(hookrelay.RedriveParams{Filter: sel, Actor: "ops@example", Reason: "accounting URL corrected", RatePerSecond: 2})
		require.NoError(t, err)
		assert.Equal(t, hookrelay.RedriveFinished, audit.State)
		assert.EqualValues(t, 4, audit.Matched)
		assert.EqualValues(t, 4, audit.Redriven)
		evs := e.redrivenEvents()
		require.Len(t, evs, 4)
		assertRateHonoured(t, evs, audit.CreatedAt, 2)
		assert.False(t, evs[3].Time.Before(audit.CreatedAt.Add(1500*time.Millisecond)), "four deliveries at 2/s take at least 1.5 s")

		for _, sid := range siblings {
			rd := e.get(sid)
			assert.Equal(t, hookrelay.StatePending, rd.State)
			assert.Equal(t, 8, rd.Attempt, "numbering continues after the seven old attempts")
			assert.Equal(t, 8, rd.BudgetStart, "with a fresh budget")
			assert.Equal(t, 1, rd.BudgetAttempt())
		}
		for _, sid := range siblings {
			d := e.run(sid)
			assert.Equal(t, hookrelay.StateDelivered, d.State)
			e.assertOneEffect(sid)
			reqs := e.rec.RequestsFor(sid)
			require.Len(t, reqs, 1, "the corrected configuration got exactly one request")
			assert.Equal(t, sid, reqs[0].DeliveryID, "the redrive sent the same delivery ID")
			as := e.attempts(sid)
			require.Len(t, as, 8, "the old attempts are kept")
			for i, a := range as {
				assert.Equal(t, i+1, a.Number, "attempt history stays unambiguous")
			}
			assert.Equal(t, hookrelay.KindDelivered, as[7].Kind)
		}
		assert.JSONEq(t, `{"event":"pay_7319"}`, string(e.get(id).Payload), "the payload is untouched")
		e.clock.Add(24 * time.Hour)
		n, _ := e.step()
		assert.Zero(t, n, "nothing is left to claim")
	})

	t.Run("RecoveryRehearsalPermanent", func(t *testing.T) {
		g := &configGate{
			accepts: func(d hookrelay.Destination) bool {
				return d.ID != "dest_acct" || slices.Contains(d.Secrets, newSecret)
			},
			refusal: hookrelay.ClassifyStatus(401, 0),
		}
		require.Equal(t, hookrelay.KindPermanent, g.refusal.Kind, "a 401 is a permanent rejection")
		e := redriveEngine(t, newHarness(t), g)
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_acct", TenantID: "tenant_a", URL: fixedURL, Secrets: []string{oldSecret}}))
		id := e.enqueueFor("pay_7319", "tenant_a", "dest_acct", "lease.payment_recorded")
		e.step()
		d := e.get(id)
		require.Equal(t, hookrelay.StateDead, d.State, "a permanent rejection dead-letters at once")
		assert.Equal(t, hookrelay.ReasonAuthRejected, d.LastReason)
		for range 10 {
			e.clock.Add(time.Hour)
			n, _ := e.step()
			assert.Zero(t, n, "a permanent rejection never returns to the active queue on its own")
		}
		assert.Len(t, g.refusedFor(id), 1)
		assert.Equal(t, hookrelay.StateDead, e.get(id).State)

		plan, err := e.client.PlanRedrive(ctx, hookrelay.DeadLetterFilter{Reasons: []string{hookrelay.ReasonAuthRejected}})
		require.NoError(t, err)
		assert.EqualValues(t, 1, plan.Total)

		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_acct", TenantID: "tenant_a", URL: fixedURL, Secrets: []string{newSecret}}))
		audit, err := e.redriveDriven(hookrelay.RedriveParams{
			Filter: hookrelay.DeadLetterFilter{TenantIDs: []string{"tenant_a"}, Reasons: []string{hookrelay.ReasonAuthRejected}},
			Actor:  "ops@example", Reason: "signing secret rotated", RatePerSecond: 1,
		})
		require.NoError(t, err)
		assert.EqualValues(t, 1, audit.Redriven)
		d = e.run(id)
		assert.Equal(t, hookrelay.StateDelivered, d.State)
		e.assertOneEffect(id)
		as := e.attempts(id)
		require.Len(t, as, 2)
		assert.Equal(t, hookrelay.KindPermanent, as[0].Kind)
		assert.Equal(t, 2, as[1].Number)
	})

	// The rehearsal after a long outage: the recipient is down for longer
	// than the delivery window, so its deliveries die with
	// delivery_window_expired. A redrive is a fresh, deliberate start: a
	// fresh window as well as a fresh budget, recorded on the record, so the
	// redriven deliveries are delivered instead of dying again at once.
	t.Run("RecoveryRehearsalAfterAnOutageLongerThanTheWindow", func(t *testing.T) {
		down := true
		var mu sync.Mutex
		g := &configGate{
			accepts: func(hookrelay.Destination) bool { mu.Lock(); defer mu.Unlock(); return !down },
			refusal: hookrelay.Retryable(hookrelay.ReasonServiceUnavailable).WithStatus(503),
		}
		e := redriveEngine(t, newHarness(t), g)
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{
			ID: "dest_acct", TenantID: "tenant_a", URL: fixedURL,
			Policy: &hookrelay.Policy{Version: "acct-v1", MaxAttempts: 50, BaseDelay: time.Second, MaxDelay: 10 * time.Minute, MaxAge: time.Hour},
		}))
		var ids []string
		for i := range 3 {
			ids = append(ids, e.enqueueFor(fmt.Sprintf("pay_%d", 9000+i), "tenant_a", "dest_acct", "lease.payment_recorded"))
		}
		queued := e.get(ids[0]).FirstQueuedAt
		for _, id := range ids {
			d := e.run(id)
			require.Equal(t, hookrelay.StateDead, d.State)
			assert.Equal(t, hookrelay.ReasonWindowExpired, d.LastReason, "the outage outlasted the one-hour window")
		}
		// The outage goes on for hours more; then the recipient recovers.
		e.clock.Add(3 * time.Hour)
		mu.Lock()
		down = false
		mu.Unlock()

		audit, err := e.redriveDriven(hookrelay.RedriveParams{
			Filter: hookrelay.DeadLetterFilter{Reasons: []string{hookrelay.ReasonWindowExpired}},
			Actor:  "ops@example", Reason: "accounting back after a 4 h outage", RatePerSecond: 5,
		})
		require.NoError(t, err)
		assert.EqualValues(t, 3, audit.Redriven)
		for _, ev := range e.redrivenEvents() {
			rd := e.get(ev.Delivery.ID)
			assert.Equal(t, hookrelay.StatePending, rd.State)
			assert.Equal(t, ev.Time.UTC(), rd.WindowStart.UTC(), "the redrive's time is recorded as the new window's start")
			assert.Equal(t, queued.UTC(), rd.FirstQueuedAt.UTC(), "the first enqueue time is kept")
			assert.Equal(t, rd.WindowStart, rd.WindowStartsAt())
		}
		for _, id := range ids {
			d := e.run(id)
			assert.Equal(t, hookrelay.StateDelivered, d.State, "delivered, not dead again at once")
			e.assertOneEffect(id)
			as := e.attempts(id)
			assert.Equal(t, hookrelay.KindDelivered, as[len(as)-1].Kind)
			assert.Greater(t, len(as), 1, "the outage's attempts are kept")
		}
	})

	t.Run("RedrivenDeliveryGetsAFreshBudget", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		e.rec.Script = failTimes(100, hookrelay.Retryable(hookrelay.ReasonServerError))
		id := e.enqueue("evt_1", "dest_1")
		require.Equal(t, hookrelay.StateDead, e.run(id).State)
		_, err := e.redriveDriven(hookrelay.RedriveParams{Actor: "ops", Reason: "retry", RatePerSecond: 10})
		require.NoError(t, err)
		startAt := e.clock.Now()
		e.step()
		assert.Equal(t, startAt.Add(500*time.Millisecond), e.get(id).NextAttemptAt, "backoff restarts with the budget")
		d := e.run(id)
		assert.Equal(t, hookrelay.StateDead, d.State)
		as := e.attempts(id)
		require.Len(t, as, 14, "seven old attempts and seven new ones")
		for i, a := range as {
			assert.Equal(t, i+1, a.Number)
		}
	})

	t.Run("RacingRedrivesMoveEachDeliveryOnce", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		e.rec.Script = failTimes(1, hookrelay.Permanent(hookrelay.ReasonBadRequest))
		var ids []string
		for i := range 12 {
			id := e.enqueue(fmt.Sprintf("evt_%d", i), "dest_1")
			e.step()
			require.Equal(t, hookrelay.StateDead, e.get(id).State)
			ids = append(ids, id)
		}
		done := make(chan struct{})
		var driver sync.WaitGroup
		driver.Add(1)
		go func() { defer driver.Done(); drive(e.clock, done) }()
		var wg sync.WaitGroup
		audits := make([]hookrelay.RedriveAudit, 2)
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				audits[i], errs[i] = e.client.Redrive(ctx, hookrelay.RedriveParams{
					Actor: fmt.Sprintf("op%d", i), Reason: "race", RatePerSecond: 20, BatchSize: 5,
				})
			}()
		}
		wg.Wait()
		close(done)
		driver.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		assert.NotEqual(t, audits[0].ID, audits[1].ID)
		assert.EqualValues(t, 12, audits[0].Redriven+audits[1].Redriven, "each delivery moved once in all")
		for _, a := range audits {
			assert.Equal(t, hookrelay.RedriveFinished, a.State)
			assert.LessOrEqual(t, a.Redriven+a.Skipped, a.Matched, "a redrive handles at most what matched when it started")
		}
		evs := e.redrivenEvents()
		require.Len(t, evs, 12, "one EventRedriven per moved delivery")
		seen := map[string]bool{}
		for _, ev := range evs {
			assert.False(t, seen[ev.Delivery.ID], "delivery %s redriven twice", ev.Delivery.ID)
			seen[ev.Delivery.ID] = true
		}
		for _, id := range ids {
			d := e.get(id)
			assert.Equal(t, hookrelay.StatePending, d.State)
			assert.Equal(t, 2, d.Attempt)
		}
	})

	t.Run("RedriveDeliveryIsACompareAndSet", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		dl, _ := hookrelay.As[hookrelay.DeadLetterLedger](e.h.Ledger)
		e.rec.Script = func(d hookrelay.Delivery, _ int) RecipientAnswer {
			if d.EventID == "evt_dead" {
				return Reject(hookrelay.Permanent(hookrelay.ReasonBadRequest))
			}
			return Accept()
		}
		delivered := e.enqueue("evt_ok", "dest_1")
		dead := e.enqueue("evt_dead", "dest_1")
		e.step()
		pending := e.enqueue("evt_new", "dest_1")
		require.Equal(t, hookrelay.StateDelivered, e.get(delivered).State)
		require.Equal(t, hookrelay.StateDead, e.get(dead).State)

		for _, id := range []string{delivered, pending} {
			before := e.get(id)
			_, moved, err := dl.RedriveDelivery(ctx, hookrelay.RedriveDeliveryParams{ID: id, AuditID: "rdv_test", Now: e.clock.Now()})
			require.NoError(t, err)
			assert.False(t, moved, "only a dead delivery moves")
			assert.Equal(t, before.State, e.get(id).State)
		}
		rec, moved, err := dl.RedriveDelivery(ctx, hookrelay.RedriveDeliveryParams{ID: dead, AuditID: "rdv_test", Now: e.clock.Now()})
		require.NoError(t, err)
		assert.True(t, moved)
		assert.Equal(t, hookrelay.StatePending, rec.State)
		assert.Equal(t, dead, rec.ID)
		_, moved, err = dl.RedriveDelivery(ctx, hookrelay.RedriveDeliveryParams{ID: dead, AuditID: "rdv_test", Now: e.clock.Now()})
		require.NoError(t, err)
		assert.False(t, moved, "the second redrive finds it pending")
		_, _, err = dl.RedriveDelivery(ctx, hookrelay.RedriveDeliveryParams{ID: "whd_missing", AuditID: "rdv_test", Now: e.clock.Now()})
		assert.ErrorIs(t, err, hookrelay.ErrNotFound)
	})

	t.Run("RedriveDeliveryCountsItselfInItsAudit", func(t *testing.T) {
		// The move and its count are one step: a redrive whose process
		// dies after a move (before its batch's audit update) leaves an
		// entry that counts every delivery it moved.
		e := redriveEngine(t, newHarness(t), nil)
		rl, _ := hookrelay.As[hookrelay.RedriveLedger](e.h.Ledger)
		e.rec.Script = failTimes(1, hookrelay.Permanent(hookrelay.ReasonBadRequest))
		dead := e.enqueue("evt_dead", "dest_1")
		e.step()
		require.Equal(t, hookrelay.StateDead, e.get(dead).State)
		now := e.clock.Now()
		audit := hookrelay.RedriveAudit{
			ID: "rdv_counted", Actor: "ops@example", Reason: "recipient fixed", Snapshot: now, RatePerSecond: 1,
			BatchSize: 10, Tenants: []string{"tenant_a"}, Matched: 1, State: hookrelay.RedriveRunning, Run: 1,
			CreatedAt: now, UpdatedAt: now,
		}
		require.NoError(t, rl.CreateRedriveAudit(ctx, audit))
		e.clock.Add(time.Second)
		_, moved, err := rl.RedriveDelivery(ctx, hookrelay.RedriveDeliveryParams{ID: dead, AuditID: audit.ID, Now: e.clock.Now()})
		require.NoError(t, err)
		require.True(t, moved)
		got, err := rl.RedriveAudit(ctx, audit.ID)
		require.NoError(t, err)
		assert.EqualValues(t, 1, got.Redriven, "the move is counted in the audit it names")
		assert.EqualValues(t, 0, got.Skipped)
		assert.Equal(t, dead, got.LastDeliveryID)
		assert.True(t, got.UpdatedAt.Equal(e.clock.Now()), "the entry was updated at the move: %v", got.UpdatedAt)
		_, moved, err = rl.RedriveDelivery(ctx, hookrelay.RedriveDeliveryParams{ID: dead, AuditID: audit.ID, Now: e.clock.Now()})
		require.NoError(t, err)
		require.False(t, moved)
		got, err = rl.RedriveAudit(ctx, audit.ID)
		require.NoError(t, err)
		assert.EqualValues(t, 1, got.Redriven)
		assert.EqualValues(t, 1, got.Skipped, "a delivery no longer dead is counted as skipped")
		assert.Equal(t, hookrelay.RedriveRunning, got.State, "nothing but the counts changed")
		_, _, err = rl.RedriveDelivery(ctx, hookrelay.RedriveDeliveryParams{ID: dead, AuditID: "rdv_unknown", Now: e.clock.Now()})
		assert.NoError(t, err, "an AuditID naming no entry is no error")
	})

	t.Run("StaleDeadLetterHolderCannotTouchTheRedrivenDelivery", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		dl, _ := hookrelay.As[hookrelay.DeadLetterLedger](e.h.Ledger)
		id := e.enqueue("evt_1", "dest_1")
		cs, err := e.h.Queue.Claim(ctx, hookrelay.ClaimParams{Now: e.clock.Now(), Limit: 1, LeaseFor: leaseFor, Holder: "slow"})
		require.NoError(t, err)
		require.Len(t, cs, 1)
		// The holder records the dead-letter, then stalls before its queue
		// transition; an operator redrives meanwhile.
		require.NoError(t, e.h.Ledger.RecordDeadLetter(ctx, hookrelay.RecordDeadLetterParams{ID: id, Lease: cs[0].Lease, Reason: hookrelay.ReasonBadRequest, Now: e.clock.Now()}))
		_, moved, err := dl.RedriveDelivery(ctx, hookrelay.RedriveDeliveryParams{ID: id, AuditID: "rdv_test", Now: e.clock.Now()})
		require.NoError(t, err)
		require.True(t, moved)
		err = e.h.Queue.DeadLetter(ctx, hookrelay.DeadLetterParams{Delivery: cs[0].Delivery, Lease: cs[0].Lease, Reason: hookrelay.ReasonBadRequest, Now: e.clock.Now()})
		assert.ErrorIs(t, err, hookrelay.ErrLeaseLost, "the stale holder's transition is refused")
		d := e.run(id)
		assert.Equal(t, hookrelay.StateDelivered, d.State, "the redriven delivery is still claimable")
	})

	t.Run("MixedTenantSelectionIsRefusedAndNamesTheTenants", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_b", TenantID: "tenant_b", URL: "https://b.example/"}))
		e.rec.Script = failTimes(100, hookrelay.Permanent(hookrelay.ReasonBadRequest))
		a := e.enqueueFor("evt_a", "tenant_a", "dest_1", "lease.payment_recorded")
		b := e.enqueueFor("evt_b", "tenant_b", "dest_b", "lease.payment_recorded")
		e.step()
		_, err := e.client.Redrive(ctx, hookrelay.RedriveParams{Actor: "ops", Reason: "all of it", RatePerSecond: 5})
		require.ErrorIs(t, err, hookrelay.ErrRedriveRefused)
		var refused *hookrelay.RedriveRefusedError
		require.ErrorAs(t, err, &refused)
		assert.Equal(t, []string{"tenant_a", "tenant_b"}, refused.Tenants)
		assert.Contains(t, err.Error(), "tenant_a")
		assert.Contains(t, err.Error(), "tenant_b")
		assert.Equal(t, hookrelay.StateDead, e.get(a).State, "nothing moved")
		assert.Equal(t, hookrelay.StateDead, e.get(b).State, "nothing moved")
		assert.Empty(t, e.redrivenEvents())

		audit, err := e.redriveDriven(hookrelay.RedriveParams{Filter: hookrelay.DeadLetterFilter{TenantIDs: []string{"tenant_b"}}, Actor: "ops", Reason: "tenant b only", RatePerSecond: 5})
		require.NoError(t, err, "a single-tenant selection is allowed by default")
		assert.Equal(t, []string{"tenant_b"}, audit.Tenants)
		assert.Equal(t, hookrelay.StateDead, e.get(a).State)
		assert.Equal(t, hookrelay.StatePending, e.get(b).State)

		// With an Authorizer that lets one actor redrive across tenants.
		var asked []hookrelay.RedriveAuthorization
		authz := hookrelay.AuthorizerFunc(func(ctx context.Context, req hookrelay.RedriveAuthorization) error {
			asked = append(asked, req)
			if req.Actor == "sre-lead" {
				return nil
			}
			return hookrelay.SingleTenantOnly(ctx, req)
		})
		e2 := redriveEngine(t, e.h, nil, func(c *hookrelay.Config) { c.Authorizer = authz })
		e2.clock.Set(e.clock.Now())
		e2.rec.Script = e.rec.Script
		e2.run(b) // fails permanently again: both tenants have a dead delivery
		_, err = e2.client.Redrive(ctx, hookrelay.RedriveParams{Actor: "ops", Reason: "all", RatePerSecond: 5})
		require.ErrorIs(t, err, hookrelay.ErrRedriveRefused)
		audit, err = e2.redriveDriven(hookrelay.RedriveParams{Actor: "sre-lead", Reason: "incident 42", RatePerSecond: 5})
		require.NoError(t, err)
		assert.Equal(t, []string{"tenant_a", "tenant_b"}, audit.Tenants)
		assert.EqualValues(t, 2, audit.Redriven)
		require.Len(t, asked, 2)
		assert.True(t, asked[1].CrossTenant())
		assert.EqualValues(t, 2, asked[1].Plan.Total)
	})

	t.Run("OnlyTheAuthorizedTenantsMove", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		a, b := e.deadNowAndLater(t)
		calls := 0
		audit, err := e.redriveDriven(hookrelay.RedriveParams{
			Actor: "ops", Reason: "tenant a's only dead delivery", RatePerSecond: 5,
			Progress: func(hookrelay.RedriveAudit) {
				calls++
				if calls > 1 {
					return
				}
				// Tenant b's dead-letter commits only now, stamped before
				// the redrive's snapshot: the plan did not see it, so the
				// single-tenant authorization did not cover it.
				e.deadLetterLate(t, b)
			},
		})
		require.NoError(t, err)
		assert.Equal(t, []string{"tenant_a"}, audit.Tenants)
		assert.EqualValues(t, 1, audit.Redriven)
		assert.Equal(t, hookrelay.StatePending, e.get(a).State)
		assert.Equal(t, hookrelay.StateDead, e.get(b).State, "tenant b was never authorized")
	})

	t.Run("TheCallersAuthorizerDecidesOnTheTenantsThatMove", func(t *testing.T) {
		// The client permits cross-tenant redrives; the caller's own rule
		// (RedriveParams.Authorizer, the console's hook) allows tenant a.
		e := redriveEngine(t, newHarness(t), nil, func(c *hookrelay.Config) {
			c.Authorizer = hookrelay.AuthorizerFunc(func(context.Context, hookrelay.RedriveAuthorization) error { return nil })
		})
		a, b := e.deadNowAndLater(t)
		var asked []hookrelay.RedriveAuthorization
		onlyA := hookrelay.AuthorizerFunc(func(_ context.Context, req hookrelay.RedriveAuthorization) error {
			asked = append(asked, req)
			for _, tn := range req.Tenants {
				if tn != "tenant_a" {
					return errors.New("not your tenant")
				}
			}
			if len(asked) == 1 {
				// Tenant b's dead-letter commits right after the caller's
				// rule allowed tenant a, stamped before the snapshot.
				e.deadLetterLate(t, b)
			}
			return nil
		})
		audit, err := e.redriveDriven(hookrelay.RedriveParams{Filter: hookrelay.DeadLetterFilter{EventTypes: []string{"t"}}, Actor: "alice", Reason: "tenant a", RatePerSecond: 5, Authorizer: onlyA})
		require.NoError(t, err)
		require.Len(t, asked, 1)
		assert.Equal(t, []string{"tenant_a"}, asked[0].Tenants)
		assert.Equal(t, []string{"tenant_a"}, audit.Tenants)
		assert.EqualValues(t, 1, audit.Matched)
		assert.EqualValues(t, 1, audit.Redriven)
		assert.Equal(t, hookrelay.StatePending, e.get(a).State)
		assert.Equal(t, hookrelay.StateDead, e.get(b).State, "the caller's rule was never asked about tenant b")

		// Now spanning tenant b, the same rule refuses: nothing is written.
		e.run(a) // dies again
		before, err := e.client.RedriveAudits(ctx, 0)
		require.NoError(t, err)
		_, err = e.client.Redrive(ctx, hookrelay.RedriveParams{Filter: hookrelay.DeadLetterFilter{EventTypes: []string{"t"}}, Actor: "alice", Reason: "both", RatePerSecond: 5, Authorizer: onlyA})
		require.ErrorIs(t, err, hookrelay.ErrRedriveRefused)
		var refused *hookrelay.RedriveRefusedError
		require.ErrorAs(t, err, &refused)
		assert.Equal(t, []string{"tenant_a", "tenant_b"}, refused.Tenants)
		assert.EqualError(t, refused.Err, "not your tenant")
		after, err := e.client.RedriveAudits(ctx, 0)
		require.NoError(t, err)
		assert.Len(t, after, len(before), "a refused redrive writes no audit")
		assert.Equal(t, hookrelay.StateDead, e.get(a).State)
		assert.Equal(t, hookrelay.StateDead, e.get(b).State)
	})

	t.Run("ResumeIsAskedAboutTheTenantsItMoves", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		a, b := e.deadNowAndLater(t)
		calls := 0
		stopped, err := e.redriveDriven(hookrelay.RedriveParams{
			Actor: "ops", Reason: "tenant a's only dead delivery", RatePerSecond: 5,
			Progress: func(au hookrelay.RedriveAudit) {
				calls++
				if calls > 1 {
					return
				}
				// Stopped before it moves anything; then tenant b's
				// dead-letter commits, stamped before the snapshot: the
				// redrive was authorized for tenant a alone.
				_, err := e.client.StopRedrive(ctx, au.ID, "ops")
				require.NoError(t, err)
				e.deadLetterLate(t, b)
			},
		})
		require.NoError(t, err)
		require.Equal(t, hookrelay.RedriveStopped, stopped.State)
		require.Equal(t, []string{"tenant_a"}, stopped.Tenants)
		require.EqualValues(t, 0, stopped.Redriven)
		// The resume moves tenant a only, so the default rule (one tenant)
		// allows it: it is asked about what it moves, not about tenant b.
		resumed, err := e.resumeDriven(stopped.ID, "ops")
		require.NoError(t, err)
		assert.Equal(t, hookrelay.RedriveFinished, resumed.State)
		assert.EqualValues(t, 1, resumed.Redriven)
		assert.Equal(t, hookrelay.StatePending, e.get(a).State)
		assert.Equal(t, hookrelay.StateDead, e.get(b).State, "tenant b was never authorized")
	})

	t.Run("StopBetweenBatchesFromAnotherClientThenResume", func(t *testing.T) {
		h := newHarness(t)
		e := redriveEngine(t, h, nil)
		e.rec.Script = func(d hookrelay.Delivery, n int) RecipientAnswer {
			if d.DestinationID == "dest_1" && n == 1 {
				return Reject(hookrelay.Permanent(hookrelay.ReasonBadRequest))
			}
			return Accept()
		}
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_b", TenantID: "tenant_b", URL: "https://b.example/"}))
		var ids []string
		for i := range 10 {
			ids = append(ids, e.enqueue(fmt.Sprintf("evt_%d", i), "dest_1"))
		}
		e.step()
		// Another operator's process on the same store.
		other, err := hookrelay.New(hookrelay.Config{Queue: h.Queue, Ledger: h.Ledger, Destinations: h.Destinations, Clock: e.clock})
		require.NoError(t, err)
		var stopErr error
		var progress []hookrelay.RedriveAudit
		audit, err := e.redriveDriven(hookrelay.RedriveParams{
			Filter: hookrelay.DeadLetterFilter{TenantIDs: []string{"tenant_a"}},
			Actor:  "ops", Reason: "partial", RatePerSecond: 10, BatchSize: 3,
			Progress: func(a hookrelay.RedriveAudit) {
				progress = append(progress, a)
				if len(progress) == 2 { // after the first batch
					_, stopErr = other.StopRedrive(ctx, a.ID, "oncall")
				}
			},
		})
		require.NoError(t, err)
		require.NoError(t, stopErr)
		assert.Equal(t, hookrelay.RedriveStopped, audit.State, "stopped before the second batch")
		assert.EqualValues(t, 3, audit.Redriven, "the audit records how far it got")
		assert.EqualValues(t, 10, audit.Matched)
		assert.Equal(t, "oncall", audit.StopRequestedBy)
		assert.NotEmpty(t, audit.LastDeliveryID)
		dead := 0
		for _, id := range ids {
			if e.get(id).State == hookrelay.StateDead {
				dead++
			}
		}
		assert.Equal(t, 7, dead)

		// Other tenants' work is untouched by the stop.
		bID := e.enqueueFor("evt_b", "tenant_b", "dest_b", "t")
		assert.Equal(t, hookrelay.StateDelivered, e.run(bID).State)

		status, err := other.RedriveStatus(ctx, audit.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.RedriveStopped, status.State)

		resumed, err := e.resumeDriven(audit.ID, "oncall")
		require.NoError(t, err)
		assert.Equal(t, hookrelay.RedriveFinished, resumed.State)
		assert.EqualValues(t, 10, resumed.Redriven)
		assert.False(t, resumed.StopRequested)
		status, err = other.RedriveStatus(ctx, audit.ID)
		require.NoError(t, err)
		assert.Equal(t, "oncall", status.ResumedBy, "the audit records who resumed it")
		assert.Equal(t, "ops", status.Actor, "and still who started it")
		assert.Len(t, e.redrivenEvents(), 10, "the three moved before the stop were not moved again")
		for _, id := range ids {
			assert.NotEqual(t, hookrelay.StateDead, e.get(id).State)
		}
		_, err = e.client.ResumeRedrive(ctx, audit.ID, "oncall", nil)
		assert.ErrorIs(t, err, hookrelay.ErrInvalidState, "a finished redrive cannot be resumed")
		_, err = other.StopRedrive(ctx, audit.ID, "oncall")
		assert.ErrorIs(t, err, hookrelay.ErrInvalidState, "nor stopped")
	})

	t.Run("ResumeIsAuthorizedForWhoResumesIt", func(t *testing.T) {
		// The Authorizer decides on the operator resuming a redrive, not
		// on the one who started it: one who may not redrive tenant_a's
		// deliveries cannot move them by resuming another's redrive.
		var asked []string
		authz := hookrelay.AuthorizerFunc(func(_ context.Context, req hookrelay.RedriveAuthorization) error {
			asked = append(asked, req.Actor)
			if req.Actor != "ops" && req.Actor != "oncall" {
				return errors.New(req.Actor + " may not redrive tenant_a")
			}
			return nil
		})
		e := redriveEngine(t, newHarness(t), nil, func(c *hookrelay.Config) { c.Authorizer = authz })
		e.rec.Script = failTimes(1, hookrelay.Permanent(hookrelay.ReasonBadRequest))
		id := e.enqueue("evt_1", "dest_1")
		e.step()
		e.clock.Add(time.Minute)
		audit, err := e.redriveDriven(hookrelay.RedriveParams{
			Filter: hookrelay.DeadLetterFilter{TenantIDs: []string{"tenant_a"}}, Actor: "ops", Reason: "r", RatePerSecond: 10,
			Progress: func(a hookrelay.RedriveAudit) {
				if a.Redriven == 0 {
					_, err := e.client.StopRedrive(ctx, a.ID, "ops")
					require.NoError(t, err)
				}
			},
		})
		require.NoError(t, err)
		require.Equal(t, hookrelay.RedriveStopped, audit.State)
		require.Equal(t, hookrelay.StateDead, e.get(id).State)

		_, err = e.client.ResumeRedrive(ctx, audit.ID, " ", nil)
		var ve *hookrelay.ValidationError
		require.ErrorAs(t, err, &ve, "a blank actor is refused")
		assert.Equal(t, "actor", ve.Field)
		_, err = e.client.ResumeRedrive(ctx, audit.ID, "intruder", nil)
		require.ErrorContains(t, err, "intruder may not redrive tenant_a")
		assert.Equal(t, "intruder", asked[len(asked)-1], "the Authorizer is asked about who resumes")
		assert.Equal(t, hookrelay.StateDead, e.get(id).State, "a refused resume moves nothing")
		got, err := e.client.RedriveStatus(ctx, audit.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.RedriveStopped, got.State)
		assert.Empty(t, got.ResumedBy)

		resumed, err := e.resumeDriven(audit.ID, "oncall")
		require.NoError(t, err)
		assert.Equal(t, hookrelay.RedriveFinished, resumed.State)
		assert.Equal(t, "oncall", resumed.ResumedBy)
		assert.NotEqual(t, hookrelay.StateDead, e.get(id).State)
		got, err = e.client.RedriveStatus(ctx, audit.ID)
		require.NoError(t, err)
		assert.Equal(t, "oncall", got.ResumedBy, "the audit records who resumed it")
	})

	t.Run("StopTakesEffectWithinOneSlotAtALowRate", func(t *testing.T) {
		h := newHarness(t)
		e := redriveEngine(t, h, nil)
		e.rec.Script = failTimes(1, hookrelay.Permanent(hookrelay.ReasonBadRequest))
		for i := range 5 {
			e.enqueue(fmt.Sprintf("evt_%d", i), "dest_1")
		}
		e.step()
		other, err := hookrelay.New(hookrelay.Config{Queue: h.Queue, Ledger: h.Ledger, Destinations: h.Destinations, Clock: e.clock})
		require.NoError(t, err)
		ids, res := startSlowRedrive(ctx, e.client) // one batch of five, ten seconds apart
		id := <-ids
		require.Eventually(t, func() bool { return len(e.redrivenEvents()) == 1 }, 20*time.Second, time.Millisecond)
		_, err = other.StopRedrive(ctx, id, "oncall")
		require.NoError(t, err)
		var r redriveResult
		require.Eventually(t, func() bool {
			select {
			case r = <-res:
				return true
			default:
				e.clock.Add(time.Second)
				return false
			}
		}, 20*time.Second, time.Millisecond)
		require.NoError(t, r.err)
		assert.Equal(t, hookrelay.RedriveStopped, r.a.State)
		assert.LessOrEqual(t, r.a.Redriven, int64(2), "the stop was honoured at the next slot, not after the whole batch")
		assert.Len(t, e.redrivenEvents(), int(r.a.Redriven))
	})

	// An operator stops a slow redrive and resumes it before its process
	// reached its next slot, where it would have seen the stop: the resume
	// clears the stop, so that process must see that a later run took the
	// redrive over and end, not go on beside it (two runs over one
	// selection, each at the full rate, counting the other's moves as
	// skipped).
	t.Run("AResumeBeforeTheStopIsSeenLeavesOneRun", func(t *testing.T) {
		h := newHarness(t)
		e := redriveEngine(t, h, nil)
		e.rec.Script = failTimes(1, hookrelay.Permanent(hookrelay.ReasonBadRequest))
		for i := range 4 {
			e.enqueue(fmt.Sprintf("evt_%d", i), "dest_1")
		}
		e.step()
		other, err := hookrelay.New(hookrelay.Config{Queue: h.Queue, Ledger: h.Ledger, Destinations: h.Destinations, Clock: e.clock})
		require.NoError(t, err)
		ids, first := startSlowRedrive(ctx, e.client) // ten seconds apart
		resumed := make(chan redriveResult, 1)
		id := <-ids
		require.Eventually(t, func() bool { return len(e.redrivenEvents()) == 1 }, 20*time.Second, time.Millisecond)
		// The first run now sleeps until its next slot, ten seconds on.
		_, err = other.StopRedrive(ctx, id, "oncall")
		require.NoError(t, err)
		go func() {
			a, err := other.ResumeRedrive(ctx, id, "oncall", nil)
			resumed <- redriveResult{a, err}
		}()
		// The clock stands still until the resume has cleared the stop:
		// moved on before, the first run could see the stop and end, and
		// the case would not test a resume that came first.
		require.Eventually(t, func() bool {
			a, err := other.RedriveStatus(ctx, id)
			require.NoError(t, err)
			return a.ResumedBy == "oncall" && a.StopRequestedBy == ""
		}, 20*time.Second, time.Millisecond, "the resume clears the stop")
		var r1, r2 redriveResult
		got1, got2 := false, false
		require.Eventually(t, func() bool {
			select {
			case r1 = <-first:
				got1 = true
			case r2 = <-resumed:
				got2 = true
			default:
				e.clock.Add(time.Second)
			}
			return got1 && got2
		}, 30*time.Second, time.Millisecond)
		require.NoError(t, r1.err)
		require.NoError(t, r2.err)
		assert.Equal(t, hookrelay.RedriveFinished, r2.a.State)
		status, err := other.RedriveStatus(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.RedriveFinished, status.State)
		assert.EqualValues(t, 4, status.Matched)
		assert.EqualValues(t, 4, status.Redriven, "every move is counted once")
		assert.EqualValues(t, 0, status.Skipped, "nothing else moved them: no run counted another run's moves")
		dead, err := e.client.PlanRedrive(ctx, hookrelay.DeadLetterFilter{})
		require.NoError(t, err)
		assert.Zero(t, dead.Total, "every delivery moved")
	})

	t.Run("CancelledContextLeavesItStoppedAndResumable", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		e.rec.Script = failTimes(1, hookrelay.Permanent(hookrelay.ReasonBadRequest))
		for i := range 3 {
			e.enqueue(fmt.Sprintf("evt_%d", i), "dest_1")
		}
		e.step()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type result struct {
			a   hookrelay.RedriveAudit
			err error
		}
		res := make(chan result, 1)
		go func() {
			a, err := e.client.Redrive(cctx, hookrelay.RedriveParams{Actor: "ops", Reason: "r", RatePerSecond: 1})
			res <- result{a, err}
		}()
		// The first delivery moves at once; the second waits for a second
		// of mock time that never passes, and the caller gives up.
		require.Eventually(t, func() bool { return len(e.redrivenEvents()) == 1 }, 20*time.Second, time.Millisecond)
		cancel()
		r := <-res
		assert.ErrorIs(t, r.err, context.Canceled)
		assert.Equal(t, hookrelay.RedriveStopped, r.a.State)
		assert.EqualValues(t, 1, r.a.Redriven, "the audit records how far it got")
		assert.Contains(t, r.a.Error, "interrupted")

		resumed, err := e.resumeDriven(r.a.ID, "ops")
		require.NoError(t, err)
		assert.Equal(t, hookrelay.RedriveFinished, resumed.State)
		assert.EqualValues(t, 3, resumed.Redriven)
		assert.Len(t, e.redrivenEvents(), 3)
	})

	t.Run("AuditRecordsWhoWhenWhatAndCounts", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		e.rec.Script = failTimes(1, hookrelay.Permanent(hookrelay.ReasonBadRequest))
		id := e.enqueue("evt_1", "dest_1")
		e.step()
		e.clock.Add(time.Minute)
		sel := hookrelay.DeadLetterFilter{TenantIDs: []string{"tenant_a"}, Reasons: []string{hookrelay.ReasonBadRequest}}
		audit, err := e.redriveDriven(hookrelay.RedriveParams{Filter: sel, Actor: "ops@example", Reason: "payload schema fixed at recipient", RatePerSecond: 3})
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(audit.ID, "rdv_"), "the audit has its own ID kind")
		assert.NotEqual(t, id, audit.ID)
		got, err := e.client.RedriveStatus(ctx, audit.ID)
		require.NoError(t, err)
		assert.Equal(t, "ops@example", got.Actor)
		assert.Equal(t, "payload schema fixed at recipient", got.Reason)
		assert.Equal(t, sel.TenantIDs, got.Filter.TenantIDs)
		assert.Equal(t, sel.Reasons, got.Filter.Reasons)
		assert.InDelta(t, 3.0, got.RatePerSecond, 1e-9)
		assert.False(t, got.CreatedAt.Before(base.Add(time.Minute)), "when it started, from the client's clock")
		assert.EqualValues(t, 1, got.Matched)
		assert.EqualValues(t, 1, got.Redriven)
		assert.Equal(t, id, got.LastDeliveryID)
		assert.Equal(t, hookrelay.RedriveFinished, got.State)
		_, err = e.client.RedriveStatus(ctx, "rdv_unknown")
		assert.ErrorIs(t, err, hookrelay.ErrRedriveNotFound)
	})

	t.Run("AnAuditSpanningThousandsOfTenantsIsKeptWhole", func(t *testing.T) {
		// An operator's redrive across every tenant of a large
		// installation: its audit entry (what starts the redrive) must be
		// stored whole, and its free text kept as StorableText makes it.
		h := newHarness(t)
		log, ok := h.Ledger.(hookrelay.RedriveAuditLog)
		if !ok {
			t.Skip("the Ledger does not implement hookrelay.RedriveAuditLog")
		}
		tenants := make([]string, 4000)
		for i := range tenants {
			tenants[i] = fmt.Sprintf("tenant_%04d_%s", i, strings.Repeat("x", 24)) // 4000 × 36 bytes: over 64 KiB as JSON
		}
		actor, reason := strings.Repeat("é", hookrelay.MaxStoredTextBytes), "bad\xff\x00"+strings.Repeat("a", hookrelay.MaxStoredTextBytes)
		a := hookrelay.RedriveAudit{
			ID: "rdv_wide", Actor: actor, Reason: reason, Filter: hookrelay.DeadLetterFilter{TenantIDs: tenants},
			Tenants: tenants, RatePerSecond: 1, State: hookrelay.RedriveRunning, CreatedAt: base, UpdatedAt: base,
		}
		require.NoError(t, log.CreateRedriveAudit(ctx, a), "an audit spanning thousands of tenants must be stored, or the redrive cannot start")
		failure := strings.Repeat("世", hookrelay.MaxStoredTextBytes)
		_, err := log.UpdateRedriveAudit(ctx, hookrelay.RedriveAuditUpdate{ID: a.ID, Now: base.Add(time.Second), State: hookrelay.RedriveFailed, Error: failure, StopRequestedBy: actor})
		require.NoError(t, err, "a long error must not keep the redrive from being marked failed")
		got, err := log.RedriveAudit(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, tenants, got.Tenants)
		assert.Equal(t, tenants, got.Filter.TenantIDs)
		assert.Equal(t, hookrelay.RedriveFailed, got.State)
		for _, f := range []struct{ name, got, wrote string }{
			{"Actor", got.Actor, actor}, {"Reason", got.Reason, reason}, {"Error", got.Error, failure}, {"StopRequestedBy", got.StopRequestedBy, actor},
		} {
			assert.True(t, f.got == hookrelay.StorableText(f.wrote), "%s is StorableText of what was written (%d bytes stored, %d expected)",
				f.name, len(f.got), len(hookrelay.StorableText(f.wrote)))
		}
	})

	t.Run("RedriveValidatesItsParams", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		for _, tc := range []struct {
			field string
			p     hookrelay.RedriveParams
		}{
			{"Actor", hookrelay.RedriveParams{Reason: "r", RatePerSecond: 1}},
			{"Reason", hookrelay.RedriveParams{Actor: "a", RatePerSecond: 1}},
			{"RatePerSecond", hookrelay.RedriveParams{Actor: "a", Reason: "r"}},
			{"RatePerSecond", hookrelay.RedriveParams{Actor: "a", Reason: "r", RatePerSecond: -1}},
			{"BatchSize", hookrelay.RedriveParams{Actor: "a", Reason: "r", RatePerSecond: 1, BatchSize: -1}},
		} {
			_, err := e.client.Redrive(ctx, tc.p)
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve, tc.field)
			assert.Equal(t, tc.field, ve.Field)
			assert.ErrorIs(t, err, hookrelay.ErrInvalidRequest)
		}
	})

	t.Run("ListDeadFiltersAndPagesStably", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_b", TenantID: "tenant_b", URL: "https://b.example/"}))
		e.rec.Script = func(d hookrelay.Delivery, _ int) RecipientAnswer {
			if d.EventType == "shipment.delivered" {
				return Reject(hookrelay.Permanent(hookrelay.ReasonUnprocessable))
			}
			return Reject(hookrelay.Permanent(hookrelay.ReasonBadRequest))
		}
		type made struct {
			id     string
			deadAt time.Time
		}
		var all []made
		for i := range 7 {
			tenant, dest, typ := "tenant_a", "dest_1", "lease.payment_recorded"
			if i%2 == 1 {
				tenant, dest = "tenant_b", "dest_b"
			}
			if i%3 == 2 {
				typ = "shipment.delivered"
			}
			id := e.enqueueFor(fmt.Sprintf("evt_%d", i), tenant, dest, typ)
			e.step()
			all = append(all, made{id, e.clock.Now()})
			e.clock.Add(time.Minute)
		}
		delivered := e.enqueue("evt_ok", "dest_1")
		e.rec.Script = nil
		e.run(delivered)

		list := func(f hookrelay.DeadLetterFilter) []string {
			t.Helper()
			page, err := e.client.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: f, Limit: 100})
			require.NoError(t, err)
			assert.Empty(t, page.Next)
			var ids []string
			for _, d := range page.Deliveries {
				assert.Equal(t, hookrelay.StateDead, d.State)
				ids = append(ids, d.ID)
			}
			return ids
		}
		pick := func(idx ...int) []string {
			var out []string
			for _, i := range idx {
				out = append(out, all[i].id)
			}
			return out
		}
		assert.Equal(t, pick(0, 1, 2, 3, 4, 5, 6), list(hookrelay.DeadLetterFilter{}), "oldest first, delivered excluded")
		assert.Equal(t, pick(1, 3, 5), list(hookrelay.DeadLetterFilter{TenantIDs: []string{"tenant_b"}}))
		assert.Equal(t, pick(0, 2, 4, 6), list(hookrelay.DeadLetterFilter{DestinationIDs: []string{"dest_1"}}))
		assert.Equal(t, pick(2, 5), list(hookrelay.DeadLetterFilter{EventTypes: []string{"shipment.delivered"}}))
		assert.Equal(t, pick(2, 5), list(hookrelay.DeadLetterFilter{Reasons: []string{hookrelay.ReasonUnprocessable}}))
		assert.Equal(t, pick(2, 3, 4), list(hookrelay.DeadLetterFilter{DeadSince: all[2].deadAt, DeadBefore: all[5].deadAt}))
		assert.Equal(t, pick(4, 6), list(hookrelay.DeadLetterFilter{TenantIDs: []string{"tenant_a", "tenant_x"}, EventTypes: []string{"lease.payment_recorded"}, DeadSince: all[3].deadAt}))

		plan, err := e.client.PlanRedrive(ctx, hookrelay.DeadLetterFilter{})
		require.NoError(t, err)
		assert.Equal(t, []hookrelay.PlanRow{
			{TenantID: "tenant_a", DestinationID: "dest_1", Reason: hookrelay.ReasonBadRequest, Count: 3},
			{TenantID: "tenant_a", DestinationID: "dest_1", Reason: hookrelay.ReasonUnprocessable, Count: 1},
			{TenantID: "tenant_b", DestinationID: "dest_b", Reason: hookrelay.ReasonBadRequest, Count: 2},
			{TenantID: "tenant_b", DestinationID: "dest_b", Reason: hookrelay.ReasonUnprocessable, Count: 1},
		}, plan.Rows)
		assert.EqualValues(t, 7, plan.Total)
		assert.Equal(t, []string{"tenant_a", "tenant_b"}, plan.Tenants)

		// Page by two; a delivery redriven between pages neither shifts
		// nor repeats the rest.
		dl, _ := hookrelay.As[hookrelay.DeadLetterLedger](e.h.Ledger)
		var got []string
		cursor := ""
		for range 10 {
			page, err := e.client.DeadLetters(ctx, hookrelay.DeadLettersParams{Limit: 2, Cursor: cursor})
			require.NoError(t, err)
			for _, d := range page.Deliveries {
				got = append(got, d.ID)
			}
			if len(got) == 2 {
				_, moved, err := dl.RedriveDelivery(ctx, hookrelay.RedriveDeliveryParams{ID: all[0].id, AuditID: "rdv_test", Now: e.clock.Now()})
				require.NoError(t, err)
				require.True(t, moved)
			}
			if page.Next == "" {
				break
			}
			cursor = page.Next
		}
		assert.Equal(t, pick(0, 1, 2, 3, 4, 5, 6), got)

		_, err = e.client.DeadLetters(ctx, hookrelay.DeadLettersParams{Cursor: "not-a-cursor"})
		assert.ErrorIs(t, err, hookrelay.ErrInvalidRequest)
	})

	t.Run("PauseDestinationHoldsItsDeliveriesOnly", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_2", TenantID: "tenant_a", URL: "https://other.example/"}))
		require.NoError(t, e.client.PauseDestination(ctx, "dest_1"))
		held := e.enqueue("evt_1", "dest_1")
		flowing := e.enqueue("evt_2", "dest_2")
		for range 3 {
			e.step()
			e.clock.Add(10 * time.Second)
		}
		assert.Empty(t, e.rec.RequestsFor(held))
		d := e.get(held)
		assert.Equal(t, hookrelay.StatePending, d.State)
		assert.Equal(t, 1, d.Attempt, "a paused destination spends no attempts")
		assert.Equal(t, hookrelay.StateDelivered, e.get(flowing).State)
		require.NoError(t, e.client.ResumeDestination(ctx, "dest_1"))
		assert.Equal(t, hookrelay.StateDelivered, e.run(held).State)
		for kind, want := range map[hookrelay.EventName]int{hookrelay.EventDestinationPaused: 1, hookrelay.EventDestinationResumed: 1} {
			evs := e.events.of(kind)
			if assert.Len(t, evs, want, "observers hear of %s", kind) {
				assert.Equal(t, "dest_1", evs[0].Delivery.DestinationID)
			}
		}
		assert.ErrorIs(t, e.client.PauseDestination(ctx, "dest_missing"), hookrelay.ErrDestinationNotFound)
	})

	t.Run("EnableReEnablesAGoneDestination", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		if _, ok := e.h.Destinations.(hookrelay.DestinationEnabler); !ok {
			t.Skip("the Destinations port does not implement hookrelay.DestinationEnabler (an optional ability)")
		}
		gone := true
		e.rec.Script = func(hookrelay.Delivery, int) RecipientAnswer {
			if gone {
				return Reject(hookrelay.ClassifyStatus(410, 0))
			}
			return Accept()
		}
		first := e.enqueue("evt_1", "dest_1")
		e.step()
		require.Equal(t, hookrelay.ReasonDestinationGone, e.get(first).LastReason)
		st, err := e.client.DestinationStatus(ctx, "dest_1")
		require.NoError(t, err)
		require.True(t, st.Disabled)
		waiting := e.enqueue("evt_2", "dest_1")
		e.step()
		assert.Empty(t, e.rec.RequestsFor(waiting), "nothing is sent while disabled")

		gone = false
		require.NoError(t, e.client.EnableDestination(ctx, "dest_1"))
		require.NoError(t, e.client.EnableDestination(ctx, "dest_1"), "enabling an enabled destination is a no-op")
		st, err = e.client.DestinationStatus(ctx, "dest_1")
		require.NoError(t, err)
		assert.False(t, st.Disabled)
		assert.Empty(t, st.DisabledReason)
		e.clock.Add(time.Minute)
		assert.Equal(t, hookrelay.StateDelivered, e.run(waiting).State, "its waiting delivery goes out")
		assert.Len(t, e.events.of(hookrelay.EventDestinationEnabled), 2)
		assert.ErrorIs(t, e.client.EnableDestination(ctx, "dest_missing"), hookrelay.ErrDestinationNotFound)
	})

	t.Run("DestinationsListStatusesOnly", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		if _, ok := e.h.Destinations.(hookrelay.DestinationLister); !ok {
			t.Skip("the Destinations port does not implement hookrelay.DestinationLister (an optional ability)")
		}
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_0", TenantID: "tenant_b", URL: "https://user:pw@b.example/", Secrets: []string{newSecret}}))
		require.NoError(t, e.client.PauseDestination(ctx, "dest_0"))
		require.NoError(t, e.h.Destinations.Disable(ctx, hookrelay.DisableParams{ID: "dest_1", Reason: hookrelay.ReasonDestinationGone, Now: e.clock.Now()}))
		got, err := e.client.Destinations(ctx)
		require.NoError(t, err)
		assert.Equal(t, []hookrelay.DestinationStatus{
			{ID: "dest_0", TenantID: "tenant_b", Paused: true},
			{ID: "dest_1", TenantID: "tenant_a", Disabled: true, DisabledReason: hookrelay.ReasonDestinationGone},
		}, got, "ordered by ID, with no URL or secret")
	})

	t.Run("AuditLogListsNewestFirst", func(t *testing.T) {
		e := redriveEngine(t, newHarness(t), nil)
		if _, ok := e.h.Ledger.(hookrelay.RedriveAuditLister); !ok {
			t.Skip("the Ledger does not implement hookrelay.RedriveAuditLister (an optional ability)")
		}
		e.rec.Script = failTimes(1, hookrelay.Permanent(hookrelay.ReasonBadRequest))
		var made []string
		for i := range 3 {
			e.enqueue(fmt.Sprintf("evt_%d", i), "dest_1")
			e.step()
			a, err := e.redriveDriven(hookrelay.RedriveParams{Actor: fmt.Sprintf("op%d", i), Reason: "r", RatePerSecond: 10})
			require.NoError(t, err)
			made = append(made, a.ID)
			e.clock.Add(time.Minute)
		}
		got, err := e.client.RedriveAudits(ctx, 2)
		require.NoError(t, err)
		require.Len(t, got, 2)
		assert.Equal(t, []string{made[2], made[1]}, []string{got[0].ID, got[1].ID}, "newest first, limited")
		assert.Equal(t, "op2", got[0].Actor)
		assert.Equal(t, hookrelay.RedriveFinished, got[0].State)
		all, err := e.client.RedriveAudits(ctx, 0)
		require.NoError(t, err)
		assert.Len(t, all, 3)
	})

	t.Run("ErrorsWhenTheLedgerLacksTheAbility", func(t *testing.T) {
		e := newEngine(t, newHarness(t)) // its ledger wrapper hides optional abilities
		_, err := e.client.PlanRedrive(ctx, hookrelay.DeadLetterFilter{})
		assert.True(t, errors.Is(err, hookrelay.ErrUnsupported))
		_, err = e.client.Redrive(ctx, hookrelay.RedriveParams{Actor: "a", Reason: "r", RatePerSecond: 1})
		assert.ErrorIs(t, err, hookrelay.ErrUnsupported)
	})
}

// redriveResult is what a Redrive run in a goroutine returned.
type redriveResult struct {
	a   hookrelay.RedriveAudit
	err error
}

// startSlowRedrive starts a redrive of every dead letter on c at 0.1 per
// second (ten seconds apart) in a goroutine: ids gets its audit ID at its
// first progress report, res what Redrive returned.
func startSlowRedrive(ctx context.Context, c *hookrelay.Client) (<-chan string, <-chan redriveResult) {
	ids := make(chan string, 1)
	res := make(chan redriveResult, 1)
	go func() {
		a, err := c.Redrive(ctx, hookrelay.RedriveParams{
			Actor: "ops", Reason: "slow", RatePerSecond: 0.1,
			Progress: func(a hookrelay.RedriveAudit) {
				select {
				case ids <- a.ID:
				default:
				}
			},
		})
		res <- redriveResult{a, err}
	}()
	return ids, res
}
