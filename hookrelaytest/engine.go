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

// engine is one client over a harness, driven by a mock clock.
type engine struct {
	t      *testing.T
	h      Harness
	clock  *clock.Mock
	client *hookrelay.Client
	rec    *Recipient
	f      *faults
	events *eventLog
}

type eventLog struct {
	mu     sync.Mutex
	events []hookrelay.Event
}

func (l *eventLog) Observe(_ context.Context, e hookrelay.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) of(kind hookrelay.EventName) []hookrelay.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []hookrelay.Event
	for _, e := range l.events {
		if e.Name == kind {
			out = append(out, e)
		}
	}
	return out
}

// inFlight returns how many claims the workers took have not ended
// (delivered, retried, dead-lettered, released or a duplicate), counted
// under one lock: counting the claims and the ends in separate looks could
// miss a claim taken between them while counting its end, and so see the
// workers idle while another claim was still being processed.
func (l *eventLog) inFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlightLocked()
}

// whenIdle runs f, and reports true, if no claim is in flight, holding the
// log's lock meanwhile. A worker observes a claim (EventClaimed) before it
// reads the clock for the claim's attempt, and the observer takes this
// lock: so an f that moves a mock clock on moves it either before such a
// read or while no attempt is under way, never between an attempt's read
// of the clock and its send. Checking first and moving the clock after, in
// two steps, let a claim start between them, and its attempt then sent at
// the time before the move, after other attempts had already been admitted
// at the time after it.
func (l *eventLog) whenIdle(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlightLocked() != 0 {
		return false
	}
	f()
	return true
}

func (l *eventLog) inFlightLocked() int {
	n := 0
	for _, e := range l.events {
		switch e.Name {
		case hookrelay.EventClaimed:
			n++
		case hookrelay.EventDelivered, hookrelay.EventRetryScheduled, hookrelay.EventDeadLettered,
			hookrelay.EventReleased, hookrelay.EventDuplicate:
			n--
		}
	}
	return n
}

type engineOption func(*hookrelay.Config)

func newEngine(t *testing.T, h Harness, opts ...engineOption) *engine {
	t.Helper()
	e := &engine{t: t, h: h, clock: clock.NewMock(), rec: &Recipient{}, f: &faults{failOn: map[string]int{}}, events: &eventLog{}}
	e.clock.Set(base)
	require.NoError(t, h.Destinations.Put(context.Background(), hookrelay.Destination{
		ID: "dest_1", TenantID: "tenant_a", URL: "https://accounting.example/webhooks",
	}))
	cfg := hookrelay.Config{
		Queue:        faultyQueue{Queue: h.Queue, f: e.f},
		Ledger:       faultyLedger{Ledger: h.Ledger, f: e.f},
		Destinations: faultyDestinations{DestinationStore: h.Destinations, f: e.f},
		Sender:       e.rec,
		Clock:        e.clock,
		Random:       FixedRandom(0.5),
		LeaseFor:     leaseFor,
		Observer:     e.events,
	}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := hookrelay.New(cfg)
	require.NoError(t, err)
	e.client = c
	return e
}

func (e *engine) enqueue(eventID, destID string) string {
	e.t.Helper()
	res, err := e.client.Enqueue(context.Background(), hookrelay.EnqueueParams{
		EventID: eventID, TenantID: "tenant_a", DestinationID: destID,
		EventType: "lease.payment_recorded", Payload: []byte(`{"payment_id":"pay_7319"}`),
		Scope: map[string]string{"property": "prop_204"},
	})
	require.NoError(e.t, err)
	return res.ID
}

