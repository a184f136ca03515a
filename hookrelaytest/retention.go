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

// settle creates one delivery at `at` and brings it, through the Ledger and
// Queue ports, to end: delivered or dead after `failures` failed attempts a
// minute apart, each attempt's time its claim's. No other delivery may be
// due meanwhile. It returns the delivery ID and the time it finished.
func settle(t *testing.T, h Harness, eventID, destID string, at time.Time, failures int, end hookrelay.State) (string, time.Time) {
	t.Helper()
	d := newDelivery(eventID, destID, at)
	seed(t, h, d)
	now := at
	for i := 0; ; i++ {
		cs := claimDue(t, h, now, 1)
		require.Len(t, cs, 1, "settle %s: one due delivery", eventID)
		c := cs[0]
		require.Equal(t, d.ID, c.Delivery.ID)
		switch {
		case i < failures:
			require.NoError(t, retry(t, h, c, now, now.Add(time.Minute)))
			now = now.Add(time.Minute)
		case end == hookrelay.StateDead:
			require.NoError(t, kill(t, h, c, hookrelay.ReasonBadRequest, now))
			return d.ID, now
		default:
			require.NoError(t, deliver(t, h, c, now))
			return d.ID, now
		}
	}
}

func historyCleaner(t *testing.T, h Harness) hookrelay.HistoryCleaner {
	t.Helper()
	hc, ok := hookrelay.As[hookrelay.HistoryCleaner](h.Ledger)
	if !ok {
		t.Skipf("%T does not implement hookrelay.HistoryCleaner (an optional ability)", h.Ledger)
	}
	return hc
}

func clean(t *testing.T, hc hookrelay.HistoryCleaner, now time.Time, policy hookrelay.RetentionPolicy, limit int) hookrelay.CleanHistoryResult {
	t.Helper()
	res, err := hc.CleanHistory(context.Background(), hookrelay.CleanHistoryParams{Now: now, Policy: policy, Limit: limit})
	require.NoError(t, err)
	return res
}

func assertGone(t *testing.T, h Harness, id, why string) {
	t.Helper()
	_, err := h.Ledger.Get(context.Background(), id)
	assert.ErrorIs(t, err, hookrelay.ErrNotFound, why)
	_, err = h.Ledger.Attempts(context.Background(), id)
	assert.ErrorIs(t, err, hookrelay.ErrNotFound, "%s: and its attempts", why)
}

func assertKept(t *testing.T, h Harness, id, why string) {
	t.Helper()
	_, err := h.Ledger.Get(context.Background(), id)
	assert.NoError(t, err, why)
}

