package hookrelaytest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// leaseState is one column of the lease table in docs/adapters.md: the state
// of the lease a caller presents. setup seeds one delivery, claims it twice
// (older is the first lease, cur the second: a greater token) and brings
// cur into the state; now is when the operation runs.
type leaseState struct {
	name  string
	setup func(t *testing.T, h Harness) (cur hookrelay.Claim, older hookrelay.Lease, now time.Time)
}

// leaseOp is one row of the table: a write or transition made with lease.
type leaseOp struct {
	name string
	// ability skips the row when the harness lacks it (ReleaseLease).
	do func(t *testing.T, h Harness, c hookrelay.Claim, lease hookrelay.Lease, now time.Time) error
	// want is the answer with cur's own token, per state; an older token
	// is always ErrLeaseLost.
	want map[string]error
	// effect checks what a nil answer did, for the states where the lease
	// was still live or expired-unclaimed (the op ended it).
	effect func(t *testing.T, h Harness, id string, now time.Time)
}

// The lease-table states.
const (
	stateLive             = "Live"
	stateExpiredUnclaimed = "ExpiredUnclaimed"
	stateAfterDelivered   = "EndedByMarkDelivered"
	stateAfterRetry       = "EndedByRecordRetry"
	stateAfterDeadLetter  = "EndedByRecordDeadLetter"
	stateAfterRelease     = "EndedByRelease"
	stateSuperseded       = "Superseded"
)

// opDue is when the table's RetryAt, Release and RecordRetry make the
// delivery due again, after the operation's now.
const opDue = 45 * time.Second

func leaseStates() []leaseState {
	ctx := context.Background()
	// twoLeases: old expires at base+leaseFor, when cur is taken.
	twoLeases := func(t *testing.T, h Harness) (hookrelay.Claim, hookrelay.Lease) {
		t.Helper()
		seed(t, h, newDelivery("evt_lease", "dest_1", base))
		old := claim(t, h.Queue, base, 1)
		require.Len(t, old, 1)
		cur := claim(t, h.Queue, base.Add(leaseFor), 1)
		require.Len(t, cur, 1, "an expired lease is claimed again")
		return cur[0], old[0].Lease
	}
	live := base.Add(leaseFor + time.Second)
	ended := func(end func(t *testing.T, h Harness, c hookrelay.Claim, now time.Time)) func(*testing.T, Harness) (hookrelay.Claim, hookrelay.Lease, time.Time) {
		return func(t *testing.T, h Harness) (hookrelay.Claim, hookrelay.Lease, time.Time) {
			cur, old := twoLeases(t, h)
			end(t, h, cur, live)
			return cur, old, live.Add(time.Second)
		}
	}
	return []leaseState{
		{stateLive, func(t *testing.T, h Harness) (hookrelay.Claim, hookrelay.Lease, time.Time) {
			cur, old := twoLeases(t, h)
			return cur, old, live
		}},
		{stateExpiredUnclaimed, func(t *testing.T, h Harness) (hookrelay.Claim, hookrelay.Lease, time.Time) {
			cur, old := twoLeases(t, h)
			now := cur.Lease.ExpiresAt.Add(time.Second)
			// A claim that sees the expiry but takes nothing (the
			// destination is skipped): the lease is expired, not ended.
			assert.Empty(t, claim(t, h.Queue, now, 10, "dest_1"))
			return cur, old, now
		}},
		{stateAfterDelivered, ended(func(t *testing.T, h Harness, c hookrelay.Claim, now time.Time) {
			require.NoError(t, h.Ledger.MarkDelivered(ctx, markDelivered(c, c.Lease, now)))
		})},
		{stateAfterRetry, ended(func(t *testing.T, h Harness, c hookrelay.Claim, now time.Time) {
			require.NoError(t, h.Ledger.RecordRetry(ctx, recordRetry(c, c.Lease, now)))
		})},
		{stateAfterDeadLetter, ended(func(t *testing.T, h Harness, c hookrelay.Claim, now time.Time) {
			require.NoError(t, h.Ledger.RecordDeadLetter(ctx, recordDeadLetter(c, c.Lease, now)))
		})},
		{stateAfterRelease, ended(func(t *testing.T, h Harness, c hookrelay.Claim, now time.Time) {
			require.NoError(t, h.Queue.Release(ctx, hookrelay.ReleaseParams{ID: c.Delivery.ID, Lease: c.Lease, At: now, Now: now}))
		})},
		{stateSuperseded, func(t *testing.T, h Harness) (hookrelay.Claim, hookrelay.Lease, time.Time) {
			cur, old := twoLeases(t, h)
			now := cur.Lease.ExpiresAt
			newest := claim(t, h.Queue, now, 1)
			require.Len(t, newest, 1, "cur's expired lease is claimed again")
			require.Greater(t, newest[0].Lease.Token, cur.Lease.Token)
			return cur, old, now.Add(time.Second)
		}},
	}
}

