package hookrelaytest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// startedLease is the lease of the started workers below: long enough that
// the mock clock, moved on by the test while a worker runs, never ends one
// under a send in progress (which would spend an attempt on a timeout).
const startedLease = 10 * time.Minute

// startedOpts are the settings of the started workers below: a poll a
// simulated second, few slots per destination (so that claims are held
// ahead of them, ClaimAhead) and the long lease.
func startedOpts(c *hookrelay.Config) {
	c.LeaseFor, c.PollInterval = startedLease, time.Second
	c.Concurrency, c.PerDestinationConcurrency = 4, 1
}

// start starts the fleet's clients i (all when none are named) as worker
// processes and stops them when the test ends.
func (f *guardFleet) start(which ...int) {
	f.t.Helper()
	if len(which) == 0 {
		for i := range f.clients {
			which = append(which, i)
		}
	}
	for _, i := range which {
		c := f.clients[i]
		require.NoError(f.t, c.Start(context.Background()))
		f.t.Cleanup(func() { require.NoError(f.t, c.Stop(context.Background())) })
	}
}

// addClient adds one more client (worker process) sharing the harness.
func (f *guardFleet) addClient(opts ...engineOption) int {
	f.t.Helper()
	i := len(f.clients)
	cfg := hookrelay.Config{
		Queue: f.h.Queue, Ledger: f.h.Ledger, Destinations: f.h.Destinations, Sender: f.rec,
		Clock: f.clock, Random: FixedRandom(0.5), LeaseFor: leaseFor, Observer: f.events,
		Holder: fmt.Sprintf("worker-%d", i),
	}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := hookrelay.New(cfg)
	require.NoError(f.t, err)
	f.clients = append(f.clients, c)
	return i
}

// until waits for cond while the workers run, moving the mock clock on by
// tick between looks (zero: time stands still). It is a bound against a
// hang, never a speed check.
func (f *guardFleet) until(cond func() bool, tick time.Duration, msg string) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		if cond() {
			return true
		}
		if tick > 0 {
			f.clock.Add(tick)
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, msg)
}

// untilQuiet is until, but moves the clock on by tick only once the
// workers have done all they could at the current time: every claim they
// took has ended (delivered, retried, released…) and none of ids is due.
// Each simulated moment then sees every send it allows, however slow the
// store. When something is due but every worker is idle, waiting for its
// poll timer, the clock moves on by a poll (a second) to wake them.
func (f *guardFleet) untilQuiet(ids []string, cond func() bool, tick time.Duration, msg string) {
	f.t.Helper()
	ok := assert.Eventually(f.t, func() bool {
		if cond() {
			return true
		}
		if f.events.inFlight() != 0 {
			return false
		}
		now, step := f.clock.Now(), tick
		for _, id := range ids {
			if d := f.state(id); d.State == hookrelay.StatePending && !d.NextAttemptAt.After(now) && !f.guarded(d.DestinationID, now) {
				// Due, and the workers are idle: nudge the clock a poll
				// on, in case they wait for their poll timer.
				step = time.Second
				break
			}
		}
		// Moved only if the workers are still idle: one may have claimed
		// since the look above, and its attempt must see one time.
		f.events.whenIdle(func() { f.clock.Add(step) })
		return false
	}, 30*time.Second, 10*time.Millisecond, msg)
	if !ok {
		f.events.mu.Lock()
		counts := map[hookrelay.EventName]int{}
		for _, e := range f.events.events {
			counts[e.Name]++
			if e.Name == hookrelay.EventWorkerError {
				f.t.Log(e.Err)
			}
		}
		f.events.mu.Unlock()
		f.t.Log(counts, f.clock.Now().Sub(base))
		f.t.FailNow()
	}
}

