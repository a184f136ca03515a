package hookrelaytest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// RunStats runs the hookrelay.LedgerStats contract tests. It skips when the
// harness's Ledger does not implement hookrelay.LedgerStats (an optional
// ability).
//
// The scenario builds, through the Ledger and Queue ports only, deliveries
// in every situation the counts distinguish: due and not due, under a live
// lease and under an expired one, retried, delivered, and dead-lettered at
// two different times; then it checks counts and ages at two moments.
func RunStats(t *testing.T, newHarness NewHarness) {
	t.Run("EmptyLedgerReportsNoDestination", func(t *testing.T) {
		h := newHarness(t)
		stats := ledgerStats(t, h)
		got, err := stats.Stats(context.Background(), hookrelay.StatsParams{Now: statsT0})
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		for _, s := range got {
			if s != (hookrelay.DestinationStats{DestinationID: s.DestinationID}) {
				t.Errorf("empty ledger reported %+v", s)
			}
		}
	})
	t.Run("RecentOutcomesAgreeWithTheAttemptHistory", func(t *testing.T) {
		h := newHarness(t)
		as, ok := h.Ledger.(hookrelay.AttemptStats)
		if !ok {
			t.Skip("the Ledger does not implement hookrelay.AttemptStats (an optional ability)")
		}
		e := newEngine(t, h)
		for _, id := range []string{"dest_2", "dest_3"} {
			require.NoError(t, h.Destinations.Put(context.Background(), hookrelay.Destination{ID: id, TenantID: "tenant_a", URL: "https://" + id + ".example/"}))
		}
		e.rec.Script = func(d hookrelay.Delivery, n int) RecipientAnswer {
			switch {
			case d.DestinationID == "dest_2":
				return Reject(hookrelay.Permanent(hookrelay.ReasonBadRequest))
			case d.DestinationID == "dest_1" && n <= 2:
				return Reject(hookrelay.Retryable(hookrelay.ReasonServerError))
			}
			return Accept()
		}
		old := e.enqueue("evt_old", "dest_2")
		e.step()
		oldDelivered := e.enqueue("evt_old_delivered", "dest_3")
		e.run(oldDelivered)
		require.Equal(t, hookrelay.StateDelivered, e.get(oldDelivered).State)
		e.clock.Add(time.Hour)
		since := e.clock.Now()
		ids := []string{e.enqueue("evt_1", "dest_1"), e.enqueue("evt_2", "dest_2")}
		for _, id := range ids {
			e.run(id)
		}
		want := map[hookrelay.OutcomeCount]int64{}
		for _, id := range ids {
			d := e.get(id)
			for _, a := range e.attempts(id) {
				want[hookrelay.OutcomeCount{DestinationID: d.DestinationID, Kind: a.Kind, Reason: a.Reason}]++
			}
		}
		got, err := as.RecentOutcomes(context.Background(), hookrelay.RecentOutcomesParams{Since: since})
		require.NoError(t, err)
		gotMap := map[hookrelay.OutcomeCount]int64{}
		for _, c := range got {
			n := c.Count
			c.Count = 0
			gotMap[c] = n
		}
		assert.Equal(t, want, gotMap, "one count per destination, kind and reason; the attempt before Since is left out")
		assert.True(t, slices.IsSortedFunc(got, hookrelay.CompareOutcomeCounts), "ordered by destination, kind, reason")
		assert.EqualValues(t, 2, gotMap[hookrelay.OutcomeCount{DestinationID: "dest_1", Kind: hookrelay.KindRetryable, Reason: hookrelay.ReasonServerError}])
		all, err := as.RecentOutcomes(context.Background(), hookrelay.RecentOutcomesParams{Since: since.Add(-2 * time.Hour)})
		require.NoError(t, err)
		var n int64
		for _, c := range all {
			if c.DestinationID == "dest_2" && c.Kind == hookrelay.KindPermanent {
				n += c.Count
			}
		}
		assert.EqualValues(t, 2, n, "a wider window counts %s too", old)
		n = 0
		for _, c := range all {
			if c.DestinationID == "dest_3" && c.Kind == hookrelay.KindDelivered {
				n += c.Count
			}
		}
		assert.EqualValues(t, 1, n, "and the delivered %s", oldDelivered)
	})
	t.Run("CountsAndAgesPerDestination", func(t *testing.T) {
		h := newHarness(t)
		stats := ledgerStats(t, h)
		buildStatsScenario(t, h)

		got := statsByDestination(t, stats, statsT0)
		wantStats(t, got, "a", hookrelay.DestinationStats{
			// leased, old, new, at-now and future; the delivered one is not
			// pending.
			Pending:     5,
			EligibleNow: 3, // old, new and the one due exactly at Now
			// From the oldest eligible NextAttemptAt (T0−30s); the leased
			// delivery is older but not eligible.
			OldestEligibleAge: 30 * time.Second,
		})
		wantStats(t, got, "b", hookrelay.DestinationStats{
			Dead:          2,
			OldestDeadAge: 4 * time.Minute, // dead-lettered at T0−4m, not enqueued at T0−5m
		})
		wantStats(t, got, "c", hookrelay.DestinationStats{
			Pending:     1,
			EligibleNow: 1,
			// From the retry's NextAttemptAt (T0−5s), not from the first
			// enqueue (T0−50s).
			OldestEligibleAge: 5 * time.Second,
		})
		d, ok := got["d"]
		if !ok || d.Pending != 1 || d.EligibleNow != 1 {
			t.Errorf(`destination "d" (one delivery whose lease expired at T0−30s): got %+v, want Pending 1, EligibleNow 1`, d)
		}
		// Due again since its lease expired; its age runs from NextAttemptAt
		// (T0−40s) unless the adapter moves NextAttemptAt on claim (then from
		// T0−30s at the latest).
		if d.OldestEligibleAge < 30*time.Second || d.OldestEligibleAge > 40*time.Second {
			t.Errorf(`destination "d": OldestEligibleAge %v, want between 30s and 40s`, d.OldestEligibleAge)
		}
		wantAbsentOrZero(t, got, "f") // only a delivered delivery
	})
	t.Run("AgesAndEligibilityFollowNow", func(t *testing.T) {
		h := newHarness(t)
		stats := ledgerStats(t, h)
		buildStatsScenario(t, h)

		later := statsT0.Add(time.Minute)
		got := statsByDestination(t, stats, later)
		wantStats(t, got, "a", hookrelay.DestinationStats{
			Pending:           5,
			EligibleNow:       4, // the future one is due at T0+1m; the lease runs to T0+8m30s
			OldestEligibleAge: 90 * time.Second,
		})
		wantStats(t, got, "b", hookrelay.DestinationStats{Dead: 2, OldestDeadAge: 5 * time.Minute})
		wantStats(t, got, "c", hookrelay.DestinationStats{Pending: 1, EligibleNow: 1, OldestEligibleAge: 65 * time.Second})
	})
	t.Run("ADeadLetterTimeAfterNowIsAgeZero", func(t *testing.T) {
		h := newHarness(t)
		stats := ledgerStats(t, h)
		// Dead-lettered at T0 by a worker whose clock runs ahead of the
		// caller's, which asks at T0−1m.
		statsCreate(t, h, statsDelivery("skewed-dead", "skewed", statsT0))
		statsDeadLetter(t, h, statsClaim(t, h, statsT0, time.Minute, 1)[0], statsT0)
		got := statsByDestination(t, stats, statsT0.Add(-time.Minute))
		wantStats(t, got, "skewed", hookrelay.DestinationStats{Dead: 1})
	})
	t.Run("OrderedByDestinationID", func(t *testing.T) {
		h := newHarness(t)
		stats := ledgerStats(t, h)
		for _, dest := range []string{"zeta", "alpha", "mu"} {
			statsCreate(t, h, statsDelivery("evt-"+dest, dest, statsT0.Add(-time.Second)))
		}
		list, err := stats.Stats(context.Background(), hookrelay.StatsParams{Now: statsT0})
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		var ids []string
		for _, s := range list {
			ids = append(ids, s.DestinationID)
		}
		if !slices.IsSorted(ids) || !slices.Contains(ids, "alpha") || !slices.Contains(ids, "mu") || !slices.Contains(ids, "zeta") {
			t.Errorf("destinations %q, want alpha, mu and zeta in order", ids)
		}
	})
}