func markDelivered(c hookrelay.Claim, lease hookrelay.Lease, now time.Time) hookrelay.MarkDeliveredParams {
	a := attemptFor(c, hookrelay.KindDelivered, now)
	a.Outcome, a.Reason, a.StatusCode = hookrelay.OutcomeAccepted, "", 204
	return hookrelay.MarkDeliveredParams{ID: c.Delivery.ID, Lease: lease, Attempt: a, Now: now}
}

func recordRetry(c hookrelay.Claim, lease hookrelay.Lease, now time.Time) hookrelay.RecordRetryParams {
	a := attemptFor(c, hookrelay.KindRetryable, now)
	a.NextAttemptAt = now.Add(opDue)
	return hookrelay.RecordRetryParams{
		ID: c.Delivery.ID, Lease: lease, Attempt: a,
		NextAttempt: c.Delivery.Attempt + 1, NextAttemptAt: a.NextAttemptAt, Now: now,
	}
}

// recordDeadLetter dead-letters without an attempt (the delivery window
// passed before the send): only the lease fences it, not the attempt number.
func recordDeadLetter(c hookrelay.Claim, lease hookrelay.Lease, now time.Time) hookrelay.RecordDeadLetterParams {
	return hookrelay.RecordDeadLetterParams{ID: c.Delivery.ID, Lease: lease, Reason: hookrelay.ReasonWindowExpired, Now: now}
}