// guarded reports whether the destination is paused, disabled or held by
// its guard state at now.
func (f *guardFleet) guarded(destID string, now time.Time) bool {
	f.t.Helper()
	d, err := f.h.Destinations.Destination(context.Background(), destID)
	require.NoError(f.t, err)
	if d.Paused || d.Disabled {
		return true
	}
	g, _ := hookrelay.As[hookrelay.DestinationGuard](f.h.Destinations)
	gs, err := g.GuardStates(context.Background(), hookrelay.GuardStatesParams{IDs: []string{destID}})
	require.NoError(f.t, err)
	return len(gs) > 0 && gs[0].ClaimableAt().After(now)
}

// requestsTo returns the requests the recipient saw for one destination.
func (f *guardFleet) requestsTo(destID string) []Request {
	var out []Request
	for _, q := range f.rec.Requests() {
		if q.DestinationID == destID {
			out = append(out, q)
		}
	}
	return out
}

func (f *guardFleet) allDelivered(ids []string) func() bool {
	return func() bool {
		for _, id := range ids {
			if f.state(id).State != hookrelay.StateDelivered {
				return false
			}
		}
		return true
	}
}

// runStartedWorkerGuard runs RunDestinationGuard's scenarios through
// started workers (Client.Start): the claim loop's skip list, the claims it
// holds ahead of a free slot and its cache of guard states are in play, and
// on a store whose claim skips guarded destinations (the SQL store) so is
// that skip.
func runStartedWorkerGuard(t *testing.T, newHarness NewHarness, dest hookrelay.Destination) {
	ctx := context.Background()

	t.Run("StartedWorkersHonourTheRate", func(t *testing.T) {
		limited := dest
		limited.MaxPerSecond = 2
		f := newGuardFleet(t, newHarness(t), 2, limited, startedOpts)
		ids := f.enqueue(12, "dest_1")
		f.start()
		// The clock moves a whole second at a time, so each second's sends
		// share one time: a bucket refilling at 2/s allows two per second.
		f.untilQuiet(ids, f.allDelivered(ids), time.Second, "every delivery went out at the limit's pace")
		perSecond := map[time.Time]int{}
		for _, q := range f.rec.Requests() {
			perSecond[q.At.Truncate(time.Second)]++
		}
		for at, n := range perSecond {
			assert.LessOrEqual(t, n, 2, "at most MaxPerSecond sends across both workers in the second at +%v", at.Sub(base))
		}
		assert.GreaterOrEqual(t, len(perSecond), 6, "twelve deliveries, two a second at most: six seconds at least")
		f.assertDeliveredOnFirstAttempt(ids)
	})

	t.Run("StartedWorkerHoldsEveryDeliveryOnRetryAfter", func(t *testing.T) {
		other := dest
		other.ID, other.URL = "dest_2", "https://crm.example/webhooks"
		f := newGuardFleet(t, newHarness(t), 1, dest, startedOpts)
		require.NoError(t, f.h.Destinations.Put(ctx, other))
		var firstHeld atomic.Bool
		f.rec.Script = func(d hookrelay.Delivery, n int) RecipientAnswer {
			if d.DestinationID == "dest_1" && firstHeld.CompareAndSwap(false, true) {
				return Reject(hookrelay.ClassifyStatus(429, 30*time.Second))
			}
			return Accept()
		}
		held := f.enqueue(6, "dest_1")
		flowing := f.enqueueTo(6, "dest_2", "evt_b")
		f.start()
		// One slot per destination: the worker claimed dest_1's deliveries
		// ahead of its slot, and those it held when the 429 came are handed
		// back unsent.
		f.until(func() bool {
			return f.allDelivered(flowing)() && len(f.events.of(hookrelay.EventDestinationHeld)) == 1 &&
				f.releasedWith(hookrelay.ReasonDestinationHeld) >= 3
		}, 0, "the other destination flows while the 429's hold is recorded")
		hold := f.events.of(hookrelay.EventDestinationHeld)[0]
		assert.True(t, hold.At.Equal(base.Add(30*time.Second)), "held until the Retry-After")
		assert.Len(t, f.requestsTo("dest_1"), 1, "nothing more to the held destination, held-ahead claims included")

		// A second worker process, which never saw the 429, joins; more
		// deliveries arrive for both destinations.
		f.addClient(startedOpts)
		f.start(1)
		held = append(held, f.enqueueTo(2, "dest_1", "evt_late")...)
		flowing = append(flowing, f.enqueueTo(4, "dest_2", "evt_b_late")...)
		f.until(func() bool { return !f.clock.Now().Before(base.Add(29 * time.Second)) }, time.Second, "the hold's span passes")
		assert.Len(t, f.requestsTo("dest_1"), 1, "neither worker sent to the held destination before its Retry-After")
		f.until(f.allDelivered(flowing), time.Second, "the other destination kept flowing during the hold")

		f.until(f.allDelivered(held), time.Second, "every held delivery goes once the hold ends")
		for _, q := range f.requestsTo("dest_1")[1:] {
			assert.False(t, q.At.Before(base.Add(30*time.Second)), "sent after the hold")
		}
		assert.Len(t, f.requestsTo("dest_1"), len(held)+1, "each held delivery sent once, and the 429'd one again")
		for _, id := range held {
			reqs := f.rec.RequestsFor(id)
			want := 1
			if len(reqs) == 2 {
				want = 2 // the one that got the 429 spent its first attempt on it
			}
			assert.Equal(t, want, reqs[len(reqs)-1].Attempt, "waiting for the hold spent no attempt of %s", id)
		}
		f.assertDeliveredOnFirstAttempt(flowing)
	})

	t.Run("StartedWorkerOpensProbesOnceAndClosesTheCircuit", func(t *testing.T) {
		var down atomic.Bool
		down.Store(true)
		probe := make(chan struct{})
		var probing atomic.Int32
		f := newGuardFleet(t, newHarness(t), 1, dest, startedOpts, func(c *hookrelay.Config) {
			c.CircuitFailureThreshold, c.CircuitCoolDown = 3, time.Minute
			c.PerDestinationConcurrency = 2
		})
		f.rec.Script = func(hookrelay.Delivery, int) RecipientAnswer {
			if down.Load() {
				return Reject(hookrelay.Retryable(hookrelay.ReasonConnectionRefused))
			}
			a := Accept()
			if probing.Add(1) == 1 {
				a.Block = probe // the probe's answer waits for the test
			}
			return a
		}
		ids := f.enqueue(8, "dest_1")
		f.start()
		var release sync.Once
		letProbeAnswer := func() { release.Do(func() { close(probe) }) }
		t.Cleanup(letProbeAnswer) // before the workers stop, should the test end early
		// Counted once every claim has ended: the other slot's send, let go
		// before the circuit opened, may still be out (a slow recipient),
		// and is one of the failures.
		f.until(func() bool {
			return len(f.events.of(hookrelay.EventCircuitOpened)) == 1 && f.releasedWith(hookrelay.ReasonCircuitOpen) > 0 &&
				f.events.inFlight() == 0
		}, 0, "the circuit opens after three failures and the claims held ahead wait")
		failed := len(f.rec.Requests())
		assert.GreaterOrEqual(t, failed, 3)
		assert.LessOrEqual(t, failed, 4, "three failures, and at most the one send in flight in the other slot")
		opened := f.events.of(hookrelay.EventCircuitOpened)[0]
		assert.EqualValues(t, 3, opened.Count)
		assert.True(t, opened.At.Equal(base.Add(time.Minute)))

		f.until(func() bool { return !f.clock.Now().Before(base.Add(59 * time.Second)) }, time.Second, "the cool-down passes")
		assert.Len(t, f.rec.Requests(), failed, "nothing sent during the cool-down")

		waited := f.releasedWith(hookrelay.ReasonCircuitOpen)
		down.Store(false)
		f.until(func() bool { return probing.Load() == 1 }, time.Second, "after the cool-down the probe goes")
		// While the probe is out, the worker's other slot finds the circuit
		// half-open: its claims wait, none is a second probe.
		f.until(func() bool { return f.releasedWith(hookrelay.ReasonCircuitOpen) > waited }, time.Second, "another delivery waits behind the probe")
		assert.Equal(t, int32(1), probing.Load(), "one probe")
		assert.Len(t, f.rec.Requests(), failed, "no other request while the probe is out")
		letProbeAnswer()
		f.until(func() bool { return len(f.events.of(hookrelay.EventCircuitClosed)) == 1 }, 0, "the probe's success closes the circuit")
		f.until(f.allDelivered(ids), time.Second, "every delivery goes once it closed")
		assert.Len(t, f.rec.Requests(), failed+len(ids), "each delivery sent once after the failures; waiting spent no attempt")
		for _, id := range ids {
			reqs := f.rec.RequestsFor(id)
			assert.Equal(t, len(reqs), reqs[len(reqs)-1].Attempt, "only failed sends spent attempts of %s", id)
		}
	})

	t.Run("StartedWorkerDisablesADestinationFailingForTheSpan", func(t *testing.T) {
		p := hookrelay.DefaultPolicy()
		p.Version, p.MaxAttempts, p.BaseDelay, p.MaxDelay = "patient", 1000, 10*time.Minute, 10*time.Minute
		f := newGuardFleet(t, newHarness(t), 1, dest, startedOpts, func(c *hookrelay.Config) {
			c.DisableAfterFailingFor, c.Policy = time.Hour, &p
		})
		f.rec.Script = func(hookrelay.Delivery, int) RecipientAnswer {
			return Reject(hookrelay.Unknown(hookrelay.ReasonTimeout))
		}
		id := f.enqueue(1, "dest_1")[0]
		f.start()
		ids := []string{id}
		f.untilQuiet(ids, func() bool { return !f.clock.Now().Before(base.Add(59 * time.Minute)) }, time.Minute, "most of the span passes")
		assert.Empty(t, f.events.of(hookrelay.EventDestinationDisabled), "not disabled before the span")
		f.untilQuiet(ids, func() bool { return len(f.events.of(hookrelay.EventDestinationDisabled)) == 1 }, time.Minute, "an hour of failures disables the destination")
		d, err := f.h.Destinations.Destination(ctx, "dest_1")
		require.NoError(t, err)
		assert.True(t, d.Disabled)
		assert.Equal(t, hookrelay.ReasonDestinationFailing, d.DisabledReason)
		reqs := f.rec.Requests()
		require.GreaterOrEqual(t, len(reqs), 2)
		// The clock moves on by the minute, and by a second to wake an idle
		// worker, so the retries (every 5m) drift: compare with the first.
		first, last, before := reqs[0].At, reqs[len(reqs)-1].At, reqs[len(reqs)-2].At
		assert.GreaterOrEqual(t, last.Sub(first), time.Hour, "not before the span")
		assert.Less(t, before.Sub(first), time.Hour, "disabled by the first failure past the span")

		f.until(func() bool { return len(f.events.of(hookrelay.EventRetryScheduled)) == len(reqs) }, 0, "the last failure's retry is recorded")
		attempt := f.state(id).Attempt
		end := f.clock.Now().Add(30 * time.Minute)
		f.untilQuiet(ids, func() bool { return !f.clock.Now().Before(end) }, time.Minute, "half an hour passes")
		assert.Len(t, f.rec.Requests(), len(reqs), "a disabled destination is not sent to")
		assert.Equal(t, hookrelay.StatePending, f.state(id).State, "its delivery waits for a human")
		assert.Equal(t, attempt, f.state(id).Attempt, "and spends no attempt meanwhile")
	})
}

// enqueueTo enqueues n deliveries to destID with event IDs prefix_000….
func (f *guardFleet) enqueueTo(n int, destID, prefix string) []string {
	f.t.Helper()
	var ids []string
	for i := range n {
		res, err := f.clients[0].Enqueue(context.Background(), hookrelay.EnqueueParams{
			EventID: fmt.Sprintf("%s_%03d", prefix, i), TenantID: "tenant_a", DestinationID: destID,
			EventType: "lease.payment_recorded", Payload: []byte(`{"payment_id":"pay_7319"}`),
		})
		require.NoError(f.t, err)
		ids = append(ids, res.ID)
	}
	return ids
}