// step claims what is due now and processes it, returning Process's errors.
// For a queue that redelivers in real time (Harness.RedeliveryWithin) it
// waits up to that bound for something to claim.
func (e *engine) step() (int, []error) {
	e.t.Helper()
	deadline := time.Now().Add(e.h.RedeliveryWithin)
	var cs []hookrelay.Claim
	for {
		var err error
		cs, err = e.h.Queue.Claim(context.Background(), hookrelay.ClaimParams{
			Now: e.clock.Now(), Limit: 100, LeaseFor: leaseFor, Holder: "engine-test",
		})
		require.NoError(e.t, err)
		if len(cs) > 0 || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	var errs []error
	for _, c := range cs {
		if err := e.client.Process(context.Background(), c); err != nil {
			errs = append(errs, err)
		}
	}
	return len(cs), errs
}

// run steps until nothing is pending for id, jumping the mock clock to the
// next due time (or past the lease after a crash). It fails the test after
// a bounded number of steps.
func (e *engine) run(id string) hookrelay.Delivery {
	e.t.Helper()
	for range 50 {
		n, errs := e.step()
		d := e.get(id)
		if d.State != hookrelay.StatePending {
			return d
		}
		switch {
		case len(errs) > 0 || n == 0 && !d.NextAttemptAt.After(e.clock.Now()):
			e.clock.Add(leaseFor) // a crash left a lease behind: wait it out
		case d.NextAttemptAt.After(e.clock.Now()):
			e.clock.Set(d.NextAttemptAt)
		}
	}
	e.t.Fatalf("delivery %s still pending after 50 steps", id)
	return hookrelay.Delivery{}
}

func (e *engine) get(id string) hookrelay.Delivery {
	e.t.Helper()
	d, err := e.h.Ledger.Get(context.Background(), id)
	require.NoError(e.t, err)
	return d
}

func (e *engine) attempts(id string) []hookrelay.Attempt {
	e.t.Helper()
	as, err := e.h.Ledger.Attempts(context.Background(), id)
	require.NoError(e.t, err)
	return as
}

// assertOneIdentity checks that every request the recipient saw for a
// delivery carried its ID and event, and that the effect happened once.
func (e *engine) assertOneEffect(id string) {
	e.t.Helper()
	reqs := e.rec.RequestsFor(id)
	require.NotEmpty(e.t, reqs)
	applied := 0
	for _, r := range reqs {
		assert.Equal(e.t, id, r.DeliveryID)
		if r.Applied {
			applied++
		}
	}
	assert.Equal(e.t, 1, applied, "the recipient applied the business effect once")
	assert.Equal(e.t, 1, e.rec.Effects(id))
}

func failTimes(n int, res hookrelay.Result) func(hookrelay.Delivery, int) RecipientAnswer {
	return func(_ hookrelay.Delivery, k int) RecipientAnswer {
		if k <= n {
			return Reject(res)
		}
		return Accept()
	}
}

// RunEngine runs whole-engine scenarios against the adapters: the engine's test
// list (backoff schedule, attempt-budget boundary, permanent rejection,
// ambiguous outcome, duplicate message, crash injection at every boundary,
// expired lease) and the worker's pause, concurrency and shutdown rules.
func RunEngine(t *testing.T, newHarness NewHarness) {
	engineScenarios(t, newHarness, true)
}

// RunEngineLedgerQueue runs RunEngine's scenarios (but for crash
// injection, which needs the suite's wrappers) with the harness's Queue and
// Ledger handed to the client as they are. A store that declares
// hookrelay.LedgerQueue is then run on the worker's fast path — no ledger
// check of a fresh claim, no queue transition after a ledger write — which
// RunEngine's fault-injecting wrappers hide. It skips when the harness's
// Queue and Ledger are not one LedgerQueue.
func RunEngineLedgerQueue(t *testing.T, newHarness NewHarness) {
	engineScenarios(t, newHarness, false)
}

// isLedgerQueue reports whether h's Queue and Ledger are one LedgerQueue.
func isLedgerQueue(h Harness) bool {
	lq, ok := h.Queue.(hookrelay.LedgerQueue)
	return ok && any(lq) == any(h.Ledger)
}

// direct hands the harness's ports to the client without the suite's
// fault-injecting wrappers.
func direct(c *hookrelay.Config) {
	c.Queue = c.Queue.(faultyQueue).Queue
	c.Ledger = c.Ledger.(faultyLedger).Ledger
	c.Destinations = c.Destinations.(faultyDestinations).DestinationStore
}

// engineScenarios runs the engine scenarios through the fault-injecting
// wrappers (wrapped) or on the harness's ports as they are.
func engineScenarios(t *testing.T, newHarness NewHarness, wrapped bool) {
	ctx := context.Background()
	ne := func(t *testing.T, opts ...engineOption) *engine {
		t.Helper()
		h := newHarness(t)
		if !wrapped {
			if !isLedgerQueue(h) {
				t.Skipf("the harness's Queue (%T) and Ledger (%T) are not one hookrelay.LedgerQueue", h.Queue, h.Ledger)
			}
			opts = append(opts, direct)
		}
		return newEngine(t, h, opts...)
	}

	t.Run("FullJitterAtHalfGives500msThen1s", func(t *testing.T) {
		e := ne(t)
		e.rec.Script = failTimes(2, hookrelay.Retryable(hookrelay.ReasonServiceUnavailable).WithStatus(503))
		id := e.enqueue("evt_1", "dest_1")
		e.step()
		assert.Equal(t, base.Add(500*time.Millisecond), e.get(id).NextAttemptAt.UTC(), "first delay 500 ms")
		e.clock.Add(500 * time.Millisecond)
		e.step()
		assert.Equal(t, base.Add(1500*time.Millisecond), e.get(id).NextAttemptAt.UTC(), "second delay 1000 ms")
		retries := e.events.of(hookrelay.EventRetryScheduled)
		require.Len(t, retries, 2)
		assert.Equal(t, 500*time.Millisecond, retries[0].Delay)
		assert.Equal(t, time.Second, retries[1].Delay)
		d := e.run(id)
		assert.Equal(t, hookrelay.StateDelivered, d.State)
		assert.Len(t, e.attempts(id), 3)
	})

	t.Run("SeventhAttemptIsTheLast", func(t *testing.T) {
		e := ne(t)
		e.rec.Script = failTimes(100, hookrelay.Retryable(hookrelay.ReasonServerError).WithStatus(500))
		id := e.enqueue("evt_1", "dest_1")
		d := e.run(id)
		assert.Equal(t, hookrelay.StateDead, d.State)
		assert.Equal(t, hookrelay.ReasonAttemptsExhausted, d.LastReason)
		as := e.attempts(id)
		require.Len(t, as, 7, "seven attempts, no eighth")
		assert.Len(t, e.rec.RequestsFor(id), 7)
		for i, a := range as {
			assert.Equal(t, i+1, a.Number)
		}
	})

	t.Run("SeventhAttemptCanStillSucceed", func(t *testing.T) {
		e := ne(t)
		e.rec.Script = failTimes(6, hookrelay.Retryable(hookrelay.ReasonServerError).WithStatus(500))
		id := e.enqueue("evt_1", "dest_1")
		d := e.run(id)
		assert.Equal(t, hookrelay.StateDelivered, d.State)
		assert.Len(t, e.attempts(id), 7)
	})

	t.Run("PermanentRejectionSchedulesNoRetry", func(t *testing.T) {
		e := ne(t)
		e.rec.Script = failTimes(100, hookrelay.Permanent(hookrelay.ReasonUnprocessable).WithStatus(422))
		id := e.enqueue("evt_1", "dest_1")
		e.step()
		d := e.get(id)
		assert.Equal(t, hookrelay.StateDead, d.State)
		assert.Equal(t, hookrelay.ReasonUnprocessable, d.LastReason)
		assert.Empty(t, e.events.of(hookrelay.EventRetryScheduled))
		e.clock.Add(24 * time.Hour)
		n, _ := e.step()
		assert.Zero(t, n, "a permanent rejection never returns to the active queue on its own")
		assert.Len(t, e.rec.RequestsFor(id), 1)
	})

	t.Run("AmbiguousTimeoutKeepsTheIDAndEndsDelivered", func(t *testing.T) {
		e := ne(t)
		e.rec.Script = func(_ hookrelay.Delivery, n int) RecipientAnswer {
			if n == 1 {
				return ApplyThenTimeout() // the payment was applied; the response was lost
			}
			return Accept()
		}
		id := e.enqueue("evt_1", "dest_1")
		e.step()
		d := e.get(id)
		assert.Equal(t, hookrelay.StatePending, d.State)
		assert.Equal(t, hookrelay.OutcomeUnknown, d.LastOutcome, "a timeout is unknown, not failed")
		d = e.run(id)
		assert.Equal(t, hookrelay.StateDelivered, d.State)
		reqs := e.rec.RequestsFor(id)
		require.Len(t, reqs, 2)
		assert.Equal(t, id, reqs[1].DeliveryID, "the retry carries the same ID")
		e.assertOneEffect(id)
	})

	t.Run("DuplicateMessageIsHarmless", func(t *testing.T) {
		e := ne(t)
		id := e.enqueue("evt_1", "dest_1")
		cs, err := e.h.Queue.Claim(ctx, hookrelay.ClaimParams{Now: e.clock.Now(), Limit: 1, LeaseFor: leaseFor})
		require.NoError(t, err)
		require.Len(t, cs, 1)
		require.NoError(t, e.client.Process(ctx, cs[0]))
		require.NoError(t, e.client.Process(ctx, cs[0]), "the same message again")
		assert.Len(t, e.rec.RequestsFor(id), 1, "the ledger check stops the second send")
		assert.Len(t, e.events.of(hookrelay.EventDuplicate), 1)
		assert.Len(t, e.attempts(id), 1)
	})

	t.Run("EnqueueTwiceYieldsOneRecord", func(t *testing.T) {
		e := ne(t)
		first, err := e.client.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "evt_1", TenantID: "tenant_a", DestinationID: "dest_1", EventType: "t", Payload: []byte("a")})
		require.NoError(t, err)
		second, err := e.client.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "evt_1", TenantID: "tenant_a", DestinationID: "dest_1", EventType: "t", Payload: []byte("b")})
		require.NoError(t, err)
		assert.True(t, first.Created)
		assert.False(t, second.Created)
		assert.Equal(t, first.ID, second.ID)
		assert.Equal(t, hookrelay.DeliveryID("evt_1", "dest_1"), first.ID)
		e.run(first.ID)
		assert.Len(t, e.rec.Requests(), 1)
	})

	// Crash injection: abort at each boundary of the state machine, run the
	// delivery again after the lease expires, and check the final state and
	// what the recipient saw.
	crashes := []struct {
		name      string
		op        string
		script    func(hookrelay.Delivery, int) RecipientAnswer
		wantState hookrelay.State
		wantSends int
	}{
		{"BeforeSend", "destinations.get", nil, hookrelay.StateDelivered, 1},
		{"BeforeLedgerCheck", "ledger.was_delivered", nil, hookrelay.StateDelivered, 1},
		{"AfterSendBeforeMarkDelivered", "ledger.mark_delivered", nil, hookrelay.StateDelivered, 2},
		{"AfterMarkDeliveredBeforeAck", "queue.acknowledge", nil, hookrelay.StateDelivered, 1},
		{"AfterSendBeforeRecordRetry", "ledger.record_retry", failTimes(1, hookrelay.Retryable(hookrelay.ReasonServerError)), hookrelay.StateDelivered, 2},
		{"AfterRecordRetryBeforeRetryAt", "queue.retry_at", failTimes(1, hookrelay.Retryable(hookrelay.ReasonServerError)), hookrelay.StateDelivered, 2},
		{"AfterSendBeforeRecordDeadLetter", "ledger.record_dead_letter", failTimes(100, hookrelay.Permanent(hookrelay.ReasonBadRequest)), hookrelay.StateDead, 2},
		{"AfterRecordDeadLetterBeforeDeadLetter", "queue.dead_letter", failTimes(100, hookrelay.Permanent(hookrelay.ReasonBadRequest)), hookrelay.StateDead, 1},
	}
	for _, tc := range crashes {
		t.Run("Crash"+tc.name, func(t *testing.T) {
			if !wrapped {
				t.Skip("crash injection needs the suite's wrappers")
			}
			e := ne(t)
			e.rec.Script = tc.script
			id := e.enqueue("evt_1", "dest_1")
			e.f.failOn[tc.op] = 1
			_, errs := e.step()
			require.NotEmpty(t, errs, "the injected crash surfaced")
			assert.ErrorIs(t, errs[0], errCrash)
			d := e.run(id)
			assert.Equal(t, tc.wantState, d.State)
			reqs := e.rec.RequestsFor(id)
			assert.Len(t, reqs, tc.wantSends, "requests the recipient saw")
			for _, r := range reqs {
				assert.Equal(t, id, r.DeliveryID, "every attempt carried the same ID")
			}
			if tc.wantState == hookrelay.StateDelivered {
				e.assertOneEffect(id)
			}
			e.clock.Add(24 * time.Hour)
			n, _ := e.step()
			assert.Zero(t, n, "nothing is left to claim")
		})
	}

	t.Run("CrashAtTheLastAttemptAfterSendBeforeRecordDeadLetter", func(t *testing.T) {
		// The seventh attempt fails and the process dies before its
		// dead-letter is recorded: the attempt number never advanced, so the
		// seventh attempt runs again (the recipient sees an eighth request,
		// same ID), and only then is the budget spent.
		if !wrapped {
			t.Skip("crash injection needs the suite's wrappers")
		}
		e := ne(t)
		e.rec.Script = failTimes(100, hookrelay.Retryable(hookrelay.ReasonServerError).WithStatus(500))
		id := e.enqueue("evt_1", "dest_1")
		e.f.failOn["ledger.record_dead_letter"] = 1
		d := e.run(id)
		assert.Equal(t, hookrelay.StateDead, d.State)
		assert.Equal(t, hookrelay.ReasonAttemptsExhausted, d.LastReason)
		as := e.attempts(id)
		require.Len(t, as, 7, "the lost record of the seventh attempt is not counted")
		assert.Equal(t, 7, as[6].Number)
		reqs := e.rec.RequestsFor(id)
		assert.Len(t, reqs, 8, "the seventh attempt was sent twice")
		for _, r := range reqs {
			assert.Equal(t, id, r.DeliveryID)
		}
		e.clock.Add(24 * time.Hour)
		n, _ := e.step()
		assert.Zero(t, n, "nothing is left to claim")
	})

	t.Run("ExpiredLeaseHolderLosesToTheNewHolder", func(t *testing.T) {
		e := ne(t)
		id := e.enqueue("evt_1", "dest_1")
		slow, err := e.h.Queue.Claim(ctx, hookrelay.ClaimParams{Now: e.clock.Now(), Limit: 1, LeaseFor: leaseFor, Holder: "slow"})
		require.NoError(t, err)
		require.Len(t, slow, 1)
		e.clock.Add(leaseFor)
		d := e.run(id) // another worker claims after the lease expired and delivers
		require.Equal(t, hookrelay.StateDelivered, d.State)
		err = e.client.Process(ctx, slow[0]) // the slow worker wakes up
		if err != nil {
			assert.ErrorIs(t, err, hookrelay.ErrLeaseLost, "the stale message can only be refused")
		}
		assert.Len(t, e.attempts(id), 1, "the stale holder recorded nothing")
		assert.Len(t, e.rec.RequestsFor(id), 1, "and sent nothing")
	})

	t.Run("StaleHolderMidSendCannotOverwrite", func(t *testing.T) {
		e := ne(t)
		id := e.enqueue("evt_1", "dest_1")
		slow, err := e.h.Queue.Claim(ctx, hookrelay.ClaimParams{Now: e.clock.Now(), Limit: 1, LeaseFor: leaseFor, Holder: "slow"})
		require.NoError(t, err)
		require.Len(t, slow, 1)
		// The slow holder's send fails; meanwhile its lease expired and a
		// new holder claimed the delivery.
		e.rec.Script = failTimes(1, hookrelay.Retryable(hookrelay.ReasonServerError))
		e.clock.Add(leaseFor)
		fresh, err := e.h.Queue.Claim(ctx, hookrelay.ClaimParams{Now: e.clock.Now(), Limit: 1, LeaseFor: leaseFor, Holder: "fresh"})
		require.NoError(t, err)
		require.Len(t, fresh, 1)
		err = e.client.Process(ctx, slow[0])
		assert.ErrorIs(t, err, hookrelay.ErrLeaseLost, "the stale result is refused")
		require.NoError(t, e.client.Process(ctx, fresh[0]))
		d := e.get(id)
		assert.Equal(t, hookrelay.StateDelivered, d.State)
		as := e.attempts(id)
		require.Len(t, as, 1, "only the current holder's attempt is recorded")
		assert.Equal(t, hookrelay.KindDelivered, as[0].Kind)
	})

	t.Run("RetryAfterIsHonouredButCapped", func(t *testing.T) {
		e := ne(t)
		e.rec.Script = func(_ hookrelay.Delivery, n int) RecipientAnswer {
			switch n {
			case 1:
				return Reject(hookrelay.Retryable(hookrelay.ReasonRateLimited).WithStatus(429).WithRetryAfter(2 * time.Minute))
			case 2:
				return Reject(hookrelay.Retryable(hookrelay.ReasonRateLimited).WithStatus(429).WithRetryAfter(48 * time.Hour))
			}
			return Accept()
		}
		id := e.enqueue("evt_1", "dest_1")
		e.step()
		assert.Equal(t, base.Add(2*time.Minute), e.get(id).NextAttemptAt.UTC(), "Retry-After beats a shorter jitter delay")
		e.clock.Add(2 * time.Minute)
		e.step()
		assert.Equal(t, base.Add(2*time.Minute+15*time.Minute), e.get(id).NextAttemptAt.UTC(), "but never beyond the 15 min cap")
	})

	t.Run("RetryAfterBeyondWhatAStoreCanHoldIsStillRecorded", func(t *testing.T) {
		// A policy with no cap to speak of meets a recipient asking for
		// centuries: the retry falls after 2262, past int64 nanoseconds.
		// The attempt must still be recorded and the delivery wait, not be
		// sent again each time its lease runs out.
		e := ne(t)
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{
			ID: "dest_uncapped", TenantID: "tenant_a", URL: "https://uncapped.example/",
			Policy: &hookrelay.Policy{Version: "uncapped", MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: 1<<63 - 1},
		}))
		e.rec.Script = failTimes(100, hookrelay.Retryable(hookrelay.ReasonRateLimited).WithStatus(429).WithRetryAfter(1<<63-1))
		id := e.enqueue("evt_1", "dest_uncapped")
		_, errs := e.step()
		require.Empty(t, errs, "the retry is recorded")
		d := e.get(id)
		assert.Equal(t, hookrelay.StatePending, d.State)
		assert.Equal(t, 2, d.Attempt)
		assert.True(t, d.NextAttemptAt.After(base.AddDate(200, 0, 0)), "it waits as long as a store can say: %v", d.NextAttemptAt)
		assert.Len(t, e.attempts(id), 1)
		e.clock.Add(24 * time.Hour)
		n, _ := e.step()
		assert.Zero(t, n, "nothing is due a day later")
		assert.Len(t, e.rec.RequestsFor(id), 1, "the recipient is not asked again")
	})

	t.Run("DeliveryWindowExpires", func(t *testing.T) {
		e := ne(t)
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{
			ID: "dest_short", TenantID: "tenant_a", URL: "https://door.example/",
			Policy: &hookrelay.Policy{Version: "door-v1", MaxAttempts: 10, BaseDelay: time.Second, MaxDelay: time.Minute, MaxAge: 10 * time.Second},
		}))
		e.rec.Script = failTimes(100, hookrelay.Retryable(hookrelay.ReasonServerError))
		id := e.enqueue("evt_1", "dest_short")
		assert.Equal(t, "door-v1", e.get(id).PolicyVersion, "the record names its policy")
		d := e.run(id)
		assert.Equal(t, hookrelay.StateDead, d.State)
		assert.Equal(t, hookrelay.ReasonWindowExpired, d.LastReason)
		// Sends at 0, 0.5 s, 1.5 s, 3.5 s and 7.5 s; the next would be at
		// 15.5 s, past the 10 s window, so the fifth failure is the last.
		assert.Len(t, e.rec.RequestsFor(id), 5)
		assert.Len(t, e.attempts(id), 5)
	})

	t.Run("UnknownDestinationIsDeadLettered", func(t *testing.T) {
		e := ne(t)
		id := e.enqueue("evt_1", "dest_1")
		// The destination is replaced by one with another ID: the record's
		// destination no longer resolves at send time.
		cs, err := e.h.Queue.Claim(ctx, hookrelay.ClaimParams{Now: e.clock.Now(), Limit: 1, LeaseFor: leaseFor})
		require.NoError(t, err)
		c := cs[0]
		c.Delivery.DestinationID = "dest_deleted"
		require.NoError(t, e.client.Process(ctx, c))
		d := e.get(id)
		assert.Equal(t, hookrelay.StateDead, d.State)
		assert.Equal(t, hookrelay.ReasonDestinationNotFound, d.LastReason)
		assert.Empty(t, e.rec.Requests())
	})

	t.Run("PausedDestinationSpendsNoAttempts", func(t *testing.T) {
		e := ne(t)
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_2", TenantID: "tenant_a", URL: "https://other.example/"}))
		require.NoError(t, e.h.Destinations.SetPaused(ctx, "dest_1", true))
		paused := e.enqueue("evt_1", "dest_1")
		flowing := e.enqueue("evt_2", "dest_2")
		for range 5 {
			e.step()
			e.clock.Add(10 * time.Second)
		}
		assert.Empty(t, e.rec.RequestsFor(paused), "nothing sent to a paused destination")
		d := e.get(paused)
		assert.Equal(t, hookrelay.StatePending, d.State)
		assert.Equal(t, 1, d.Attempt, "no attempt spent while paused")
		assert.Equal(t, hookrelay.StateDelivered, e.get(flowing).State, "everything else keeps flowing")

		require.NoError(t, e.h.Destinations.SetPaused(ctx, "dest_1", false))
		d = e.run(paused)
		assert.Equal(t, hookrelay.StateDelivered, d.State, "resume picks it up")
		assert.Len(t, e.attempts(paused), 1)
	})

	t.Run("GoneDestinationIsDisabled", func(t *testing.T) {
		e := ne(t)
		e.rec.Script = func(hookrelay.Delivery, int) RecipientAnswer { return Reject(hookrelay.ClassifyStatus(410, 0)) }
		first := e.enqueue("evt_1", "dest_1")
		e.step()
		assert.Equal(t, hookrelay.ReasonDestinationGone, e.get(first).LastReason)
		dest, err := e.h.Destinations.Destination(ctx, "dest_1")
		require.NoError(t, err)
		assert.True(t, dest.Disabled, "the recipient said it is gone")
		second := e.enqueue("evt_2", "dest_1")
		e.step()
		e.clock.Add(time.Minute)
		e.step()
		assert.Empty(t, e.rec.RequestsFor(second), "a disabled destination receives nothing")
		assert.Equal(t, hookrelay.StatePending, e.get(second).State, "and its deliveries wait, not die")
	})

	t.Run("WorkerDeliversAndDrains", func(t *testing.T) {
		e := ne(t, func(c *hookrelay.Config) { c.Concurrency = 4 })
		var want []string
		for i := range 20 {
			want = append(want, e.enqueue(fmt.Sprintf("evt_%d", i), "dest_1"))
		}
		require.NoError(t, e.client.Start(ctx))
		assert.ErrorIs(t, e.client.Start(ctx), hookrelay.ErrAlreadyStarted)
		require.Eventually(t, func() bool { return len(e.events.of(hookrelay.EventDelivered)) == 20 }, 20*time.Second, 5*time.Millisecond)
		require.NoError(t, e.client.Stop(ctx))
		require.NoError(t, e.client.Stop(ctx), "stopping twice is harmless")
		<-e.client.Stopped()
		for _, id := range want {
			assert.Equal(t, hookrelay.StateDelivered, e.get(id).State)
		}
	})

	t.Run("WorkerRetriesOnTheMockClock", func(t *testing.T) {
		e := ne(t, func(c *hookrelay.Config) { c.PollInterval = time.Second })
		e.rec.Script = failTimes(2, hookrelay.Retryable(hookrelay.ReasonServiceUnavailable))
		id := e.enqueue("evt_1", "dest_1")
		require.NoError(t, e.client.Start(ctx))
		defer func() { require.NoError(t, e.client.Stop(ctx)) }()
		require.Eventually(t, func() bool {
			if e.get(id).State == hookrelay.StateDelivered {
				return true
			}
			// Time passes only when the test says so, and only once every
			// request sent is in the ledger: a clock that ran on while a
			// slow store wrote would expire the lease of an attempt the
			// recipient already accepted, and the delivery would rightly
			// go out again.
			atts, err := e.h.Ledger.Attempts(ctx, id)
			require.NoError(t, err)
			if len(atts) == len(e.rec.RequestsFor(id)) {
				e.clock.Add(250 * time.Millisecond)
			}
			return false
		}, 20*time.Second, time.Millisecond)
		assert.Len(t, e.rec.RequestsFor(id), 3)
	})

	t.Run("SlowDestinationCannotTakeThePool", func(t *testing.T) {
		block := make(chan struct{})
		e := ne(t, func(c *hookrelay.Config) {
			c.Concurrency, c.PerDestinationConcurrency = 4, 2
		})
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_slow", TenantID: "tenant_a", URL: "https://slow.example/"}))
		var slowStarted atomic.Int32
		e.rec.Script = func(d hookrelay.Delivery, _ int) RecipientAnswer {
			if d.DestinationID == "dest_slow" {
				slowStarted.Add(1)
				a := Accept()
				a.Block = block
				return a
			}
			return Accept()
		}
		for i := range 10 {
			e.enqueue(fmt.Sprintf("slow_%d", i), "dest_slow")
		}
		var fast []string
		for i := range 10 {
			fast = append(fast, e.enqueue(fmt.Sprintf("fast_%d", i), "dest_1"))
		}
		require.NoError(t, e.client.Start(ctx))
		require.Eventually(t, func() bool {
			sent, recorded, done := 0, 0, true
			for _, id := range fast {
				done = done && e.get(id).State == hookrelay.StateDelivered
				sent += len(e.rec.RequestsFor(id))
				recorded += len(e.attempts(id))
			}
			if !done && sent == recorded {
				// Only while no answer is waiting for its ledger write: a
				// clock run past the lease meanwhile would send it again.
				e.clock.Add(100 * time.Millisecond)
			}
			return done
		}, 20*time.Second, time.Millisecond, "the fast destination's deliveries all completed while the slow one hangs")
		assert.Len(t, e.rec.Requests(), 10, "every fast delivery was sent once")
		require.Eventually(t, func() bool { return slowStarted.Load() == 2 }, 20*time.Second, time.Millisecond, "the slow destination keeps its own two slots")
		assert.LessOrEqual(t, slowStarted.Load(), int32(2), "at most two attempts ever started for the slow destination")
		close(block)
		require.NoError(t, e.client.Stop(ctx))
	})

	t.Run("StopAndCancelReleasesWithoutSpendingAttempts", func(t *testing.T) {
		block := make(chan struct{})
		defer close(block)
		e := ne(t)
		e.rec.Script = func(hookrelay.Delivery, int) RecipientAnswer { a := Accept(); a.Block = block; return a }
		id := e.enqueue("evt_1", "dest_1")
		require.NoError(t, e.client.Start(ctx))
		require.Eventually(t, func() bool { return len(e.events.of(hookrelay.EventClaimed)) == 1 }, 20*time.Second, time.Millisecond)
		require.NoError(t, e.client.StopAndCancel(ctx))
		d := e.get(id)
		assert.Equal(t, hookrelay.StatePending, d.State)
		assert.Equal(t, 1, d.Attempt, "a cancelled attempt is not the recipient's fault")
		assert.Empty(t, e.attempts(id))
		cs := claimDue(t, e.h, e.clock.Now(), 10)
		assert.Len(t, cs, 1, "released at once, not left to its lease")
	})

	enqueueScenarios(t, ne)
}