// statsT0 is the moment the scenario is observed, at whole milliseconds so
// that every adapter stores it exactly.
var statsT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ledgerStats(t *testing.T, h Harness) hookrelay.LedgerStats {
	t.Helper()
	s, ok := hookrelay.As[hookrelay.LedgerStats](h.Ledger)
	if !ok {
		t.Skipf("the Ledger (%T) does not implement hookrelay.LedgerStats", h.Ledger)
	}
	return s
}

// buildStatsScenario leaves, as seen at statsT0:
//
//	a: delivered (T0−5m, not counted); leased until T0+8m30s (due T0−90s);
//	   due T0−30s; due T0−10s; due exactly T0; due T0+1m
//	b: dead-lettered at T0−4m and at T0−2m
//	c: first enqueued T0−50s, failed, retry due T0−5s
//	d: due T0−40s, claimed with a lease that expired at T0−30s
//	f: delivered only
//
// Claims take the oldest due delivery first, so each delivery that must be
// claimed is created just before its claim, and the unclaimed ones last.
func buildStatsScenario(t *testing.T, h Harness) {
	t.Helper()
	at := func(d time.Duration) time.Time { return statsT0.Add(d) }

	// T0−5m: one delivered to a, one to f, one dead-lettered to b at T0−4m.
	aDone := statsDelivery("a-done", "a", at(-5*time.Minute))
	fDone := statsDelivery("f-done", "f", at(-5*time.Minute))
	bDead1 := statsDelivery("b-dead-1", "b", at(-5*time.Minute))
	statsCreate(t, h, aDone, fDone, bDead1)
	claims := statsClaim(t, h, at(-5*time.Minute), time.Minute, 3)
	for _, c := range claims {
		switch c.Delivery.ID {
		case aDone.ID, fDone.ID:
			statsDeliver(t, h, c, at(-5*time.Minute))
		case bDead1.ID:
			statsDeadLetter(t, h, c, at(-4*time.Minute))
		}
	}

	// T0−3m: a second dead-letter to b, at T0−2m.
	statsCreate(t, h, statsDelivery("b-dead-2", "b", at(-3*time.Minute)))
	statsDeadLetter(t, h, statsClaim(t, h, at(-3*time.Minute), time.Minute, 1)[0], at(-2*time.Minute))

	// T0−90s: a claim of a whose lease lasts ten minutes.
	statsCreate(t, h, statsDelivery("a-leased", "a", at(-90*time.Second)))
	statsClaim(t, h, at(-90*time.Second), 10*time.Minute, 1)

	// T0−50s: c fails its first attempt; the retry is due at T0−5s.
	statsCreate(t, h, statsDelivery("c-retry", "c", at(-50*time.Second)))
	c := statsClaim(t, h, at(-50*time.Second), time.Minute, 1)[0]
	statsRetry(t, h, c, at(-50*time.Second), at(-5*time.Second))

	// T0−40s: d is claimed with a ten-second lease that nobody ends.
	statsCreate(t, h, statsDelivery("d-expired", "d", at(-40*time.Second)))
	statsClaim(t, h, at(-40*time.Second), 10*time.Second, 1)

	// Unclaimed deliveries to a.
	statsCreate(t, h,
		statsDelivery("a-old", "a", at(-30*time.Second)),
		statsDelivery("a-new", "a", at(-10*time.Second)),
		statsDelivery("a-now", "a", statsT0),
		statsDelivery("a-future", "a", at(time.Minute)),
	)
}

