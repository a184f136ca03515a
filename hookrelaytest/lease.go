package hookrelaytest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// RunLeaseLedger runs the tests of the optional hookrelay.LeaseLedger
// ability (ledger-side leases for broker queues). It skips when the
// harness's Ledger does not implement it.
func RunLeaseLedger(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()
	leaseLedger := func(t *testing.T) (Harness, hookrelay.LeaseLedger) {
		h := newHarness(t)
		ll, ok := hookrelay.As[hookrelay.LeaseLedger](h.Ledger)
		if !ok {
			t.Skipf("%T does not implement hookrelay.LeaseLedger", h.Ledger)
		}
		return h, ll
	}
	acquire := func(ll hookrelay.LeaseLedger, id string, now time.Time) (hookrelay.Claim, error) {
		return ll.AcquireLease(ctx, hookrelay.AcquireLeaseParams{ID: id, Holder: "broker-worker", Now: now, LeaseFor: leaseFor})
	}

	t.Run("LeasesAPendingDueDeliveryOnce", func(t *testing.T) {
		h, ll := leaseLedger(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c, err := acquire(ll, d.ID, base)
		require.NoError(t, err)
		assertSameDelivery(t, d, c.Delivery)
		assert.Positive(t, c.Lease.Token)
		assert.True(t, c.Lease.ExpiresAt.Equal(base.Add(leaseFor)))

		_, err = acquire(ll, d.ID, base.Add(time.Second))
		assert.ErrorIs(t, err, hookrelay.ErrLeaseLost, "a live lease is not handed out twice")
		assert.Empty(t, claim(t, h.Queue, base.Add(time.Second), 10), "nor claimed through the queue")

		again, err := acquire(ll, d.ID, base.Add(leaseFor))
		require.NoError(t, err, "an expired lease can be taken over")
		assert.Greater(t, again.Lease.Token, c.Lease.Token)
		assert.ErrorIs(t, deliver(t, h, c, base.Add(leaseFor)), hookrelay.ErrLeaseLost, "the old holder is fenced off")
		require.NoError(t, deliver(t, h, again, base.Add(leaseFor)))
	})

	t.Run("RefusesWhatMayNotRun", func(t *testing.T) {
		h, ll := leaseLedger(t)
		_, err := acquire(ll, "whd_missing", base)
		assert.ErrorIs(t, err, hookrelay.ErrNotFound)

		done := newDelivery("evt_done", "dest_1", base)
		dead := newDelivery("evt_dead", "dest_1", base)
		later := newDelivery("evt_later", "dest_1", base)
		seed(t, h, done, dead, later)
		c, err := acquire(ll, done.ID, base)
		require.NoError(t, err)
		require.NoError(t, deliver(t, h, c, base))
		c, err = acquire(ll, dead.ID, base)
		require.NoError(t, err)
		require.NoError(t, kill(t, h, c, hookrelay.ReasonBadRequest, base))
		c, err = acquire(ll, later.ID, base)
		require.NoError(t, err)
		at := base.Add(90 * time.Second)
		require.NoError(t, retry(t, h, c, base, at))

		_, err = acquire(ll, done.ID, base.Add(time.Hour))
		assert.ErrorIs(t, err, hookrelay.ErrInvalidState, "a delivered record is never run again")
		_, err = acquire(ll, dead.ID, base.Add(time.Hour))
		assert.ErrorIs(t, err, hookrelay.ErrInvalidState, "a dead record only returns through a redrive")
		_, err = acquire(ll, later.ID, base.Add(time.Minute))
		var nd *hookrelay.NotDueError
		require.ErrorAs(t, err, &nd, "a message that arrives early is told when to come back")
		assert.ErrorIs(t, err, hookrelay.ErrNotDue)
		assert.True(t, nd.At.Equal(at), "due at %v, got %v", at, nd.At)
		c, err = acquire(ll, later.ID, at)
		require.NoError(t, err)
		assert.Equal(t, 2, c.Delivery.Attempt, "the ledger's record wins over the message's copy")
	})

	t.Run("ABatchJudgesEachEntryAsAcquireLeaseWould", func(t *testing.T) {
		h, ll := leaseLedger(t)
		bl, ok := hookrelay.As[hookrelay.LeaseBatchLedger](h.Ledger)
		if !ok {
			t.Skipf("%T does not implement hookrelay.LeaseBatchLedger", h.Ledger)
		}
		first, second := newDelivery("evt_first", "dest_1", base), newDelivery("evt_second", "dest_2", base)
		done, later, held := newDelivery("evt_done", "dest_1", base), newDelivery("evt_later", "dest_1", base), newDelivery("evt_held", "dest_1", base)
		seed(t, h, first, second, done, later, held)
		c, err := acquire(ll, done.ID, base)
		require.NoError(t, err)
		require.NoError(t, deliver(t, h, c, base))
		c, err = acquire(ll, later.ID, base)
		require.NoError(t, err)
		at := base.Add(90 * time.Second)
		require.NoError(t, retry(t, h, c, base, at))
		heldBy, err := acquire(ll, held.ID, base)
		require.NoError(t, err)

		now := base.Add(time.Second)
		ids := []string{first.ID, "whd_missing", done.ID, later.ID, held.ID, first.ID, second.ID}
		params := make([]hookrelay.AcquireLeaseParams, len(ids))
		for i, id := range ids {
			params[i] = hookrelay.AcquireLeaseParams{ID: id, Holder: "batch-worker", Now: now, LeaseFor: leaseFor}
		}
		claims, errs, err := bl.AcquireLeases(ctx, params)
		require.NoError(t, err)
		require.Len(t, claims, len(ids))
		require.Len(t, errs, len(ids))
		require.NoError(t, errs[0])
		assertSameDelivery(t, first, claims[0].Delivery)
		assert.Equal(t, "batch-worker", claims[0].Lease.Holder)
		assert.True(t, claims[0].Lease.ExpiresAt.Equal(now.Add(leaseFor)))
		assert.ErrorIs(t, errs[1], hookrelay.ErrNotFound)
		assert.ErrorIs(t, errs[2], hookrelay.ErrInvalidState, "a delivered record is never run again")
		var nd *hookrelay.NotDueError
		require.ErrorAs(t, errs[3], &nd, "an early message is told when to come back")
		assert.True(t, nd.At.Equal(at), "due at %v, got %v", at, nd.At)
		assert.ErrorIs(t, errs[4], hookrelay.ErrLeaseLost, "another holder's live lease")
		assert.ErrorIs(t, errs[5], hookrelay.ErrLeaseLost, "a repeated ID finds the first entry's lease")
		require.NoError(t, errs[6])
		assertSameDelivery(t, second, claims[6].Delivery)

		// The leases granted are real: nobody else gets them, and they fence.
		_, err = acquire(ll, second.ID, now)
		assert.ErrorIs(t, err, hookrelay.ErrLeaseLost)
		assert.Empty(t, claim(t, h.Queue, now, 10), "nor does the queue hand them out")
		require.NoError(t, deliver(t, h, claims[0], now))
		require.NoError(t, deliver(t, h, claims[6], now))
		require.NoError(t, deliver(t, h, heldBy, now), "the other holder's lease was left alone")
	})

	t.Run("TheLedgerWriteEndsTheLease", func(t *testing.T) {
		h, ll := leaseLedger(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c, err := acquire(ll, d.ID, base)
		require.NoError(t, err)
		at := base.Add(500 * time.Millisecond)
		require.NoError(t, h.Ledger.RecordRetry(ctx, hookrelay.RecordRetryParams{
			ID: d.ID, Lease: c.Lease, Attempt: attemptFor(c, hookrelay.KindRetryable, base),
			NextAttempt: 2, NextAttemptAt: at, Now: base,
		}))
		_, err = acquire(ll, d.ID, at.Add(-time.Millisecond))
		assert.ErrorIs(t, err, hookrelay.ErrNotDue, "the retry is not due before its time")

		release := func(l hookrelay.Lease) error {
			return ll.ReleaseLease(ctx, hookrelay.ReleaseLeaseParams{ID: d.ID, Lease: l, Now: base})
		}
		require.NoError(t, release(c.Lease), "releasing a lease the ledger write ended is a no-op")
		require.NoError(t, release(c.Lease), "releasing twice is a no-op")
		again, err := acquire(ll, d.ID, at)
		require.NoError(t, err, "due at its time, long before the old lease would have expired, even if the queue never released it")
		assert.Equal(t, 2, again.Delivery.Attempt)

		assert.ErrorIs(t, release(c.Lease), hookrelay.ErrLeaseLost, "a stale holder cannot end the new lease")
		assert.ErrorIs(t, ll.ReleaseLease(ctx, hookrelay.ReleaseLeaseParams{ID: "whd_missing", Lease: c.Lease, Now: base}), hookrelay.ErrNotFound)
		require.NoError(t, deliver(t, h, again, at), "the new holder still holds its lease")
	})

	t.Run("ReleaseAtMakesTheDeliveryDueThen", func(t *testing.T) {
		h, ll := leaseLedger(t)
		d := newDelivery("evt_1", "dest_paused", base)
		seed(t, h, d)
		c, err := acquire(ll, d.ID, base)
		require.NoError(t, err)
		at := base.Add(5 * time.Second)
		require.NoError(t, ll.ReleaseLease(ctx, hookrelay.ReleaseLeaseParams{ID: d.ID, Lease: c.Lease, At: at, Now: base}))
		_, err = acquire(ll, d.ID, at.Add(-time.Millisecond))
		var nd *hookrelay.NotDueError
		require.ErrorAs(t, err, &nd, "a released delivery is not due before At")
		assert.True(t, nd.At.Equal(at))
		again, err := acquire(ll, d.ID, at)
		require.NoError(t, err)
		assert.Equal(t, 1, again.Delivery.Attempt, "a release spends no attempt")
		as, err := h.Ledger.Attempts(ctx, d.ID)
		require.NoError(t, err)
		assert.Empty(t, as)
	})
}
