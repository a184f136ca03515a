package hookrelaytest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// RunBatchLedger runs the tests of the optional hookrelay.BatchLedger
// ability (group commit of finished attempts), store-level and through a
// running worker. It skips when the harness's Ledger does not implement it.
func RunBatchLedger(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()
	batchLedger := func(t *testing.T) (Harness, hookrelay.BatchLedger) {
		h := newHarness(t)
		bl, ok := h.Ledger.(hookrelay.BatchLedger)
		if !ok {
			t.Skipf("%T does not implement hookrelay.BatchLedger", h.Ledger)
		}
		return h, bl
	}

	t.Run("EachWriteIsFencedByItsOwnLease", func(t *testing.T) {
		h, bl := batchLedger(t)
		a, b, c := newDelivery("evt_a", "dest_1", base), newDelivery("evt_b", "dest_1", base), newDelivery("evt_c", "dest_1", base)
		seed(t, h, c)
		first := claimDue(t, h, base, 1)
		require.Len(t, first, 1)
		stale := first[0]
		// c's lease expires and another worker takes it over, with a and b:
		// the first holder of c is stale.
		seed(t, h, a, b)
		later := base.Add(leaseFor)
		claims := claimDue(t, h, later, 3)
		require.Len(t, claims, 3)
		byID := claimsByID(claims)
		ca, cb, fresh := byID[a.ID], byID[b.ID], byID[c.ID]
		require.Equal(t, c.ID, fresh.Delivery.ID, "the expired lease is claimed again")

		at := later.Add(time.Second)
		next := at.Add(time.Minute)
		attB := attemptFor(cb, hookrelay.KindRetryable, at)
		attB.NextAttemptAt = next
		errs, err := bl.RecordBatch(ctx, []hookrelay.LedgerWrite{
			{Delivered: &hookrelay.MarkDeliveredParams{ID: a.ID, Lease: ca.Lease, Attempt: attemptFor(ca, hookrelay.KindDelivered, at), Now: at}},
			{Retry: &hookrelay.RecordRetryParams{ID: b.ID, Lease: cb.Lease, Attempt: attB, NextAttempt: 2, NextAttemptAt: next, Now: at}},
			{Delivered: &hookrelay.MarkDeliveredParams{ID: c.ID, Lease: stale.Lease, Attempt: attemptFor(stale, hookrelay.KindDelivered, at), Now: at}},
		})
		require.NoError(t, err, "the batch commits")
		require.Len(t, errs, 3, "one result per write")
		assert.NoError(t, errs[0])
		assert.NoError(t, errs[1])
		assert.ErrorIs(t, errs[2], hookrelay.ErrLeaseLost, "the stale holder's write is refused, the rest commit")

		got, err := h.Ledger.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StateDelivered, got.State)
		got, err = h.Ledger.Get(ctx, b.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StatePending, got.State)
		assert.Equal(t, 2, got.Attempt)
		assert.True(t, got.NextAttemptAt.Equal(next))
		got, err = h.Ledger.Get(ctx, c.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StatePending, got.State, "the newer attempt is untouched")
		atts, err := h.Ledger.Attempts(ctx, c.ID)
		require.NoError(t, err)
		assert.Empty(t, atts, "no attempt row from the stale holder")
		atts, err = h.Ledger.Attempts(ctx, a.ID)
		require.NoError(t, err)
		assert.Len(t, atts, 1)

		// The batch ended a's and b's leases like the single writes do: b
		// is claimable at its retry time, and fresh's holder still writes.
		require.NoError(t, deliver(t, h, fresh, at))
		assert.Equal(t, []string{b.ID}, ids(claimDue(t, h, next, 10)))
	})

	t.Run("ManyDeliveredWritesAreEachJudgedAndStoredAsSingleWrites", func(t *testing.T) {
		h, bl := batchLedger(t)
		var ds []hookrelay.Delivery
		for i := range 5 {
			ds = append(ds, newDelivery(fmt.Sprintf("evt_many_%d", i), "dest_1", base))
		}
		seed(t, h, ds[4])
		stale := claimDue(t, h, base, 1)
		require.Len(t, stale, 1)
		seed(t, h, ds[:4]...)
		later := base.Add(leaseFor)
		claims := claimDue(t, h, later, 5)
		require.Len(t, claims, 5)
		byID := claimsByID(claims)
		at := later.Add(time.Second)
		require.NoError(t, deliver(t, h, byID[ds[3].ID], at)) // already delivered: a repeat is a no-op
		written := make([]hookrelay.Attempt, 3)
		for i := range written {
			written[i] = hookrelay.Attempt{
				DeliveryID: ds[i].ID, Number: byID[ds[i].ID].Delivery.Attempt, StartedAt: at, FinishedAt: at.Add(time.Duration(i+1) * time.Millisecond),
				Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 200 + i, Detail: fmt.Sprintf("ok %d", i),
			}
		}
		missing := hookrelay.Claim{Delivery: newDelivery("evt_never_created", "dest_1", base), Lease: byID[ds[0].ID].Lease}
		// Recorded when each attempt finished (as a worker records them),
		// but the second at the batch's time, before it finished: a store
		// may keep the two kinds apart (hooksql keeps a worker's delivering
		// attempt in the record's row); each reads back the same.
		writes := []hookrelay.LedgerWrite{
			{Delivered: &hookrelay.MarkDeliveredParams{ID: ds[0].ID, Lease: byID[ds[0].ID].Lease, Attempt: written[0], Now: written[0].FinishedAt}},
			{Delivered: &hookrelay.MarkDeliveredParams{ID: ds[4].ID, Lease: stale[0].Lease, Attempt: attemptFor(stale[0], hookrelay.KindDelivered, at), Now: at}},
			{Delivered: &hookrelay.MarkDeliveredParams{ID: ds[1].ID, Lease: byID[ds[1].ID].Lease, Attempt: written[1], Now: at}},
			{Delivered: &hookrelay.MarkDeliveredParams{ID: missing.Delivery.ID, Lease: missing.Lease, Attempt: attemptFor(missing, hookrelay.KindDelivered, at), Now: at}},
			{Delivered: &hookrelay.MarkDeliveredParams{ID: ds[3].ID, Lease: byID[ds[3].ID].Lease, Attempt: attemptFor(byID[ds[3].ID], hookrelay.KindDelivered, at), Now: at}},
			{Delivered: &hookrelay.MarkDeliveredParams{ID: ds[2].ID, Lease: byID[ds[2].ID].Lease, Attempt: written[2], Now: written[2].FinishedAt}},
		}
		errs, err := bl.RecordBatch(ctx, writes)
		require.NoError(t, err, "the batch commits")
		require.Len(t, errs, len(writes), "one result per write, in order")
		assert.NoError(t, errs[0])
		assert.ErrorIs(t, errs[1], hookrelay.ErrLeaseLost, "the stale holder is refused")
		assert.NoError(t, errs[2])
		assert.ErrorIs(t, errs[3], hookrelay.ErrNotFound, "a record that does not exist is refused alone")
		assert.NoError(t, errs[4], "marking a delivered record again is a no-op")
		assert.NoError(t, errs[5])
		for i := range written {
			got, err := h.Ledger.Get(ctx, ds[i].ID)
			require.NoError(t, err)
			assert.Equal(t, hookrelay.StateDelivered, got.State)
			atts, err := h.Ledger.Attempts(ctx, ds[i].ID)
			require.NoError(t, err)
			require.Len(t, atts, 1, "one attempt per delivered write")
			assertSameAttempt(t, written[i], atts[0], "the attempt is the write's own")
		}
		got, err := h.Ledger.Get(ctx, ds[4].ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StatePending, got.State, "the newer holder's delivery is untouched")
		atts, err := h.Ledger.Attempts(ctx, ds[4].ID)
		require.NoError(t, err)
		assert.Empty(t, atts, "no attempt row from the stale holder")
		atts, err = h.Ledger.Attempts(ctx, ds[3].ID)
		require.NoError(t, err)
		assert.Len(t, atts, 1, "the repeated write stored no second attempt")
	})

	t.Run("DeadLettersAndRepeatsBehaveAsSingleWrites", func(t *testing.T) {
		h, bl := batchLedger(t)
		a, b := newDelivery("evt_a", "dest_1", base), newDelivery("evt_b", "dest_1", base)
		seed(t, h, a, b)
		claims := claimDue(t, h, base, 2)
		require.Len(t, claims, 2)
		at := base.Add(time.Second)
		ca, cb := claims[0], claims[1]
		require.NoError(t, deliver(t, h, ca, at))
		errs, err := bl.RecordBatch(ctx, []hookrelay.LedgerWrite{
			{Delivered: &hookrelay.MarkDeliveredParams{ID: ca.Delivery.ID, Lease: ca.Lease, Attempt: attemptFor(ca, hookrelay.KindDelivered, at), Now: at}},
			{DeadLetter: &hookrelay.RecordDeadLetterParams{ID: cb.Delivery.ID, Lease: cb.Lease, Reason: hookrelay.ReasonWindowExpired, Now: at}},
		})
		require.NoError(t, err)
		require.Len(t, errs, 2)
		assert.NoError(t, errs[0], "marking a delivered record again is a no-op, as MarkDelivered is")
		assert.NoError(t, errs[1])
		got, err := h.Ledger.Get(ctx, cb.Delivery.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StateDead, got.State)
		assert.Equal(t, hookrelay.ReasonWindowExpired, got.LastReason)
		atts, err := h.Ledger.Attempts(ctx, ca.Delivery.ID)
		require.NoError(t, err)
		assert.Len(t, atts, 1, "the repeated write stored no second attempt")
	})

	t.Run("TwoWritesToOneDeliveryAreJudgedInOrder", func(t *testing.T) {
		// The second write sees the record as the first left it, as two
		// single writes in that order would: the retry ends the lease, so
		// the MarkDelivered after it under the same lease is refused.
		h, bl := batchLedger(t)
		a, b := newDelivery("evt_a", "dest_1", base), newDelivery("evt_b", "dest_2", base)
		seed(t, h, a, b)
		claims := claimDue(t, h, base, 2)
		require.Len(t, claims, 2)
		byID := claimsByID(claims)
		ca, cb := byID[a.ID], byID[b.ID]
		at := base.Add(time.Second)
		next := at.Add(time.Minute)
		attA := attemptFor(ca, hookrelay.KindRetryable, at)
		attA.NextAttemptAt = next
		errs, err := bl.RecordBatch(ctx, []hookrelay.LedgerWrite{
			{Retry: &hookrelay.RecordRetryParams{ID: a.ID, Lease: ca.Lease, Attempt: attA, NextAttempt: 2, NextAttemptAt: next, Now: at}},
			{Delivered: &hookrelay.MarkDeliveredParams{ID: b.ID, Lease: cb.Lease, Attempt: attemptFor(cb, hookrelay.KindDelivered, at), Now: at}},
			{Delivered: &hookrelay.MarkDeliveredParams{ID: a.ID, Lease: ca.Lease, Attempt: attemptFor(ca, hookrelay.KindDelivered, at), Now: at}},
			{Delivered: &hookrelay.MarkDeliveredParams{ID: b.ID, Lease: cb.Lease, Attempt: attemptFor(cb, hookrelay.KindDelivered, at), Now: at}},
		})
		require.NoError(t, err, "the batch commits")
		require.Len(t, errs, 4, "one result per write")
		assert.NoError(t, errs[0])
		assert.NoError(t, errs[1])
		assert.ErrorIs(t, errs[2], hookrelay.ErrLeaseLost, "the retry ended the lease this write holds")
		assert.NoError(t, errs[3], "marking a delivered record again is a no-op, as MarkDelivered is")

		got, err := h.Ledger.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StatePending, got.State, "the retry stands")
		assert.Equal(t, 2, got.Attempt)
		atts, err := h.Ledger.Attempts(ctx, a.ID)
		require.NoError(t, err)
		assert.Len(t, atts, 1, "the refused write stored no attempt")
		got, err = h.Ledger.Get(ctx, b.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StateDelivered, got.State)
		atts, err = h.Ledger.Attempts(ctx, b.ID)
		require.NoError(t, err)
		assert.Len(t, atts, 1, "the repeated write stored no second attempt")
	})

	t.Run("AFailedBatchWritesNothingAndEveryDeliveryComesBack", func(t *testing.T) {
		h, bl := batchLedger(t)
		a, b := newDelivery("evt_a", "dest_1", base), newDelivery("evt_b", "dest_1", base)
		seed(t, h, a, b)
		claims := claimDue(t, h, base, 2)
		require.Len(t, claims, 2)
		at := base.Add(time.Second)
		// A batch that cannot commit (here: its context is gone, as when
		// the process dies mid-batch) leaves no trace.
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		errs, err := bl.RecordBatch(cancelled, []hookrelay.LedgerWrite{
			{Delivered: &hookrelay.MarkDeliveredParams{ID: claims[0].Delivery.ID, Lease: claims[0].Lease, Attempt: attemptFor(claims[0], hookrelay.KindDelivered, at), Now: at}},
			{Delivered: &hookrelay.MarkDeliveredParams{ID: claims[1].Delivery.ID, Lease: claims[1].Lease, Attempt: attemptFor(claims[1], hookrelay.KindDelivered, at), Now: at}},
		})
		require.Error(t, err)
		assert.Nil(t, errs, "no per-write results when nothing committed")
		for _, cl := range claims {
			got, err := h.Ledger.Get(ctx, cl.Delivery.ID)
			require.NoError(t, err)
			assert.Equal(t, hookrelay.StatePending, got.State)
			atts, err := h.Ledger.Attempts(ctx, cl.Delivery.ID)
			require.NoError(t, err)
			assert.Empty(t, atts)
		}
		assert.ElementsMatch(t, []string{a.ID, b.ID}, ids(claimDue(t, h, base.Add(leaseFor), 10)),
			"both are claimable again once their leases expire")
	})

	t.Run("WorkerReportsDeliveredOnlyAfterItsBatchCommitted", func(t *testing.T) {
		h, bl := batchLedger(t)
		gate := &gatedBatch{BatchLedger: bl, open: make(chan struct{}), entered: make(chan struct{}, 16)}
		c, events, rec, want := batchWorker(t, h, gate, 3)
		require.NoError(t, c.Start(ctx))
		waitFor(t, gate.entered, "a batch reached the ledger")
		assert.NotEmpty(t, rec.Requests(), "sent")
		assert.Empty(t, events.of(hookrelay.EventDelivered), "nothing is reported delivered while its batch has not committed")
		for _, id := range want {
			got, err := h.Ledger.Get(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, hookrelay.StatePending, got.State)
		}
		close(gate.open)
		require.Eventually(t, func() bool { return len(events.of(hookrelay.EventDelivered)) == 3 }, 10*time.Second, time.Millisecond)
		require.NoError(t, c.Stop(ctx))
		for _, id := range want {
			got, err := h.Ledger.Get(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, hookrelay.StateDelivered, got.State)
		}
	})

	t.Run("ACrashBeforeTheBatchCommitsLeavesEveryDeliveryClaimable", func(t *testing.T) {
		h, bl := batchLedger(t)
		crash := &crashingBatch{BatchLedger: bl}
		c, events, rec, want := batchWorker(t, h, crash, 4)
		require.NoError(t, c.Start(ctx))
		require.Eventually(t, func() bool { return len(events.of(hookrelay.EventWorkerError)) >= 4 }, 10*time.Second, time.Millisecond,
			"every attempt reports its failed write")
		require.NoError(t, c.StopAndCancel(ctx))
		assert.Empty(t, events.of(hookrelay.EventDelivered), "nothing was reported delivered")
		assert.Len(t, rec.Requests(), 4, "each was sent once")
		got := claimDue(t, h, base.Add(leaseFor), 10)
		assert.ElementsMatch(t, want, ids(got), "every delivery is claimable again once its lease expires")
		for _, cl := range got {
			atts, err := h.Ledger.Attempts(ctx, cl.Delivery.ID)
			require.NoError(t, err)
			assert.Empty(t, atts, "no attempt of the failed batch was stored")
		}
	})

	t.Run("StopAndCancelFlushesFinishedAttemptsAndReleasesTheRest", func(t *testing.T) {
		h, _ := batchLedger(t)
		events := &eventLog{}
		clk := clock.NewMock()
		clk.Set(base)
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "fast", TenantID: "tenant_a", URL: "https://fast.example/webhooks"}))
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "slow", TenantID: "tenant_a", URL: "https://slow.example/webhooks"}))
		started := make(chan struct{}, 8)
		sender := hookrelay.SenderFunc(func(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
			if p.Destination.ID == "fast" {
				return hookrelay.Delivered(204)
			}
			started <- struct{}{}
			<-ctx.Done() // the slow recipient answers only when we give up
			return hookrelay.Unknown(hookrelay.ReasonTimeout)
		})
		c, err := hookrelay.New(hookrelay.Config{
			Queue: h.Queue, Ledger: h.Ledger, Destinations: h.Destinations, Sender: sender, Clock: clk,
			Random: FixedRandom(0.5), LeaseFor: leaseFor, Observer: events,
		})
		require.NoError(t, err)
		ids := map[string]string{}
		for _, dest := range []string{"fast", "fast", "slow", "slow"} {
			ev := fmt.Sprintf("evt_%d", len(ids))
			r, err := c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: ev, TenantID: "tenant_a", DestinationID: dest,
				EventType: "lease.payment_recorded", Payload: []byte(`{}`)})
			require.NoError(t, err)
			ids[r.ID] = dest
		}
		require.NoError(t, c.Start(ctx))
		waitFor(t, started, "a slow send started")
		waitFor(t, started, "both slow sends started")
		require.Eventually(t, func() bool { return len(events.of(hookrelay.EventDelivered)) == 2 }, 10*time.Second, time.Millisecond)
		require.NoError(t, c.StopAndCancel(ctx))
		for id, dest := range ids {
			got, err := h.Ledger.Get(ctx, id)
			require.NoError(t, err)
			if dest == "fast" {
				assert.Equal(t, hookrelay.StateDelivered, got.State, "a finished attempt's write is flushed")
				continue
			}
			assert.Equal(t, hookrelay.StatePending, got.State)
			assert.Equal(t, 1, got.Attempt, "a cancelled attempt spends nothing")
		}
		assert.Len(t, claimDue(t, h, clk.Now(), 10), 2, "the cancelled ones are claimable again at once")
	})
}