func statsDelivery(eventID, destID string, due time.Time) hookrelay.Delivery {
	return hookrelay.Delivery{
		ID: hookrelay.DeliveryID(eventID, destID), EventID: eventID, TenantID: "tenant-1",
		DestinationID: destID, EventType: "lease.payment_recorded", Payload: []byte(`{}`),
		EnvelopeVersion: hookrelay.EnvelopeVersion, Attempt: 1,
		FirstQueuedAt: due, NextAttemptAt: due, PolicyVersion: "default",
		State: hookrelay.StatePending, UpdatedAt: due,
	}
}

func statsCreate(t *testing.T, h Harness, ds ...hookrelay.Delivery) {
	t.Helper()
	ctx := context.Background()
	if _, err := h.Ledger.Create(ctx, ds); err != nil {
		t.Fatalf("Ledger.Create: %v", err)
	}
	if err := h.Queue.Enqueue(ctx, ds); err != nil {
		t.Fatalf("Queue.Enqueue: %v", err)
	}
}

func statsClaim(t *testing.T, h Harness, now time.Time, leaseFor time.Duration, want int) []hookrelay.Claim {
	t.Helper()
	claims, err := h.Queue.Claim(context.Background(), hookrelay.ClaimParams{
		Now: now, Limit: want, LeaseFor: leaseFor, Holder: "hookrelaytest",
	})
	if err != nil {
		t.Fatalf("Queue.Claim at %v: %v", now, err)
	}
	if len(claims) != want {
		t.Fatalf("Queue.Claim at %v: %d claims, want %d", now, len(claims), want)
	}
	return claims
}