// RunRetention runs the tests of the optional hookrelay.HistoryCleaner
// ability: what a retention policy removes, compacts and keeps, bounded
// batches, the dry run, and concurrent cleaners. It skips when the Ledger
// lacks the ability.
func RunRetention(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()
	day := 24 * time.Hour

	t.Run("OnlyDeliveredHistoryPastTheRetentionIsRemoved", func(t *testing.T) {
		h := newHarness(t)
		hc := historyCleaner(t, h)
		old, _ := settle(t, h, "evt_old", "dest_1", base, 1, hookrelay.StateDelivered)
		dead, _ := settle(t, h, "evt_dead", "dest_1", base.Add(time.Hour), 0, hookrelay.StateDead)
		recent, _ := settle(t, h, "evt_recent", "dest_1", base.Add(20*time.Hour), 0, hookrelay.StateDelivered)
		pending := newDelivery("evt_pending", "dest_1", base.Add(time.Hour))
		pending.NextAttemptAt = base.Add(90 * day)
		seed(t, h, pending)

		res := clean(t, hc, base.Add(25*time.Hour), hookrelay.RetentionPolicy{Delivered: day, AttemptDetails: day}, 100)
		assert.Equal(t, []hookrelay.HistoryCount{{DestinationID: "dest_1", State: hookrelay.StateDelivered, Removed: 1}}, res.Counts)
		assert.False(t, res.More)
		assertGone(t, h, old, "a delivered record past the retention is removed")
		assertKept(t, h, recent, "a delivered record within the retention is kept")
		assertKept(t, h, dead, "a dead record is kept without RemoveDead")
		assertKept(t, h, pending.ID, "a pending record is never removed")

		res = clean(t, hc, base.Add(365*day), hookrelay.RetentionPolicy{}, 100)
		assert.Equal(t, []hookrelay.HistoryCount{{DestinationID: "dest_1", State: hookrelay.StateDelivered, Removed: 1}}, res.Counts,
			"a zero retention removes every delivered record, and nothing else")
		assertKept(t, h, dead, "dead letters are evidence")
		assertKept(t, h, pending.ID, "pending work is never removed")
	})

	t.Run("DeadRecordsGoOnlyWhenRemoveDeadSaysSo", func(t *testing.T) {
		h := newHarness(t)
		hc := historyCleaner(t, h)
		dead, at := settle(t, h, "evt_dead", "dest_1", base, 0, hookrelay.StateDead)
		policy := hookrelay.RetentionPolicy{RemoveDead: true, Dead: 2 * day}
		res := clean(t, hc, at.Add(2*day-time.Second), policy, 100)
		assert.Empty(t, res.Counts)
		assertKept(t, h, dead, "within Dead")
		res = clean(t, hc, at.Add(2*day), policy, 100)
		assert.Equal(t, []hookrelay.HistoryCount{{DestinationID: "dest_1", State: hookrelay.StateDead, Removed: 1}}, res.Counts)
		assertGone(t, h, dead, "a dead record past Dead, with RemoveDead")
	})

	t.Run("OldAttemptDetailsAreCompactedIntoASummary", func(t *testing.T) {
		h := newHarness(t)
		hc := historyCleaner(t, h)
		id, at := settle(t, h, "evt_retried", "dest_1", base, 2, hookrelay.StateDelivered)
		dead, _ := settle(t, h, "evt_dead", "dest_1", at.Add(time.Minute), 1, hookrelay.StateDead)
		full, err := h.Ledger.Attempts(ctx, id)
		require.NoError(t, err)
		require.Len(t, full, 3)
		policy := hookrelay.RetentionPolicy{Delivered: 30 * day, AttemptDetails: day}

		res := clean(t, hc, at.Add(day-time.Second), policy, 100)
		assert.Empty(t, res.Counts, "attempts within AttemptDetails stay in full")
		sum, err := hc.AttemptSummary(ctx, id)
		require.NoError(t, err)
		assert.Zero(t, sum.Count, "nothing compacted yet")

		res = clean(t, hc, at.Add(2*day), policy, 100)
		assert.Equal(t, []hookrelay.HistoryCount{{DestinationID: "dest_1", State: hookrelay.StateDelivered, Compacted: 1}}, res.Counts)
		as, err := h.Ledger.Attempts(ctx, id)
		require.NoError(t, err, "the record is still there")
		assert.Empty(t, as, "its attempts are compacted")
		delivered, err := h.Ledger.WasDelivered(ctx, id)
		require.NoError(t, err)
		assert.True(t, delivered, "the record still answers whether it was delivered")
		sum, err = hc.AttemptSummary(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, 3, sum.Count)
		assert.True(t, sum.FirstStartedAt.Equal(full[0].StartedAt), "first attempt started %v, summary says %v", full[0].StartedAt, sum.FirstStartedAt)
		assert.True(t, sum.LastFinishedAt.Equal(full[2].FinishedAt), "last attempt finished %v, summary says %v", full[2].FinishedAt, sum.LastFinishedAt)
		assert.Equal(t, full[2].StatusCode, sum.LastStatusCode)
		assert.Equal(t, full[2].Outcome, sum.LastOutcome)
		assert.Equal(t, full[2].Reason, sum.LastReason)
		deadAttempts, err := h.Ledger.Attempts(ctx, dead)
		require.NoError(t, err)
		assert.Len(t, deadAttempts, 2, "a dead record keeps its attempts in full")

		res = clean(t, hc, at.Add(3*day), policy, 100)
		assert.Empty(t, res.Counts, "a compacted record is not compacted again")

		clean(t, hc, at.Add(31*day), policy, 100)
		assertGone(t, h, id, "removed once past Delivered")
		_, err = hc.AttemptSummary(ctx, id)
		assert.ErrorIs(t, err, hookrelay.ErrNotFound, "with its summary")
	})

	t.Run("EachCallIsABoundedBatchOldestFirst", func(t *testing.T) {
		h := newHarness(t)
		hc := historyCleaner(t, h)
		var ids []string
		for i, ev := range []string{"evt_a", "evt_b", "evt_c", "evt_d", "evt_e"} {
			id, _ := settle(t, h, ev, "dest_1", base.Add(time.Duration(i)*time.Minute), 0, hookrelay.StateDelivered)
			ids = append(ids, id)
		}
		now := base.Add(day)
		res := clean(t, hc, now, hookrelay.RetentionPolicy{}, 2)
		assert.Equal(t, []hookrelay.HistoryCount{{DestinationID: "dest_1", State: hookrelay.StateDelivered, Removed: 2}}, res.Counts)
		assert.True(t, res.More, "a full batch says there may be more")
		assertGone(t, h, ids[0], "the oldest goes first")
		assertGone(t, h, ids[1], "the oldest goes first")
		assertKept(t, h, ids[2], "beyond the batch")
		clean(t, hc, now, hookrelay.RetentionPolicy{}, 2)
		res = clean(t, hc, now, hookrelay.RetentionPolicy{}, 2)
		assert.Equal(t, []hookrelay.HistoryCount{{DestinationID: "dest_1", State: hookrelay.StateDelivered, Removed: 1}}, res.Counts)
		assert.False(t, res.More)
		assertGone(t, h, ids[4], "the last batch")
	})

	t.Run("DryRunCountsByDestinationAndStateAndChangesNothing", func(t *testing.T) {
		h := newHarness(t)
		hc := historyCleaner(t, h)
		a1, _ := settle(t, h, "evt_a1", "dest_1", base, 0, hookrelay.StateDelivered)
		settle(t, h, "evt_a2", "dest_1", base.Add(time.Minute), 0, hookrelay.StateDelivered)
		settle(t, h, "evt_b1", "dest_2", base.Add(2*time.Minute), 0, hookrelay.StateDelivered)
		settle(t, h, "evt_b2", "dest_2", base.Add(3*time.Minute), 0, hookrelay.StateDead)
		late, _ := settle(t, h, "evt_late", "dest_1", base.Add(3*day), 0, hookrelay.StateDelivered)
		policy := hookrelay.RetentionPolicy{Delivered: 2 * day, AttemptDetails: 0, RemoveDead: true, Dead: day}
		now := base.Add(3*day + time.Hour)
		want := []hookrelay.HistoryCount{
			{DestinationID: "dest_1", State: hookrelay.StateDelivered, Removed: 2, Compacted: 1},
			{DestinationID: "dest_2", State: hookrelay.StateDead, Removed: 1},
			{DestinationID: "dest_2", State: hookrelay.StateDelivered, Removed: 1},
		}
		dry, err := hc.CleanHistory(ctx, hookrelay.CleanHistoryParams{Now: now, Policy: policy, DryRun: true})
		require.NoError(t, err)
		assert.Equal(t, want, dry.Counts)
		assertKept(t, h, a1, "a dry run removes nothing")
		as, err := h.Ledger.Attempts(ctx, late)
		require.NoError(t, err)
		assert.Len(t, as, 1, "a dry run compacts nothing")

		res := clean(t, hc, now, policy, 100)
		assert.Equal(t, want, res.Counts, "the run does what the dry run counted")
	})

	t.Run("ACutoffBeforeAnyStorableTimeRemovesNothingAndFailsNot", func(t *testing.T) {
		h := newHarness(t)
		hc := historyCleaner(t, h)
		delivered, _ := settle(t, h, "evt_delivered", "dest_1", base, 0, hookrelay.StateDelivered)
		dead, _ := settle(t, h, "evt_dead", "dest_1", base.Add(time.Minute), 0, hookrelay.StateDead)
		// The longest retention, from a clock before 1970: every cutoff is
		// before 1678, earlier than int64 nanoseconds since 1970 reach.
		const longest = time.Duration(1<<63 - 1)
		policy := hookrelay.RetentionPolicy{Delivered: longest, AttemptDetails: longest, RemoveDead: true, Dead: longest}
		now := time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
		dry, err := hc.CleanHistory(ctx, hookrelay.CleanHistoryParams{Now: now, Policy: policy, DryRun: true})
		require.NoError(t, err, "a dry run")
		assert.Empty(t, dry.Counts, "a dry run counts nothing")
		res, err := hc.CleanHistory(ctx, hookrelay.CleanHistoryParams{Now: now, Policy: policy, Limit: 100})
		require.NoError(t, err)
		assert.Empty(t, res.Counts)
		assert.False(t, res.More)
		assertKept(t, h, delivered, "nothing is older than a cutoff before 1678")
		assertKept(t, h, dead, "nothing is older than a cutoff before 1678")
		as, err := h.Ledger.Attempts(ctx, delivered)
		require.NoError(t, err)
		assert.Len(t, as, 1, "nor compacted")
	})

	t.Run("AHolderOfARemovedRecordCannotWriteToTheRecordCreatedAgain", func(t *testing.T) {
		// A record removed and created again (its event published again)
		// has the same ID. A worker still holding a lease of the removed
		// record — it expired, another worker delivered — must not write
		// to the new one: its tokens must not start over.
		h := newHarness(t)
		if h.RedeliveryWithin > 0 {
			t.Skip("needs a queue that follows the caller's clock")
		}
		hc := historyCleaner(t, h)
		d := newDelivery("evt_again", "dest_1", base)
		seed(t, h, d)
		var stale []hookrelay.Claim
		now := base
		for range 2 { // the first lease expires; the second delivers
			cs := claim(t, h.Queue, now, 1)
			require.Len(t, cs, 1, "claimable at %v", now)
			stale = append(stale, cs[0])
			now = cs[0].Lease.ExpiresAt
		}
		require.NoError(t, deliver(t, h, stale[1], now))
		now = now.Add(time.Hour)
		clean(t, hc, now, hookrelay.RetentionPolicy{}, 100)
		assertGone(t, h, d.ID, "a zero retention removes the delivered record")

		seed(t, h, newDelivery("evt_again", "dest_1", now))
		cs := claim(t, h.Queue, now, 1)
		require.Len(t, cs, 1)
		live := cs[0]
		require.Equal(t, d.ID, live.Delivery.ID, "the record created again has the same ID")
		for i, c := range stale {
			assert.ErrorIs(t, h.Ledger.MarkDelivered(ctx, markDelivered(c, c.Lease, now)), hookrelay.ErrLeaseLost,
				"the holder of the removed record's lease %d (token %d) cannot write over the new record's lease (token %d)",
				i+1, c.Lease.Token, live.Lease.Token)
		}
		got, err := h.Ledger.Get(ctx, d.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StatePending, got.State, "no stale holder marked the new record delivered")
		as, err := h.Ledger.Attempts(ctx, d.ID)
		require.NoError(t, err)
		assert.Empty(t, as, "nor wrote an attempt to it")
		assert.NoError(t, deliver(t, h, live, now), "the live holder writes")
	})

	t.Run("ConcurrentCleanersRemoveEachRecordOnce", func(t *testing.T) {
		h := newHarness(t)
		hc := historyCleaner(t, h)
		var ids []string
		for i := range 12 {
			id, _ := settle(t, h, "evt_"+string(rune('a'+i)), "dest_1", base.Add(time.Duration(i)*time.Second), 0, hookrelay.StateDelivered)
			ids = append(ids, id)
		}
		var mu sync.Mutex
		var removed int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					res, err := hc.CleanHistory(ctx, hookrelay.CleanHistoryParams{Now: base.Add(day), Limit: 2})
					if !assert.NoError(t, err) {
						return
					}
					mu.Lock()
					for _, c := range res.Counts {
						removed += c.Removed
					}
					mu.Unlock()
					if !res.More {
						return
					}
				}
			}()
		}
		wg.Wait()
		// A cleaner that found nothing may stop before the others finish;
		// one more pass takes what is left.
		for _, c := range clean(t, hc, base.Add(day), hookrelay.RetentionPolicy{}, 100).Counts {
			removed += c.Removed
		}
		assert.EqualValues(t, len(ids), removed, "each record counted by exactly one cleaner")
		for _, id := range ids {
			assertGone(t, h, id, "every record removed")
		}
	})
}