// RunClaimsByDestinationRoom runs the tests of the optional
// hookrelay.ClaimsByDestinationRoom ability. It skips when the harness's
// Queue does not implement it.
func RunClaimsByDestinationRoom(t *testing.T, newHarness NewHarness) {
	roomQueue := func(t *testing.T) Harness {
		h := newHarness(t)
		if _, ok := h.Queue.(hookrelay.ClaimsByDestinationRoom); !ok {
			t.Skipf("%T does not implement hookrelay.ClaimsByDestinationRoom", h.Queue)
		}
		return h
	}
	claimRooms := func(t *testing.T, h Harness, limit, def int, rooms map[string]int) []hookrelay.Claim {
		t.Helper()
		cs, err := h.Queue.Claim(context.Background(), hookrelay.ClaimParams{
			Now: base.Add(time.Hour), Limit: limit, LeaseFor: leaseFor, Holder: "test",
			DestinationRoom: rooms, DefaultDestinationRoom: def,
		})
		require.NoError(t, err)
		return cs
	}
	// seedBacklog makes n due deliveries to each destination, the oldest
	// all to the first one, so a claim that ignored rooms would take only
	// the first destination's.
	seedBacklog := func(t *testing.T, h Harness, n int, dests ...string) {
		t.Helper()
		var ds []hookrelay.Delivery
		for i, dest := range dests {
			for k := range n {
				ds = append(ds, newDelivery(fmt.Sprintf("evt_%s_%d", dest, k), dest, base.Add(time.Duration(i*n+k)*time.Millisecond)))
			}
		}
		seed(t, h, ds...)
	}
	perDest := func(cs []hookrelay.Claim) map[string]int {
		out := map[string]int{}
		for _, c := range cs {
			out[c.Delivery.DestinationID]++
		}
		return out
	}

	t.Run("OneClaimFillsEveryDestinationsRoom", func(t *testing.T) {
		h := roomQueue(t)
		seedBacklog(t, h, 10, "dest_a", "dest_b", "dest_c")
		cs := claimRooms(t, h, 50, 2, map[string]int{"dest_b": 5})
		assert.Equal(t, map[string]int{"dest_a": 2, "dest_b": 5, "dest_c": 2}, perDest(cs))
		for i := 1; i < len(cs); i++ {
			assert.False(t, cs[i].Delivery.NextAttemptAt.Before(cs[i-1].Delivery.NextAttemptAt), "oldest first")
		}
		// Each destination gave its oldest.
		for _, c := range cs {
			assert.Contains(t, []string{"evt_dest_a_0", "evt_dest_a_1", "evt_dest_b_0", "evt_dest_b_1", "evt_dest_b_2",
				"evt_dest_b_3", "evt_dest_b_4", "evt_dest_c_0", "evt_dest_c_1"}, c.Delivery.EventID)
		}
	})

	t.Run("ADestinationPastItsRoomAtTheHeadDoesNotHideTheNext", func(t *testing.T) {
		// The first Limit due deliveries are all dest_a's; dest_b's come
		// right after them. One claim still gives dest_b its room.
		h := roomQueue(t)
		seedBacklog(t, h, 6, "dest_a", "dest_b")
		cs := claimRooms(t, h, 6, 2, nil)
		assert.Equal(t, map[string]int{"dest_a": 2, "dest_b": 2}, perDest(cs))
	})

	t.Run("ARoomOfZeroClaimsNothingAndTheLimitStillHolds", func(t *testing.T) {
		h := roomQueue(t)
		seedBacklog(t, h, 5, "dest_a", "dest_b", "dest_c")
		cs := claimRooms(t, h, 4, 3, map[string]int{"dest_a": 0})
		assert.Len(t, cs, 4)
		assert.Zero(t, perDest(cs)["dest_a"], "a destination with no room gives nothing")
		assert.LessOrEqual(t, perDest(cs)["dest_b"], 3)
	})

	t.Run("NoDefaultRoomLeavesOtherDestinationsUncapped", func(t *testing.T) {
		h := roomQueue(t)
		seedBacklog(t, h, 6, "dest_a", "dest_b")
		cs := claimRooms(t, h, 20, 0, map[string]int{"dest_a": 1})
		assert.Equal(t, map[string]int{"dest_a": 1, "dest_b": 6}, perDest(cs))
	})
}

