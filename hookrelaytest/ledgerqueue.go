package hookrelaytest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RunLedgerQueue checks the two promises of the optional
// hookrelay.LedgerQueue ability, on which the worker's fast path relies: a
// claim carries the ledger's record as it stands, and each ledger write
// ends the writer's lease, so no queue transition has to follow. It skips
// when the harness's Queue and Ledger are not one LedgerQueue.
func RunLedgerQueue(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()
	ledgerQueue := func(t *testing.T) Harness {
		h := newHarness(t)
		if !isLedgerQueue(h) {
			t.Skipf("the harness's Queue (%T) and Ledger (%T) are not one hookrelay.LedgerQueue", h.Queue, h.Ledger)
		}
		return h
	}

	t.Run("RecordRetryAloneMakesTheRetryDueAtItsTime", func(t *testing.T) {
		h := ledgerQueue(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		p := recordRetry(c, c.Lease, base)
		require.NoError(t, h.Ledger.RecordRetry(ctx, p))
		assert.Empty(t, claim(t, h.Queue, p.NextAttemptAt.Add(-time.Millisecond), 1))
		got := claim(t, h.Queue, p.NextAttemptAt, 1)
		require.Len(t, got, 1, "claimable at its time, before the lease (%v) would have expired, with no RetryAt", c.Lease.ExpiresAt)

		want, err := h.Ledger.Get(ctx, d.ID)
		require.NoError(t, err)
		assertSameDelivery(t, want, got[0].Delivery)
		assert.Equal(t, want.LastOutcome, got[0].Delivery.LastOutcome, "the claim carries the record as the ledger holds it")
		assert.Equal(t, want.LastReason, got[0].Delivery.LastReason)
		assert.True(t, want.UpdatedAt.Equal(got[0].Delivery.UpdatedAt))
		assert.Equal(t, 2, got[0].Delivery.Attempt)
	})

	t.Run("MarkDeliveredAndRecordDeadLetterAloneEndTheWork", func(t *testing.T) {
		h := ledgerQueue(t)
		done := newDelivery("evt_done", "dest_1", base)
		dead := newDelivery("evt_dead", "dest_1", base)
		seed(t, h, done, dead)
		cs := claim(t, h.Queue, base, 2)
		require.Len(t, cs, 2)
		for _, c := range cs {
			if c.Delivery.ID == done.ID {
				require.NoError(t, h.Ledger.MarkDelivered(ctx, markDelivered(c, c.Lease, base)))
			} else {
				require.NoError(t, h.Ledger.RecordDeadLetter(ctx, recordDeadLetter(c, c.Lease, base)))
			}
		}
		for _, at := range []time.Time{base, base.Add(leaseFor), base.Add(24 * time.Hour)} {
			assert.Empty(t, claim(t, h.Queue, at, 10), "nothing comes back at %v, with no Acknowledge or DeadLetter", at)
		}
	})

	t.Run("AFreshClaimIsPending", func(t *testing.T) {
		h := ledgerQueue(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		require.NoError(t, h.Ledger.MarkDelivered(ctx, markDelivered(c, c.Lease, base)))
		// The worker skips WasDelivered for a fresh claim: a store must
		// never hand out a record the ledger holds as delivered.
		seed(t, h, d)
		assert.Empty(t, claim(t, h.Queue, base.Add(leaseFor), 10))
	})
}
