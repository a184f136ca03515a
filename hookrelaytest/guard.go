package hookrelaytest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// guardFleet is several clients (worker processes) sharing one harness,
// one mock clock and one recipient.
type guardFleet struct {
	t       *testing.T
	h       Harness
	clock   *clock.Mock
	rec     *Recipient
	events  *eventLog
	clients []*hookrelay.Client
}

func newGuardFleet(t *testing.T, h Harness, n int, dest hookrelay.Destination, opts ...engineOption) *guardFleet {
	t.Helper()
	if _, ok := hookrelay.As[hookrelay.DestinationGuard](h.Destinations); !ok {
		t.Skip("the Destinations store has no DestinationGuard ability")
	}
	f := &guardFleet{t: t, h: h, clock: clock.NewMock(), rec: &Recipient{}, events: &eventLog{}}
	f.clock.Set(base)
	require.NoError(t, h.Destinations.Put(context.Background(), dest))
	for range n {
		f.addClient(opts...)
	}
	return f
}

func (f *guardFleet) enqueue(n int, destID string) []string {
	f.t.Helper()
	var ids []string
	for i := range n {
		res, err := f.clients[0].Enqueue(context.Background(), hookrelay.EnqueueParams{
			EventID: fmt.Sprintf("evt_%03d", i), TenantID: "tenant_a", DestinationID: destID,
			EventType: "lease.payment_recorded", Payload: []byte(`{"payment_id":"pay_7319"}`),
		})
		require.NoError(f.t, err)
		ids = append(ids, res.ID)
	}
	return ids
}

// step has every client, in turn, claim up to limit due deliveries and
// process them; it returns how many requests the recipient saw.
func (f *guardFleet) step(limit int) int {
	f.t.Helper()
	before := len(f.rec.Requests())
	for i, c := range f.clients {
		cs, err := f.h.Queue.Claim(context.Background(), hookrelay.ClaimParams{
			Now: f.clock.Now(), Limit: limit, LeaseFor: leaseFor, Holder: fmt.Sprintf("worker-%d", i),
		})
		require.NoError(f.t, err)
		for _, cl := range cs {
			require.NoError(f.t, c.Process(context.Background(), cl))
		}
	}
	return len(f.rec.Requests()) - before
}

func (f *guardFleet) state(id string) hookrelay.Delivery {
	f.t.Helper()
	d, err := f.h.Ledger.Get(context.Background(), id)
	require.NoError(f.t, err)
	return d
}

// assertNoAttemptSpent checks that every request for each delivery was
// its first attempt: waiting under a guard spent none.
func (f *guardFleet) assertDeliveredOnFirstAttempt(ids []string) {
	f.t.Helper()
	for _, id := range ids {
		reqs := f.rec.RequestsFor(id)
		require.Len(f.t, reqs, 1, "delivery %s was sent once", id)
		assert.Equal(f.t, 1, reqs[0].Attempt, "waiting spent no attempt of %s", id)
		assert.Equal(f.t, hookrelay.StateDelivered, f.state(id).State)
	}
}