func leaseOps() []leaseOp {
	ctx := context.Background()
	write := func(want error, after map[string]error) map[string]error {
		m := map[string]error{stateLive: want, stateExpiredUnclaimed: want, stateAfterRelease: hookrelay.ErrLeaseLost, stateSuperseded: hookrelay.ErrLeaseLost}
		for k, v := range after {
			m[k] = v
		}
		return m
	}
	// A queue transition with the current token ends the lease, or does
	// nothing if it already ended; only a newer lease refuses it.
	transition := map[string]error{
		stateLive: nil, stateExpiredUnclaimed: nil, stateAfterDelivered: nil, stateAfterRetry: nil,
		stateAfterDeadLetter: nil, stateAfterRelease: nil, stateSuperseded: hookrelay.ErrLeaseLost,
	}
	claimableAt := func(at func(now time.Time) time.Time) func(*testing.T, Harness, string, time.Time) {
		return func(t *testing.T, h Harness, id string, now time.Time) {
			t.Helper()
			due := at(now)
			if due.After(now) {
				assert.Empty(t, claim(t, h.Queue, due.Add(-time.Millisecond), 10), "not claimable before %v", due)
			}
			got := claim(t, h.Queue, due, 10)
			assert.Equal(t, []string{id}, ids(got), "the ended lease leaves the pending delivery claimable at %v", due)
		}
	}
	wantState := func(state hookrelay.State, attempt int) func(*testing.T, Harness, string, time.Time) {
		return func(t *testing.T, h Harness, id string, now time.Time) {
			t.Helper()
			got, err := h.Ledger.Get(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, state, got.State)
			assert.Equal(t, attempt, got.Attempt)
			assert.True(t, got.UpdatedAt.Equal(now), "UpdatedAt is the write's Now")
			if state != hookrelay.StatePending {
				assert.Empty(t, claim(t, h.Queue, now.Add(24*time.Hour), 10), "a %s delivery is never claimable", state)
			}
		}
	}
	return []leaseOp{
		{
			name: "MarkDelivered",
			do: func(t *testing.T, h Harness, c hookrelay.Claim, l hookrelay.Lease, now time.Time) error {
				return h.Ledger.MarkDelivered(ctx, markDelivered(c, l, now))
			},
			want: write(nil, map[string]error{
				stateAfterDelivered: nil, stateAfterRetry: hookrelay.ErrLeaseLost, stateAfterDeadLetter: hookrelay.ErrInvalidState,
			}),
			effect: wantState(hookrelay.StateDelivered, 1),
		},
		{
			name: "RecordRetry",
			do: func(t *testing.T, h Harness, c hookrelay.Claim, l hookrelay.Lease, now time.Time) error {
				return h.Ledger.RecordRetry(ctx, recordRetry(c, l, now))
			},
			want: write(nil, map[string]error{
				stateAfterDelivered: hookrelay.ErrInvalidState, stateAfterRetry: hookrelay.ErrLeaseLost, stateAfterDeadLetter: hookrelay.ErrInvalidState,
			}),
			effect: func(t *testing.T, h Harness, id string, now time.Time) {
				wantState(hookrelay.StatePending, 2)(t, h, id, now)
				claimableAt(func(now time.Time) time.Time { return now.Add(opDue) })(t, h, id, now)
			},
		},
		{
			name: "RecordDeadLetter",
			do: func(t *testing.T, h Harness, c hookrelay.Claim, l hookrelay.Lease, now time.Time) error {
				return h.Ledger.RecordDeadLetter(ctx, recordDeadLetter(c, l, now))
			},
			want: write(nil, map[string]error{
				stateAfterDelivered: hookrelay.ErrInvalidState, stateAfterRetry: hookrelay.ErrLeaseLost, stateAfterDeadLetter: hookrelay.ErrInvalidState,
			}),
			effect: wantState(hookrelay.StateDead, 1),
		},
		{
			name: "Acknowledge",
			do: func(t *testing.T, h Harness, c hookrelay.Claim, l hookrelay.Lease, now time.Time) error {
				return h.Queue.Acknowledge(ctx, hookrelay.AckParams{ID: c.Delivery.ID, Lease: l, Now: now})
			},
			want:   transition,
			effect: claimableAt(func(now time.Time) time.Time { return now }),
		},
		{
			name: "RetryAt",
			do: func(t *testing.T, h Harness, c hookrelay.Claim, l hookrelay.Lease, now time.Time) error {
				next := c.Delivery
				next.Attempt, next.NextAttemptAt = c.Delivery.Attempt+1, now.Add(opDue)
				return h.Queue.RetryAt(ctx, hookrelay.RetryAtParams{Delivery: next, Lease: l, At: now.Add(opDue), Now: now})
			},
			want:   transition,
			effect: claimableAt(func(now time.Time) time.Time { return now.Add(opDue) }),
		},
		{
			name: "DeadLetter",
			do: func(t *testing.T, h Harness, c hookrelay.Claim, l hookrelay.Lease, now time.Time) error {
				return h.Queue.DeadLetter(ctx, hookrelay.DeadLetterParams{Delivery: c.Delivery, Lease: l, Reason: hookrelay.ReasonBadRequest, Now: now})
			},
			want: transition,
			// Without RecordDeadLetter the ledger still says pending: the
			// queue must not lose it.
			effect: claimableAt(func(now time.Time) time.Time { return now }),
		},
		{
			name: "Release",
			do: func(t *testing.T, h Harness, c hookrelay.Claim, l hookrelay.Lease, now time.Time) error {
				return h.Queue.Release(ctx, hookrelay.ReleaseParams{ID: c.Delivery.ID, Lease: l, At: now.Add(opDue), Now: now})
			},
			want:   transition,
			effect: claimableAt(func(now time.Time) time.Time { return now.Add(opDue) }),
		},
		{
			name: "ReleaseLease",
			do: func(t *testing.T, h Harness, c hookrelay.Claim, l hookrelay.Lease, now time.Time) error {
				ll, ok := hookrelay.As[hookrelay.LeaseLedger](h.Ledger)
				if !ok {
					t.Skipf("%T does not implement hookrelay.LeaseLedger", h.Ledger)
				}
				return ll.ReleaseLease(ctx, hookrelay.ReleaseLeaseParams{ID: c.Delivery.ID, Lease: l, At: now.Add(opDue), Now: now})
			},
			want:   transition,
			effect: claimableAt(func(now time.Time) time.Time { return now.Add(opDue) }),
		},
	}
}

