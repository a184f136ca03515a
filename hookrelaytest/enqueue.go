package hookrelaytest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// runEnqueueContract checks what Queue.Enqueue may do with a record that
// is not new: Client.Enqueue hands it every delivery of a call, created now
// or long ago, in whatever state the ledger holds it, with the fields
// Prepare built (pending, due now). The queue must never make a leased,
// delivered or dead record claimable and must take the due time from the
// ledger.
func runEnqueueContract(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()
	// again enqueues d as Client.Enqueue would on a repeat: the fresh
	// record Prepare builds, not the ledger's.
	again := func(t *testing.T, h Harness, d hookrelay.Delivery) {
		t.Helper()
		created, err := h.Ledger.Create(ctx, []hookrelay.Delivery{d})
		require.NoError(t, err)
		require.Equal(t, []bool{false}, created)
		require.NoError(t, h.Queue.Enqueue(ctx, []hookrelay.Delivery{d}), "enqueueing an existing record is harmless")
	}

	t.Run("EnqueueNeverRevivesADeadDelivery", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		require.NoError(t, kill(t, h, c, hookrelay.ReasonAuthRejected, base))
		again(t, h, d)
		assert.Empty(t, claim(t, h.Queue, base.Add(time.Hour), 10), "only a redrive brings a dead delivery back")
		got, err := h.Ledger.Get(ctx, d.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StateDead, got.State)
	})

	t.Run("EnqueueNeverResendsADeliveredDelivery", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		require.NoError(t, deliver(t, h, c, base))
		again(t, h, d)
		assert.Empty(t, claim(t, h.Queue, base.Add(time.Hour), 10), "a delivered delivery is never claimed again")
	})

	t.Run("EnqueueNeverHandsOutALeasedDeliveryTwice", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		again(t, h, d)
		assert.Empty(t, claim(t, h.Queue, base.Add(time.Second), 10), "the lease is live")
		require.NoError(t, deliver(t, h, c, base.Add(time.Second)), "and still the holder's")
	})

	t.Run("EnqueueTakesTheDueTimeFromTheLedger", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		at := base.Add(time.Hour)
		require.NoError(t, retry(t, h, c, base, at))
		again(t, h, d) // d says: attempt 1, due at base
		assert.Empty(t, claim(t, h.Queue, base.Add(time.Minute), 10), "the retry is due at %v, not at the enqueued copy's time", at)
		got := claimDue(t, h, at, 10)
		require.Len(t, got, 1)
		assert.Equal(t, 2, got[0].Delivery.Attempt, "the claim carries the ledger's record")
	})
}

// enqueueScenarios checks a repeated Client.Enqueue end to end: it reports
// Created false and never sends a delivered webhook again, revives a dead
// one or runs a leased one twice — by steps and with a running worker.
func enqueueScenarios(t *testing.T, ne func(t *testing.T, opts ...engineOption) *engine) {
	ctx := context.Background()
	script := func(d hookrelay.Delivery, _ int) RecipientAnswer {
		if d.EventID == "evt_dead" {
			return Reject(hookrelay.Permanent(hookrelay.ReasonUnprocessable).WithStatus(422))
		}
		return Accept()
	}
	reenqueue := func(e *engine, eventIDs ...string) {
		e.t.Helper()
		for _, id := range eventIDs {
			res, err := e.client.Enqueue(ctx, hookrelay.EnqueueParams{
				EventID: id, TenantID: "tenant_a", DestinationID: "dest_1",
				EventType: "lease.payment_recorded", Payload: []byte(`{"payment_id":"pay_7319"}`),
				Scope: map[string]string{"property": "prop_204"},
			})
			require.NoError(e.t, err)
			assert.False(e.t, res.Created, "%s was enqueued before", id)
		}
	}

	t.Run("RepeatedEnqueueNeverResendsOrRevives", func(t *testing.T) {
		e := ne(t)
		e.rec.Script = script
		done, dead := e.enqueue("evt_done", "dest_1"), e.enqueue("evt_dead", "dest_1")
		require.Equal(t, hookrelay.StateDelivered, e.run(done).State)
		require.Equal(t, hookrelay.StateDead, e.run(dead).State)
		reenqueue(e, "evt_done", "evt_dead")
		e.clock.Add(time.Hour)
		n, errs := e.step()
		assert.Empty(t, errs)
		assert.Zero(t, n, "nothing to claim after the repeats")
		assert.Len(t, e.rec.RequestsFor(done), 1, "the delivered webhook is not sent again")
		assert.Len(t, e.rec.RequestsFor(dead), 1, "the dead delivery is not revived without a redrive")
		assert.Equal(t, hookrelay.StateDead, e.get(dead).State)
	})

	t.Run("RepeatedEnqueueOfALeasedDeliverySendsOnce", func(t *testing.T) {
		e := ne(t)
		id := e.enqueue("evt_1", "dest_1")
		held, err := e.h.Queue.Claim(ctx, hookrelay.ClaimParams{Now: e.clock.Now(), Limit: 1, LeaseFor: leaseFor, Holder: "first"})
		require.NoError(t, err)
		require.Len(t, held, 1)
		reenqueue(e, "evt_1")
		n, _ := e.step()
		assert.Zero(t, n, "the leased delivery is not claimed a second time")
		require.NoError(t, e.client.Process(ctx, held[0]))
		reenqueue(e, "evt_1")
		e.clock.Add(time.Hour)
		n, _ = e.step()
		assert.Zero(t, n)
		assert.Len(t, e.rec.RequestsFor(id), 1, "one send")
		assert.Equal(t, hookrelay.StateDelivered, e.get(id).State)
	})

	t.Run("RepeatedEnqueueThroughARunningWorker", func(t *testing.T) {
		e := ne(t)
		e.rec.Script = script
		done, dead := e.enqueue("evt_done", "dest_1"), e.enqueue("evt_dead", "dest_1")
		require.NoError(t, e.client.Start(ctx))
		stopped := false
		defer func() {
			if !stopped {
				require.NoError(t, e.client.Stop(ctx))
			}
		}()
		settled := func(id string, want hookrelay.State) func() bool {
			return func() bool {
				d, err := e.h.Ledger.Get(ctx, id)
				return err == nil && d.State == want
			}
		}
		require.Eventually(t, settled(done, hookrelay.StateDelivered), 20*time.Second, time.Millisecond)
		require.Eventually(t, settled(dead, hookrelay.StateDead), 20*time.Second, time.Millisecond)
		reenqueue(e, "evt_done", "evt_dead")
		// A new event enqueued after the repeats is due no earlier than
		// anything they could have revived: once it is delivered and the
		// worker has drained, a revived delivery would have been sent.
		marker := e.enqueue("evt_marker", "dest_1")
		require.Eventually(t, settled(marker, hookrelay.StateDelivered), 20*time.Second, time.Millisecond)
		require.NoError(t, e.client.Stop(ctx))
		stopped = true
		assert.Len(t, e.rec.RequestsFor(done), 1, "the delivered webhook is not sent again")
		assert.Len(t, e.rec.RequestsFor(dead), 1, "the dead delivery is not revived")
		assert.Equal(t, hookrelay.StateDead, e.get(dead).State)
	})
}