// RunUnpublishedRecovery runs the tests of the optional
// hookrelay.UnpublishedRecovery ability: which pending records count as
// having lost their broker message, and that each is taken once per grace
// period. It skips when the Ledger lacks the ability.
func RunUnpublishedRecovery(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()
	const grace = 5 * time.Minute
	recovery := func(t *testing.T) (Harness, hookrelay.UnpublishedRecovery) {
		h := newHarness(t)
		r, ok := hookrelay.As[hookrelay.UnpublishedRecovery](h.Ledger)
		if !ok {
			t.Skipf("%T does not implement hookrelay.UnpublishedRecovery (an optional ability)", h.Ledger)
		}
		return h, r
	}
	take := func(t *testing.T, r hookrelay.UnpublishedRecovery, now time.Time, skip ...string) []string {
		t.Helper()
		ds, err := r.TakeUnpublished(ctx, hookrelay.RecoverUnpublishedParams{Now: now, Grace: grace, Limit: 100, SkipDestinations: skip})
		require.NoError(t, err)
		out := []string{}
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}

	t.Run("ADueRecordNobodyLeasedIsTakenOncePerGrace", func(t *testing.T) {
		h, r := recovery(t)
		d := newDelivery("evt_lost", "dest_1", base)
		_, err := h.Ledger.Create(ctx, []hookrelay.Delivery{d}) // the publish never happened
		require.NoError(t, err)
		assert.Empty(t, take(t, r, base.Add(grace-time.Second)), "within the grace period")
		assert.Equal(t, []string{d.ID}, take(t, r, base.Add(grace)), "due and unleased for the grace period")
		assert.Empty(t, take(t, r, base.Add(grace+time.Second)), "taken: not again within the grace period")
		assert.Equal(t, []string{d.ID}, take(t, r, base.Add(2*grace)), "still unleased after another grace period")
	})

	t.Run("LeasedFinishedNotDueAndSkippedRecordsAreLeftAlone", func(t *testing.T) {
		h, r := recovery(t)
		ll, ok := hookrelay.As[hookrelay.LeaseLedger](h.Ledger)
		if !ok {
			t.Skipf("%T does not implement hookrelay.LeaseLedger", h.Ledger)
		}
		settle(t, h, "evt_done", "dest_1", base, 0, hookrelay.StateDelivered)
		settle(t, h, "evt_dead", "dest_1", base, 0, hookrelay.StateDead)
		later := newDelivery("evt_later", "dest_1", base)
		later.NextAttemptAt = base.Add(time.Hour)
		paused := newDelivery("evt_paused", "dest_2", base)
		leased := newDelivery("evt_leased", "dest_1", base)
		_, err := h.Ledger.Create(ctx, []hookrelay.Delivery{later, paused, leased})
		require.NoError(t, err)
		leaseAt := base.Add(grace)
		_, err = ll.AcquireLease(ctx, hookrelay.AcquireLeaseParams{ID: leased.ID, Holder: "w", Now: leaseAt, LeaseFor: leaseFor})
		require.NoError(t, err)

		assert.Empty(t, take(t, r, leaseAt.Add(time.Second), "dest_2"), "a live lease, a finished record, a record not due, a skipped destination")
		assert.Empty(t, take(t, r, leaseAt.Add(leaseFor), "dest_2"), "a lease that expired within the grace period: its message is still around")
		assert.ElementsMatch(t, []string{leased.ID}, take(t, r, leaseAt.Add(grace), "dest_2"), "unleased for the grace period since its last lease")
		assert.Equal(t, []string{paused.ID}, take(t, r, leaseAt.Add(grace)), "the destination no longer skipped")
		assert.NotContains(t, take(t, r, base.Add(time.Hour+grace-time.Second)), later.ID, "due for less than the grace period")
		assert.Contains(t, take(t, r, base.Add(time.Hour+grace)), later.ID, "due and unleased for the grace period")
	})

	t.Run("ASkipListOfTensOfThousandsIsHonoured", func(t *testing.T) {
		// The worker skips every destination it holds back: on a large
		// store more than one SQL statement's parameters (SQLite: 32,766;
		// PostgreSQL: 65,535).
		h, r := recovery(t)
		held := newDelivery("evt_held", "dest_held", base)
		free := newDelivery("evt_free", "dest_free", base)
		_, err := h.Ledger.Create(ctx, []hookrelay.Delivery{held, free})
		require.NoError(t, err)
		skip := make([]string, 0, 70_001)
		for i := range 70_000 {
			skip = append(skip, fmt.Sprintf("dest_%05d", i))
		}
		skip = append(skip, "dest_held")
		assert.Equal(t, []string{free.ID}, take(t, r, base.Add(grace), skip...), "every listed destination skipped, the others taken")
	})

	t.Run("ConcurrentCallersTakeEachRecordOnce", func(t *testing.T) {
		h, r := recovery(t)
		var ds []hookrelay.Delivery
		for i := range 10 {
			ds = append(ds, newDelivery("evt_"+string(rune('a'+i)), "dest_1", base))
		}
		_, err := h.Ledger.Create(ctx, ds)
		require.NoError(t, err)
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					got, err := r.TakeUnpublished(ctx, hookrelay.RecoverUnpublishedParams{Now: base.Add(grace), Grace: grace, Limit: 2})
					if !assert.NoError(t, err) || len(got) == 0 {
						return
					}
					mu.Lock()
					for _, d := range got {
						seen[d.ID]++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		assert.Len(t, seen, len(ds), "every record taken")
		for id, n := range seen {
			assert.Equal(t, 1, n, "%s taken by exactly one caller", id)
		}
	})
}