// snapshot is what a refused or no-op operation must leave unchanged.
type snapshot struct {
	d        hookrelay.Delivery
	attempts int
}

func takeSnapshot(t *testing.T, h Harness, id string) snapshot {
	t.Helper()
	d, err := h.Ledger.Get(context.Background(), id)
	require.NoError(t, err)
	as, err := h.Ledger.Attempts(context.Background(), id)
	require.NoError(t, err)
	return snapshot{d: d, attempts: len(as)}
}

func assertUnchanged(t *testing.T, h Harness, before snapshot, what string) {
	t.Helper()
	after := takeSnapshot(t, h, before.d.ID)
	assert.Equal(t, before.d.State, after.d.State, "%s changed the state", what)
	assert.Equal(t, before.d.Attempt, after.d.Attempt, "%s changed the attempt", what)
	assert.True(t, before.d.NextAttemptAt.Equal(after.d.NextAttemptAt), "%s moved NextAttemptAt from %v to %v", what, before.d.NextAttemptAt, after.d.NextAttemptAt)
	assert.Equal(t, before.d.LastReason, after.d.LastReason, "%s changed LastReason", what)
	assert.True(t, before.d.UpdatedAt.Equal(after.d.UpdatedAt), "%s changed UpdatedAt", what)
	assert.Equal(t, before.attempts, after.attempts, "%s changed the attempt history", what)
}

func errName(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, hookrelay.ErrLeaseLost):
		return "ErrLeaseLost"
	case errors.Is(err, hookrelay.ErrInvalidState):
		return "ErrInvalidState"
	}
	return err.Error()
}