func (f *guardFleet) releasedWith(reason string) int {
	n := 0
	for _, e := range f.events.of(hookrelay.EventReleased) {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

// RunDestinationGuard runs the recipient-protection tests on a
// Destinations store with the DestinationGuard ability, through clients
// that share it as worker processes share a database: updates are atomic,
// the state round-trips, a rate limit holds across several workers, a
// Retry-After holds every delivery to its destination without spending
// attempts, the circuit breaker opens, probes once, re-opens on a failed
// probe and closes on success, and a destination failing for the whole
// span is disabled. It skips when the store lacks the ability.
func RunDestinationGuard(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()
	guardOf := func(t *testing.T, h Harness) hookrelay.DestinationGuard {
		g, ok := hookrelay.As[hookrelay.DestinationGuard](h.Destinations)
		if !ok {
			t.Skip("the Destinations store has no DestinationGuard ability")
		}
		return g
	}
	dest := hookrelay.Destination{ID: "dest_1", TenantID: "tenant_a", URL: "https://accounting.example/webhooks"}

	t.Run("UpdatesAreAtomic", func(t *testing.T) {
		g := guardOf(t, newHarness(t))
		const workers, each = 8, 25
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if _, err := g.UpdateGuard(ctx, hookrelay.UpdateGuardParams{DestinationID: "dest_1", Update: func(s hookrelay.GuardState) hookrelay.GuardState {
						s.ConsecutiveFailures++
						return s
					}}); err != nil {
						failed.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		require.Zero(t, failed.Load())
		gs, err := g.GuardStates(ctx, hookrelay.GuardStatesParams{IDs: []string{"dest_1"}})
		require.NoError(t, err)
		require.Len(t, gs, 1)
		assert.Equal(t, workers*each, gs[0].ConsecutiveFailures, "no update was lost between a read and its write")
	})

	t.Run("StateRoundTrips", func(t *testing.T) {
		g := guardOf(t, newHarness(t))
		want := hookrelay.GuardState{
			DestinationID: "dest_b", Tokens: 1.25, RefilledAt: base, LimitedUntil: base.Add(500 * time.Millisecond),
			HeldUntil: base.Add(time.Minute), ConsecutiveFailures: 4, Circuit: hookrelay.CircuitHalfOpen,
			OpenUntil: base.Add(2 * time.Minute), Probe: "whd_probe", FailingSince: base.Add(-time.Hour),
		}
		got, err := g.UpdateGuard(ctx, hookrelay.UpdateGuardParams{DestinationID: "dest_b", Update: func(s hookrelay.GuardState) hookrelay.GuardState {
			assert.Equal(t, hookrelay.GuardState{DestinationID: "dest_b"}, s, "a destination never updated starts from the zero state")
			return want
		}})
		require.NoError(t, err)
		_, err = g.UpdateGuard(ctx, hookrelay.UpdateGuardParams{DestinationID: "dest_a", Update: func(s hookrelay.GuardState) hookrelay.GuardState { return s }})
		require.NoError(t, err)
		all, err := g.GuardStates(ctx, hookrelay.GuardStatesParams{})
		require.NoError(t, err)
		require.Len(t, all, 2)
		assert.Equal(t, "dest_a", all[0].DestinationID, "ordered by destination")
		for _, s := range []hookrelay.GuardState{got, all[1]} {
			assert.Equal(t, want.DestinationID, s.DestinationID)
			assert.InDelta(t, want.Tokens, s.Tokens, 1e-9)
			assert.Equal(t, want.ConsecutiveFailures, s.ConsecutiveFailures)
			assert.Equal(t, want.Circuit, s.Circuit)
			assert.Equal(t, want.Probe, s.Probe)
			for name, pair := range map[string][2]time.Time{
				"RefilledAt": {want.RefilledAt, s.RefilledAt}, "LimitedUntil": {want.LimitedUntil, s.LimitedUntil},
				"HeldUntil": {want.HeldUntil, s.HeldUntil}, "OpenUntil": {want.OpenUntil, s.OpenUntil},
				"FailingSince": {want.FailingSince, s.FailingSince},
			} {
				assert.True(t, pair[0].Equal(pair[1]), "%s: want %v, got %v", name, pair[0], pair[1])
			}
		}
		none, err := g.GuardStates(ctx, hookrelay.GuardStatesParams{IDs: []string{"dest_never"}})
		require.NoError(t, err)
		assert.Empty(t, none)
	})

	t.Run("GuardStatesOfManyIDsAnswersEachStoredStateOnce", func(t *testing.T) {
		// A worker asks for every destination it holds back at once: tens
		// of thousands on a large store, more than one SQL statement's
		// parameters (SQLite: 32,766; PostgreSQL: 65,535). An ID asked for
		// twice is answered once, as a SQL IN list does.
		g := guardOf(t, newHarness(t))
		const n = 70_000
		ids := make([]string, 0, n+1)
		for i := range n {
			ids = append(ids, fmt.Sprintf("dest_%05d", i))
		}
		ids = append(ids, "dest_00000")
		stored := []string{"dest_00000", "dest_35000", fmt.Sprintf("dest_%05d", n-1)}
		for _, id := range stored {
			_, err := g.UpdateGuard(ctx, hookrelay.UpdateGuardParams{DestinationID: id, Update: func(s hookrelay.GuardState) hookrelay.GuardState {
				s.ConsecutiveFailures = 1
				return s
			}})
			require.NoError(t, err)
		}
		gs, err := g.GuardStates(ctx, hookrelay.GuardStatesParams{IDs: ids})
		require.NoError(t, err, "%d IDs", len(ids))
		got := make([]string, len(gs))
		for i, s := range gs {
			got[i] = s.DestinationID
		}
		assert.Equal(t, stored, got, "each stored state once, ordered by destination")
	})

	t.Run("RateIsHonouredAcrossSeveralWorkers", func(t *testing.T) {
		limited := dest
		limited.MaxPerSecond = 2
		f := newGuardFleet(t, newHarness(t), 3, limited)
		ids := f.enqueue(12, "dest_1")
		total := 0
		for sec := 0; sec < 10 && total < len(ids); sec++ {
			n := f.step(4)
			assert.LessOrEqual(t, n, 2, "second %d: at most MaxPerSecond sends across the three workers", sec)
			total += n
			f.clock.Add(time.Second)
		}
		assert.Equal(t, len(ids), total, "every delivery went out at the limit's pace")
		f.assertDeliveredOnFirstAttempt(ids)
		assert.Positive(t, f.releasedWith(hookrelay.ReasonDestinationRateLimited), "deliveries over the limit were handed back")
	})

	t.Run("ARateRaisedOrRemovedTakesEffectWithinPausedRecheck", func(t *testing.T) {
		// A rate set too low by mistake (one send every 1,000 s), then
		// fixed: the deliveries it held go out within PausedRecheck of
		// the fix, not at the slot the old rate gave them.
		for _, fixed := range []float64{0, 100} {
			t.Run(fmt.Sprint("to_", fixed), func(t *testing.T) {
				slow := dest
				slow.MaxPerSecond = 0.001
				f := newGuardFleet(t, newHarness(t), 2, slow)
				ids := f.enqueue(3, "dest_1")
				require.Equal(t, 1, f.step(4), "the bucket's one token")
				assert.Positive(t, f.releasedWith(hookrelay.ReasonDestinationRateLimited), "the rest wait for the slow rate")
				f.clock.Add(time.Minute)
				assert.Zero(t, f.step(4), "a minute on, the slow rate still holds them")
				now := dest
				now.MaxPerSecond = fixed
				require.NoError(t, f.h.Destinations.Put(ctx, now))
				f.clock.Add(hookrelay.DefaultPausedRecheck + hookrelay.DefaultDestinationCacheTTL)
				for range 3 {
					f.step(4)
				}
				f.assertDeliveredOnFirstAttempt(ids)
			})
		}
	})

	t.Run("RetryAfterHoldsTheWholeDestinationWithoutSpendingAttempts", func(t *testing.T) {
		f := newGuardFleet(t, newHarness(t), 2, dest)
		ids := f.enqueue(4, "dest_1")
		f.rec.Script = func(d hookrelay.Delivery, n int) RecipientAnswer {
			if d.ID == ids[0] && n == 1 {
				return Reject(hookrelay.ClassifyStatus(429, 30*time.Second))
			}
			return Accept()
		}
		// One worker takes the first delivery alone and gets the 429.
		cs, err := f.h.Queue.Claim(ctx, hookrelay.ClaimParams{Now: f.clock.Now(), Limit: 1, LeaseFor: leaseFor, Holder: "worker-0"})
		require.NoError(t, err)
		require.Len(t, cs, 1)
		require.Equal(t, ids[0], cs[0].Delivery.ID)
		require.NoError(t, f.clients[0].Process(ctx, cs[0]))
		held := f.events.of(hookrelay.EventDestinationHeld)
		require.Len(t, held, 1)
		assert.True(t, held[0].At.Equal(base.Add(30*time.Second)), "held until the Retry-After")

		for _, at := range []time.Duration{0, time.Second, 29 * time.Second} {
			f.clock.Set(base.Add(at))
			assert.Zero(t, f.step(10), "nothing is sent to a held destination at +%v, by either worker", at)
		}
		f.clock.Set(base.Add(30 * time.Second))
		for range 3 {
			f.step(10)
		}
		f.assertDeliveredOnFirstAttempt(ids[1:])
		assert.Len(t, f.rec.RequestsFor(ids[0]), 2)
		assert.Equal(t, hookrelay.StateDelivered, f.state(ids[0]).State)
	})

	t.Run("AClearedGuardLetsEveryWorkerSendAtOnce", func(t *testing.T) {
		// A Retry-After hold of ten minutes behind an open circuit, which
		// an operator clears from another process: the store's claims
		// stop skipping the destination (the SQL store's claimable_at),
		// and the deliveries go once they are due again (within
		// PausedRecheck of the worker's look), not when the hold ends.
		f := newGuardFleet(t, newHarness(t), 2, dest, engineOption(func(c *hookrelay.Config) {
			c.CircuitFailureThreshold, c.CircuitCoolDown = 1, time.Hour
		}))
		ids := f.enqueue(3, "dest_1")
		f.rec.Script = func(d hookrelay.Delivery, n int) RecipientAnswer {
			if d.ID == ids[0] && n == 1 {
				return Reject(hookrelay.ClassifyStatus(429, 10*time.Minute))
			}
			return Accept()
		}
		cs, err := f.h.Queue.Claim(ctx, hookrelay.ClaimParams{Now: f.clock.Now(), Limit: 1, LeaseFor: leaseFor, Holder: "worker-0"})
		require.NoError(t, err)
		require.Len(t, cs, 1)
		require.NoError(t, f.clients[0].Process(ctx, cs[0]))
		f.clock.Add(time.Second)
		assert.Zero(t, f.step(10), "held")
		f.clock.Add(time.Minute)
		assert.Zero(t, f.step(10), "held a minute on")

		require.NoError(t, f.clients[1].ClearDestinationGuard(ctx, "dest_1"))
		gs, err := guardOf(t, f.h).GuardStates(ctx, hookrelay.GuardStatesParams{IDs: []string{"dest_1"}})
		require.NoError(t, err)
		require.Len(t, gs, 1)
		assert.False(t, gs[0].ClaimableAt().After(f.clock.Now()), "claimable at once: %+v", gs[0])
		assert.False(t, gs[0].IsOpen(), "the circuit is closed")
		assert.Zero(t, gs[0].ConsecutiveFailures)
		f.clock.Add(hookrelay.DefaultPausedRecheck)
		for range 3 {
			f.step(10)
		}
		f.assertDeliveredOnFirstAttempt(ids[1:])
	})

	t.Run("CircuitOpensProbesOnceReopensAndCloses", func(t *testing.T) {
		var down atomic.Bool
		down.Store(true)
		f := newGuardFleet(t, newHarness(t), 2, dest, func(c *hookrelay.Config) {
			c.CircuitFailureThreshold, c.CircuitCoolDown = 3, time.Minute
		})
		f.rec.Script = func(hookrelay.Delivery, int) RecipientAnswer {
			if down.Load() {
				return Reject(hookrelay.Retryable(hookrelay.ReasonConnectionRefused))
			}
			return Accept()
		}
		ids := f.enqueue(6, "dest_1")
		assert.Equal(t, 3, f.step(10), "three failures in a row, then the circuit is open")
		opened := f.events.of(hookrelay.EventCircuitOpened)
		require.Len(t, opened, 1)
		assert.EqualValues(t, 3, opened[0].Count)
		assert.True(t, opened[0].At.Equal(base.Add(time.Minute)))

		f.clock.Set(base.Add(30 * time.Second))
		assert.Zero(t, f.step(10), "nothing is sent during the cool-down")
		f.assertStatsShowOpenCircuit(3)

		f.clock.Set(base.Add(time.Minute))
		assert.Equal(t, 1, f.step(10), "after the cool-down, one probe across both workers")
		require.Len(t, f.events.of(hookrelay.EventCircuitOpened), 2, "the failed probe re-opened the circuit")
		assert.Zero(t, f.step(10), "and nothing more is sent")

		down.Store(false)
		f.clock.Set(base.Add(2 * time.Minute))
		cs, err := f.h.Queue.Claim(ctx, hookrelay.ClaimParams{Now: f.clock.Now(), Limit: 1, LeaseFor: leaseFor, Holder: "worker-1"})
		require.NoError(t, err)
		require.Len(t, cs, 1)
		require.NoError(t, f.clients[1].Process(ctx, cs[0]))
		require.Len(t, f.events.of(hookrelay.EventCircuitClosed), 1, "the next probe's success closed the circuit")
		f.clock.Set(base.Add(3 * time.Minute))
		for range 4 {
			f.step(10)
		}
		for _, id := range ids {
			assert.Equal(t, hookrelay.StateDelivered, f.state(id).State)
		}
		// The three that failed before the circuit opened spent one attempt
		// each; waiting behind the open circuit spent none.
		attempts := 0
		for _, id := range ids {
			attempts += len(f.rec.RequestsFor(id))
		}
		assert.Equal(t, 6+3+1, attempts, "six successes, three failures, one failed probe")
		assert.Positive(t, f.releasedWith(hookrelay.ReasonCircuitOpen))
	})

	t.Run("DestinationFailingForTheSpanIsDisabled", func(t *testing.T) {
		p := hookrelay.DefaultPolicy()
		p.Version, p.MaxAttempts, p.BaseDelay, p.MaxDelay = "patient", 1000, 10*time.Minute, 10*time.Minute
		var up atomic.Bool
		f := newGuardFleet(t, newHarness(t), 1, dest, func(c *hookrelay.Config) {
			c.DisableAfterFailingFor, c.Policy = time.Hour, &p
		})
		f.rec.Script = func(hookrelay.Delivery, int) RecipientAnswer {
			if up.Load() {
				return Accept()
			}
			return Reject(hookrelay.Unknown(hookrelay.ReasonTimeout))
		}
		f.enqueue(1, "dest_1")
		disabled := func() bool {
			d, err := f.h.Destinations.Destination(ctx, "dest_1")
			require.NoError(t, err)
			return d.Disabled
		}
		// Fails from base; a success at +40m ends the run; fails again.
		at := func(d time.Duration) {
			f.clock.Set(base.Add(d))
			f.step(10)
		}
		at(0)
		at(20 * time.Minute)
		up.Store(true)
		more := f.enqueue(2, "dest_1")[1:]
		at(40 * time.Minute)
		require.Equal(t, hookrelay.StateDelivered, f.state(more[0]).State)
		up.Store(false)
		ids2 := f.enqueueAt(50*time.Minute, "evt_late")
		at(50 * time.Minute)
		at(70 * time.Minute)
		at(90 * time.Minute)
		assert.False(t, disabled(), "the success at +40m started the span afresh")
		assert.Empty(t, f.events.of(hookrelay.EventDestinationDisabled))
		at(110 * time.Minute)
		assert.True(t, disabled(), "an hour of failures from +50m disabled it")
		d, err := f.h.Destinations.Destination(ctx, "dest_1")
		require.NoError(t, err)
		assert.Equal(t, hookrelay.ReasonDestinationFailing, d.DisabledReason)
		evs := f.events.of(hookrelay.EventDestinationDisabled)
		require.Len(t, evs, 1)
		assert.Equal(t, hookrelay.ReasonDestinationFailing, evs[0].Reason)
		before, attempt := len(f.rec.Requests()), f.state(ids2).Attempt
		at(130 * time.Minute)
		assert.Equal(t, before, len(f.rec.Requests()), "a disabled destination is not sent to")
		assert.Equal(t, hookrelay.StatePending, f.state(ids2).State, "its deliveries wait for a human")
		assert.Equal(t, attempt, f.state(ids2).Attempt, "and spend no attempt meanwhile")
	})

	runStartedWorkerGuard(t, newHarness, dest)
}

// enqueueAt enqueues one more delivery to dest_1 at base+d.
func (f *guardFleet) enqueueAt(d time.Duration, eventID string) string {
	f.t.Helper()
	f.clock.Set(base.Add(d))
	res, err := f.clients[0].Enqueue(context.Background(), hookrelay.EnqueueParams{
		EventID: eventID, TenantID: "tenant_a", DestinationID: "dest_1",
		EventType: "lease.payment_recorded", Payload: []byte(`{}`),
	})
	require.NoError(f.t, err)
	return res.ID
}

// assertStatsShowOpenCircuit checks that stats show dest_1's circuit open
// after failures: through StatsWithGuard, and through the Ledger's own
// Stats when the Ledger is the Destinations store too (it then says so
// itself).
func (f *guardFleet) assertStatsShowOpenCircuit(failures int) {
	f.t.Helper()
	ls, ok := hookrelay.As[hookrelay.LedgerStats](f.h.Ledger)
	if !ok {
		return
	}
	guard, _ := hookrelay.As[hookrelay.DestinationGuard](f.h.Destinations)
	views := []hookrelay.LedgerStats{hookrelay.StatsWithGuard(ls, guard)}
	if any(f.h.Ledger) == any(f.h.Destinations) {
		views = append(views, ls)
	}
	for _, v := range views {
		st, err := v.Stats(context.Background(), hookrelay.StatsParams{Now: f.clock.Now()})
		require.NoError(f.t, err)
		require.Len(f.t, st, 1)
		assert.Equal(f.t, hookrelay.CircuitOpen, st[0].Circuit)
		assert.Equal(f.t, failures, st[0].ConsecutiveFailures)
		assert.True(f.t, st[0].FailingSince.Equal(base), "failing since the first failure")
		assert.EqualValues(f.t, 6, st[0].Pending)
	}
}