// batchWorker is a client over h with ledger as its Ledger (a wrapper of
// h's BatchLedger), a mock clock and a recording recipient, with n
// deliveries to dest_1 enqueued; it returns their IDs.
func batchWorker(t *testing.T, h Harness, ledger hookrelay.BatchLedger, n int) (*hookrelay.Client, *eventLog, *Recipient, []string) {
	t.Helper()
	ctx := context.Background()
	events := &eventLog{}
	rec := &Recipient{}
	clk := clock.NewMock()
	clk.Set(base)
	require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_1", TenantID: "tenant_a", URL: "https://accounting.example/webhooks"}))
	c, err := hookrelay.New(hookrelay.Config{
		Queue: h.Queue, Ledger: ledger, Destinations: h.Destinations, Sender: rec, Clock: clk,
		Random: FixedRandom(0.5), LeaseFor: leaseFor, Observer: events,
	})
	require.NoError(t, err)
	var want []string
	for i := range n {
		r, err := c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: fmt.Sprintf("evt_%d", i), TenantID: "tenant_a",
			DestinationID: "dest_1", EventType: "lease.payment_recorded", Payload: []byte(`{}`)})
		require.NoError(t, err)
		want = append(want, r.ID)
	}
	return c, events, rec, want
}

// gatedBatch holds every RecordBatch until open is closed.
type gatedBatch struct {
	hookrelay.BatchLedger
	open    chan struct{}
	entered chan struct{}
}

func (g *gatedBatch) RecordBatch(ctx context.Context, w []hookrelay.LedgerWrite) ([]error, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.open
	return g.BatchLedger.RecordBatch(ctx, w)
}

// crashingBatch fails every batch before it reaches the store, as a process
// that dies before its batch commits.
type crashingBatch struct {
	hookrelay.BatchLedger
	mu    sync.Mutex
	calls int
}

func (c *crashingBatch) RecordBatch(context.Context, []hookrelay.LedgerWrite) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return nil, fmt.Errorf("%w before the batch committed", errCrash)
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second): // a hang, not a speed check
		t.Fatalf("timed out waiting until %s", what)
	}
}

// claimsByID indexes claims by their delivery's ID.
func claimsByID(claims []hookrelay.Claim) map[string]hookrelay.Claim {
	byID := make(map[string]hookrelay.Claim, len(claims))
	for _, cl := range claims {
		byID[cl.Delivery.ID] = cl
	}
	return byID
}