// RunLeases runs the lease table of docs/adapters.md: every ledger write
// and queue transition, with the current lease in each state (live,
// expired but not claimed again, ended by each ledger write, ended by
// Release, superseded by a newer claim), with its own token and with an
// older one. It also checks that fencing tokens only grow. It needs a queue
// that follows the caller's clock (Harness.RedeliveryWithin zero) and skips
// otherwise.
func RunLeases(t *testing.T, newHarness NewHarness) {
	for _, op := range leaseOps() {
		t.Run(op.name, func(t *testing.T) {
			for _, st := range leaseStates() {
				t.Run(st.name, func(t *testing.T) {
					h := newHarness(t)
					if h.RedeliveryWithin > 0 {
						t.Skip("the lease table needs a queue that follows the caller's clock")
					}
					cur, older, now := st.setup(t, h)
					id := cur.Delivery.ID

					before := takeSnapshot(t, h, id)
					err := op.do(t, h, cur, older, now)
					assert.ErrorIs(t, err, hookrelay.ErrLeaseLost, "%s with an older token than the current one: got %s", op.name, errName(err))
					assertUnchanged(t, h, before, op.name+" with an older token")

					want := op.want[st.name]
					err = op.do(t, h, cur, cur.Lease, now)
					if want != nil {
						assert.ErrorIs(t, err, want, "%s with the %s lease's own token: got %s", op.name, st.name, errName(err))
						assertUnchanged(t, h, before, op.name+" refused")
						return
					}
					require.NoError(t, err, "%s with the %s lease's own token", op.name, st.name)
					if st.name == stateLive || st.name == stateExpiredUnclaimed {
						op.effect(t, h, id, now)
						return
					}
					assertUnchanged(t, h, before, op.name+" after the lease ended (a no-op)")
				})
			}
		})
	}

	t.Run("TokensGrowAcrossExpiryReleaseAndWrites", func(t *testing.T) {
		h := newHarness(t)
		if h.RedeliveryWithin > 0 {
			t.Skip("needs a queue that follows the caller's clock")
		}
		ctx := context.Background()
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		var held []hookrelay.Claim
		take := func(now time.Time) hookrelay.Claim {
			t.Helper()
			cs := claim(t, h.Queue, now, 1)
			require.Len(t, cs, 1, "claimable at %v", now)
			if n := len(held); n > 0 {
				assert.Greater(t, cs[0].Lease.Token, held[n-1].Lease.Token, "claim %d: the token grows", n+1)
			}
			held = append(held, cs[0])
			return cs[0]
		}
		now := base
		c := take(now) // 1: expires
		now = c.Lease.ExpiresAt
		c = take(now) // 2: released
		require.NoError(t, h.Queue.Release(ctx, hookrelay.ReleaseParams{ID: d.ID, Lease: c.Lease, At: now, Now: now}))
		c = take(now) // 3: retried
		require.NoError(t, retry(t, h, c, now, now.Add(time.Second)))
		now = now.Add(time.Second)
		c = take(now) // 4: acknowledged without a write
		require.NoError(t, h.Queue.Acknowledge(ctx, hookrelay.AckParams{ID: d.ID, Lease: c.Lease, Now: now}))
		c = take(now) // 5: live
		for i, stale := range held[:len(held)-1] {
			assert.ErrorIs(t, h.Ledger.MarkDelivered(ctx, markDelivered(stale, stale.Lease, now)), hookrelay.ErrLeaseLost,
				"the holder of lease %d (token %d) cannot write over lease %d (token %d)", i+1, stale.Lease.Token, len(held), c.Lease.Token)
		}
		got, err := h.Ledger.Get(ctx, d.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StatePending, got.State, "no stale holder marked it delivered")

		dl, ok := hookrelay.As[hookrelay.DeadLetterLedger](h.Ledger)
		if !ok {
			require.NoError(t, h.Ledger.MarkDelivered(ctx, markDelivered(c, c.Lease, now)), "the live holder writes")
			return
		}
		// 5: dead-lettered, then redriven: the redrive moves to a new token,
		// and the next claim's is greater still.
		require.NoError(t, h.Ledger.RecordDeadLetter(ctx, recordDeadLetter(c, c.Lease, now)))
		_, moved, err := dl.RedriveDelivery(ctx, hookrelay.RedriveDeliveryParams{ID: d.ID, AuditID: "rdr_tokens", Now: now})
		require.NoError(t, err)
		require.True(t, moved)
		c = take(now) // 6: after the redrive
		for _, stale := range held[:len(held)-1] {
			assert.ErrorIs(t, h.Ledger.RecordRetry(ctx, recordRetry(stale, stale.Lease, now)), hookrelay.ErrLeaseLost,
				"token %d after the redrive", stale.Lease.Token)
		}
		require.NoError(t, h.Ledger.MarkDelivered(ctx, markDelivered(c, c.Lease, now)), "the live holder writes")
	})
}
