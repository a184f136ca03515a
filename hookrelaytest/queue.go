package hookrelaytest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

const leaseFor = 30 * time.Second

// newDelivery builds a pending record the way Client.Prepare does.
func newDelivery(eventID, destID string, at time.Time) hookrelay.Delivery {
	return hookrelay.Delivery{
		ID: hookrelay.DeliveryID(eventID, destID), EventID: eventID, TenantID: "tenant_a",
		Scope:         map[string]string{"property": "prop_204", "lease": "lease_881"},
		DestinationID: destID, EventType: "lease.payment_recorded",
		Payload:         []byte(`{"payment_id":"pay_7319","amount_cents":125000}`),
		EnvelopeVersion: hookrelay.EnvelopeVersion, Attempt: 1,
		FirstQueuedAt: at, NextAttemptAt: at, PolicyVersion: "default",
		State: hookrelay.StatePending, UpdatedAt: at,
	}
}

// seed creates and enqueues deliveries.
func seed(t *testing.T, h Harness, ds ...hookrelay.Delivery) {
	t.Helper()
	ctx := context.Background()
	_, err := h.Ledger.Create(ctx, ds)
	require.NoError(t, err)
	require.NoError(t, h.Queue.Enqueue(ctx, ds))
}

func claim(t *testing.T, q hookrelay.Queue, now time.Time, limit int, skip ...string) []hookrelay.Claim {
	t.Helper()
	cs, err := q.Claim(context.Background(), hookrelay.ClaimParams{
		Now: now, Limit: limit, LeaseFor: leaseFor, Holder: "test", SkipDestinations: skip,
	})
	require.NoError(t, err)
	return cs
}