func statsAttempt(c hookrelay.Claim, r hookrelay.Result, now time.Time) hookrelay.Attempt {
	return hookrelay.Attempt{
		DeliveryID: c.Delivery.ID, Number: c.Delivery.Attempt, StartedAt: now, FinishedAt: now,
		Kind: r.Kind, Outcome: r.Outcome, Reason: r.Reason, StatusCode: r.StatusCode,
	}
}

func statsDeliver(t *testing.T, h Harness, c hookrelay.Claim, now time.Time) {
	t.Helper()
	ctx := context.Background()
	a := statsAttempt(c, hookrelay.Delivered(200), now)
	if err := h.Ledger.MarkDelivered(ctx, hookrelay.MarkDeliveredParams{ID: c.Delivery.ID, Lease: c.Lease, Attempt: a, Now: now}); err != nil {
		t.Fatalf("Ledger.MarkDelivered: %v", err)
	}
	if err := h.Queue.Acknowledge(ctx, hookrelay.AckParams{ID: c.Delivery.ID, Lease: c.Lease, Now: now}); err != nil {
		t.Fatalf("Queue.Acknowledge: %v", err)
	}
}

func statsDeadLetter(t *testing.T, h Harness, c hookrelay.Claim, now time.Time) {
	t.Helper()
	ctx := context.Background()
	r := hookrelay.Permanent(hookrelay.ReasonAuthRejected).WithStatus(401)
	a := statsAttempt(c, r, now)
	if err := h.Ledger.RecordDeadLetter(ctx, hookrelay.RecordDeadLetterParams{
		ID: c.Delivery.ID, Lease: c.Lease, Reason: r.Reason, Attempt: &a, Now: now,
	}); err != nil {
		t.Fatalf("Ledger.RecordDeadLetter: %v", err)
	}
	d := c.Delivery
	d.State, d.LastOutcome, d.LastReason, d.UpdatedAt = hookrelay.StateDead, r.Outcome, r.Reason, now
	if err := h.Queue.DeadLetter(ctx, hookrelay.DeadLetterParams{Delivery: d, Lease: c.Lease, Reason: r.Reason, Now: now}); err != nil {
		t.Fatalf("Queue.DeadLetter: %v", err)
	}
}

func statsRetry(t *testing.T, h Harness, c hookrelay.Claim, now, next time.Time) {
	t.Helper()
	ctx := context.Background()
	r := hookrelay.Retryable(hookrelay.ReasonServiceUnavailable).WithStatus(503)
	a := statsAttempt(c, r, now)
	a.NextAttemptAt = next
	if err := h.Ledger.RecordRetry(ctx, hookrelay.RecordRetryParams{
		ID: c.Delivery.ID, Lease: c.Lease, Attempt: a, NextAttempt: c.Delivery.Attempt + 1, NextAttemptAt: next, Now: now,
	}); err != nil {
		t.Fatalf("Ledger.RecordRetry: %v", err)
	}
	d := c.Delivery
	d.Attempt, d.NextAttemptAt = c.Delivery.Attempt+1, next
	d.LastOutcome, d.LastReason, d.UpdatedAt = r.Outcome, r.Reason, now
	if err := h.Queue.RetryAt(ctx, hookrelay.RetryAtParams{Delivery: d, Lease: c.Lease, At: next, Now: now}); err != nil {
		t.Fatalf("Queue.RetryAt: %v", err)
	}
}

func statsByDestination(t *testing.T, stats hookrelay.LedgerStats, now time.Time) map[string]hookrelay.DestinationStats {
	t.Helper()
	list, err := stats.Stats(context.Background(), hookrelay.StatsParams{Now: now})
	if err != nil {
		t.Fatalf("Stats at %v: %v", now, err)
	}
	m := map[string]hookrelay.DestinationStats{}
	for _, s := range list {
		if _, dup := m[s.DestinationID]; dup {
			t.Errorf("Stats reported destination %q twice", s.DestinationID)
		}
		m[s.DestinationID] = s
	}
	return m
}

func wantStats(t *testing.T, got map[string]hookrelay.DestinationStats, id string, want hookrelay.DestinationStats) {
	t.Helper()
	want.DestinationID = id
	if g, ok := got[id]; !ok {
		t.Errorf("destination %q missing from Stats", id)
	} else if g != want {
		t.Errorf("destination %q:\n got %+v\nwant %+v", id, g, want)
	}
}

func wantAbsentOrZero(t *testing.T, got map[string]hookrelay.DestinationStats, id string) {
	t.Helper()
	if g, ok := got[id]; ok && g != (hookrelay.DestinationStats{DestinationID: id}) {
		t.Errorf("destination %q has nothing pending or dead, got %+v", id, g)
	}
}