// claimDue claims deliveries the test expects to be due at now. For a
// queue that redelivers in real time (Harness.RedeliveryWithin) it polls
// until Claim returns something or the bound passes.
func claimDue(t *testing.T, h Harness, now time.Time, limit int, skip ...string) []hookrelay.Claim {
	t.Helper()
	deadline := time.Now().Add(h.RedeliveryWithin)
	for {
		cs := claim(t, h.Queue, now, limit, skip...)
		if len(cs) > 0 || !time.Now().Before(deadline) {
			return cs
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func ids(cs []hookrelay.Claim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Delivery.ID
	}
	return out
}

func attemptFor(c hookrelay.Claim, kind hookrelay.Kind, at time.Time) hookrelay.Attempt {
	return hookrelay.Attempt{
		DeliveryID: c.Delivery.ID, Number: c.Delivery.Attempt, StartedAt: at, FinishedAt: at,
		Kind: kind, Outcome: hookrelay.OutcomeRejected, Reason: hookrelay.ReasonServerError, StatusCode: 500,
	}
}

// retry records a retry in the ledger, then schedules it: the order Process
// uses.
func retry(t *testing.T, h Harness, c hookrelay.Claim, now, at time.Time) error {
	t.Helper()
	ctx := context.Background()
	if err := h.Ledger.RecordRetry(ctx, hookrelay.RecordRetryParams{
		ID: c.Delivery.ID, Lease: c.Lease, Attempt: attemptFor(c, hookrelay.KindRetryable, now),
		NextAttempt: c.Delivery.Attempt + 1, NextAttemptAt: at, Now: now,
	}); err != nil {
		return err
	}
	next := c.Delivery
	next.Attempt, next.NextAttemptAt = c.Delivery.Attempt+1, at
	return h.Queue.RetryAt(ctx, hookrelay.RetryAtParams{Delivery: next, Lease: c.Lease, At: at, Now: now})
}

func deliver(t *testing.T, h Harness, c hookrelay.Claim, now time.Time) error {
	t.Helper()
	ctx := context.Background()
	a := attemptFor(c, hookrelay.KindDelivered, now)
	a.Outcome, a.Reason, a.StatusCode = hookrelay.OutcomeAccepted, "", 204
	if err := h.Ledger.MarkDelivered(ctx, hookrelay.MarkDeliveredParams{ID: c.Delivery.ID, Lease: c.Lease, Attempt: a, Now: now}); err != nil {
		return err
	}
	return h.Queue.Acknowledge(ctx, hookrelay.AckParams{ID: c.Delivery.ID, Lease: c.Lease, Now: now})
}

func kill(t *testing.T, h Harness, c hookrelay.Claim, reason string, now time.Time) error {
	t.Helper()
	ctx := context.Background()
	a := attemptFor(c, hookrelay.KindPermanent, now)
	if err := h.Ledger.RecordDeadLetter(ctx, hookrelay.RecordDeadLetterParams{ID: c.Delivery.ID, Lease: c.Lease, Reason: reason, Attempt: &a, Now: now}); err != nil {
		return err
	}
	return h.Queue.DeadLetter(ctx, hookrelay.DeadLetterParams{Delivery: c.Delivery, Lease: c.Lease, Reason: reason, Now: now})
}

// RunQueue runs the Queue contract tests: due order, leases, fencing,
// competing claims and idempotent transitions.
func RunQueue(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()

	t.Run("ClaimReturnsDueDeliveriesOldestFirstUpToLimit", func(t *testing.T) {
		h := newHarness(t)
		a := newDelivery("evt_a", "dest_1", base.Add(2*time.Second))
		b := newDelivery("evt_b", "dest_1", base.Add(1*time.Second))
		c := newDelivery("evt_c", "dest_1", base.Add(3*time.Second))
		future := newDelivery("evt_future", "dest_1", base.Add(time.Hour))
		seed(t, h, a, b, c, future)

		got := claim(t, h.Queue, base.Add(5*time.Second), 2)
		assert.Equal(t, []string{b.ID, a.ID}, ids(got), "oldest NextAttemptAt first, at most Limit")
		got = claim(t, h.Queue, base.Add(5*time.Second), 10)
		assert.Equal(t, []string{c.ID}, ids(got), "a not-yet-due delivery is not claimed")
		assert.Empty(t, claim(t, h.Queue, base, 0), "Limit 0 claims nothing")
	})

	t.Run("ClaimCarriesTheWholeRecordAndALease", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		got := claim(t, h.Queue, base, 1)
		require.Len(t, got, 1)
		c := got[0]
		assertSameDelivery(t, d, c.Delivery)
		assert.Positive(t, c.Lease.Token, "a claim carries a fencing token")
		assert.True(t, c.Lease.ExpiresAt.Equal(base.Add(leaseFor)), "lease expiry is Now+LeaseFor from the caller's clock, got %v", c.Lease.ExpiresAt)
	})

	t.Run("LeasedDeliveryIsNotClaimedAgainUntilTheLeaseExpires", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		first := claim(t, h.Queue, base, 1)
		require.Len(t, first, 1)
		assert.Empty(t, claim(t, h.Queue, base.Add(leaseFor-time.Second), 1), "live lease")

		again := claim(t, h.Queue, base.Add(leaseFor), 1)
		require.Len(t, again, 1, "an expired lease is redelivered")
		assert.Equal(t, d.ID, again[0].Delivery.ID, "same delivery ID")
		assert.Equal(t, 1, again[0].Delivery.Attempt, "an expired lease spends no attempt")
		assert.Greater(t, again[0].Lease.Token, first[0].Lease.Token, "the new lease has a greater fencing token")
	})

	t.Run("CompetingClaimsHaveOneWinnerPerDelivery", func(t *testing.T) {
		h := newHarness(t)
		var ds []hookrelay.Delivery
		for i := range 20 {
			ds = append(ds, newDelivery(fmt.Sprintf("evt_%02d", i), "dest_1", base))
		}
		seed(t, h, ds...)
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					cs, err := h.Queue.Claim(ctx, hookrelay.ClaimParams{Now: base, Limit: 3, LeaseFor: leaseFor, Holder: "racer"})
					if !assert.NoError(t, err) || len(cs) == 0 {
						return
					}
					mu.Lock()
					for _, c := range cs {
						seen[c.Delivery.ID]++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		assert.Len(t, seen, 20, "every delivery was claimed")
		for id, n := range seen {
			assert.Equal(t, 1, n, "delivery %s handed to %d claimers under live leases", id, n)
		}
	})

	t.Run("StaleLeaseHolderCannotOverwriteANewerAttempt", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		stale := claim(t, h.Queue, base, 1)[0]
		fresh := claim(t, h.Queue, base.Add(leaseFor), 1)[0]
		now := base.Add(leaseFor + time.Second)

		assert.ErrorIs(t, deliver(t, h, stale, now), hookrelay.ErrLeaseLost, "mark delivered")
		assert.ErrorIs(t, retry(t, h, stale, now, now.Add(time.Minute)), hookrelay.ErrLeaseLost, "record retry")
		assert.ErrorIs(t, kill(t, h, stale, "x", now), hookrelay.ErrLeaseLost, "dead-letter")
		assert.ErrorIs(t, h.Queue.Acknowledge(ctx, hookrelay.AckParams{ID: d.ID, Lease: stale.Lease, Now: now}), hookrelay.ErrLeaseLost, "ack")
		assert.ErrorIs(t, h.Queue.Release(ctx, hookrelay.ReleaseParams{ID: d.ID, Lease: stale.Lease, At: now, Now: now}), hookrelay.ErrLeaseLost, "release")

		got, err := h.Ledger.Get(ctx, d.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StatePending, got.State, "the stale holder changed nothing")
		assert.Equal(t, 1, got.Attempt)
		attempts, err := h.Ledger.Attempts(ctx, d.ID)
		require.NoError(t, err)
		assert.Empty(t, attempts, "no attempt recorded by the stale holder")

		require.NoError(t, deliver(t, h, fresh, now), "the current holder's transition succeeds")
		delivered, err := h.Ledger.WasDelivered(ctx, d.ID)
		require.NoError(t, err)
		assert.True(t, delivered)
	})

	t.Run("StaleHolderAfterRetryCannotRecordTheSameAttemptTwice", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		require.NoError(t, retry(t, h, c, base, base.Add(time.Second)))
		err := h.Ledger.RecordRetry(ctx, hookrelay.RecordRetryParams{
			ID: d.ID, Lease: c.Lease, Attempt: attemptFor(c, hookrelay.KindRetryable, base),
			NextAttempt: 2, NextAttemptAt: base.Add(time.Second), Now: base,
		})
		assert.Error(t, err, "recording attempt 1 again is refused")
		got, err := h.Ledger.Get(ctx, d.ID)
		require.NoError(t, err)
		assert.Equal(t, 2, got.Attempt)
	})

	t.Run("AcknowledgeIsIdempotentAndDeliveredIsNeverClaimedAgain", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		require.NoError(t, deliver(t, h, c, base))
		assert.NoError(t, h.Queue.Acknowledge(ctx, hookrelay.AckParams{ID: d.ID, Lease: c.Lease, Now: base}), "second ack")
		assert.NoError(t, h.Ledger.MarkDelivered(ctx, hookrelay.MarkDeliveredParams{ID: d.ID, Lease: c.Lease, Attempt: attemptFor(c, hookrelay.KindDelivered, base), Now: base}), "second mark")
		assert.Empty(t, claim(t, h.Queue, base.Add(24*time.Hour), 10), "delivered work never comes back")
		attempts, err := h.Ledger.Attempts(ctx, d.ID)
		require.NoError(t, err)
		assert.Len(t, attempts, 1, "a repeated mark-delivered adds no attempt")
	})

	t.Run("RetryAtKeepsTheIDAndWaitsUntilItsTime", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		at := base.Add(1500 * time.Millisecond)
		require.NoError(t, retry(t, h, c, base, at))
		assert.Empty(t, claim(t, h.Queue, at.Add(-time.Millisecond), 1), "not due before At")
		got := claimDue(t, h, at, 1)
		require.Len(t, got, 1)
		assert.Equal(t, d.ID, got[0].Delivery.ID, "the delayed copy keeps the delivery ID")
		assert.Equal(t, 2, got[0].Delivery.Attempt)
		assert.True(t, got[0].Delivery.NextAttemptAt.Equal(at))
		assert.Equal(t, d.Payload, got[0].Delivery.Payload, "payload untouched")
	})

	t.Run("DeadLetteredIsNeverClaimedAgain", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		require.NoError(t, kill(t, h, c, hookrelay.ReasonAuthRejected, base))
		assert.Empty(t, claim(t, h.Queue, base.Add(365*24*time.Hour), 10))
		got, err := h.Ledger.Get(ctx, d.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StateDead, got.State)
		assert.Equal(t, hookrelay.ReasonAuthRejected, got.LastReason)
	})

	t.Run("ReleaseSpendsNoAttempt", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		at := base.Add(5 * time.Second)
		require.NoError(t, h.Queue.Release(ctx, hookrelay.ReleaseParams{ID: d.ID, Lease: c.Lease, At: at, Now: base}))
		assert.Empty(t, claim(t, h.Queue, at.Add(-time.Millisecond), 1))
		got := claimDue(t, h, at, 1)
		require.Len(t, got, 1)
		assert.Equal(t, 1, got[0].Delivery.Attempt)
		attempts, err := h.Ledger.Attempts(ctx, d.ID)
		require.NoError(t, err)
		assert.Empty(t, attempts)
	})

	t.Run("SkippedDestinationsAreNotClaimed", func(t *testing.T) {
		h := newHarness(t)
		paused := newDelivery("evt_1", "dest_paused", base)
		other := newDelivery("evt_2", "dest_ok", base.Add(time.Second))
		seed(t, h, paused, other)
		got := claim(t, h.Queue, base.Add(time.Minute), 10, "dest_paused")
		assert.Equal(t, []string{other.ID}, ids(got))
		got = claimDue(t, h, base.Add(time.Minute), 10)
		assert.Equal(t, []string{paused.ID}, ids(got), "claimable once no longer skipped")
	})

	t.Run("EnqueueTwiceIsHarmless", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		seed(t, h, d)
		assert.Len(t, claim(t, h.Queue, base, 10), 1, "one record, one claim")
	})

	runEnqueueContract(t, newHarness)
}

// assertSameAttempt checks every field of an attempt read back from the
// ledger against the one written.
func assertSameAttempt(t *testing.T, want, got hookrelay.Attempt, what string) {
	t.Helper()
	assert.Equal(t, want.DeliveryID, got.DeliveryID, "%s: DeliveryID", what)
	assert.Equal(t, want.Number, got.Number, "%s: Number", what)
	assert.True(t, want.StartedAt.Equal(got.StartedAt), "%s: StartedAt %v != %v", what, want.StartedAt, got.StartedAt)
	assert.True(t, want.FinishedAt.Equal(got.FinishedAt), "%s: FinishedAt %v != %v", what, want.FinishedAt, got.FinishedAt)
	assert.Equal(t, want.Kind, got.Kind, "%s: Kind", what)
	assert.Equal(t, want.Outcome, got.Outcome, "%s: Outcome", what)
	assert.Equal(t, want.Reason, got.Reason, "%s: Reason", what)
	assert.Equal(t, want.StatusCode, got.StatusCode, "%s: StatusCode", what)
	assert.Equal(t, want.Detail, got.Detail, "%s: Detail", what)
	assert.True(t, want.NextAttemptAt.Equal(got.NextAttemptAt), "%s: NextAttemptAt %v != %v", what, want.NextAttemptAt, got.NextAttemptAt)
}

func assertSameDelivery(t *testing.T, want, got hookrelay.Delivery) {
	t.Helper()
	assert.Equal(t, want.ID, got.ID)
	assert.Equal(t, want.EventID, got.EventID)
	assert.Equal(t, want.TenantID, got.TenantID)
	assert.Equal(t, want.Scope, got.Scope)
	assert.Equal(t, want.DestinationID, got.DestinationID)
	assert.Equal(t, want.EventType, got.EventType)
	assert.Equal(t, want.Payload, got.Payload)
	assert.Equal(t, want.EnvelopeVersion, got.EnvelopeVersion)
	assert.Equal(t, want.Attempt, got.Attempt)
	assert.True(t, want.FirstQueuedAt.Equal(got.FirstQueuedAt), "FirstQueuedAt %v != %v", want.FirstQueuedAt, got.FirstQueuedAt)
	assert.True(t, want.NextAttemptAt.Equal(got.NextAttemptAt), "NextAttemptAt %v != %v", want.NextAttemptAt, got.NextAttemptAt)
	assert.Equal(t, want.PolicyVersion, got.PolicyVersion)
	assert.Equal(t, want.State, got.State)
}
