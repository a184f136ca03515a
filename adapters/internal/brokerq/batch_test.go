package brokerq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/hookrelaymock"
)

// batchFixture is a queue over the fake broker whose ledger is a mock that
// leases in batches, with n messages published (deliveries whd_0 …).
func batchFixture(t *testing.T, n int) (*fakeBroker, *hookrelaymock.MockLeaseBatchLedger, []hookrelay.Delivery, time.Time) {
	t.Helper()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	b := newFakeBroker()
	ledger := hookrelaymock.NewMockLeaseBatchLedger(gomock.NewController(t))
	ds := make([]hookrelay.Delivery, n)
	for i := range ds {
		ds[i] = hookrelay.Delivery{ID: fmt.Sprintf("whd_%d", i), EventID: fmt.Sprintf("e%d", i), DestinationID: "dest",
			Attempt: 1, FirstQueuedAt: now, NextAttemptAt: now}
	}
	require.NoError(t, b.Publish(context.Background(), ds))
	return b, ledger, ds, now
}

// A ledger that leases in batches is asked once for a fetch's messages,
// never one by one, and each answer is applied to its own message: a
// claim, an acknowledgement (finished), a redelivery (lease live, not due).
func TestAFetchIsLeasedInOneBatch(t *testing.T) {
	ctx := context.Background()
	b, ledger, ds, now := batchFixture(t, 5)
	q := newQueue(t, b, ledger)
	ledger.EXPECT().AcquireLeases(gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, ps []hookrelay.AcquireLeaseParams) ([]hookrelay.Claim, []error, error) {
			require.Len(t, ps, 5)
			claims, errs := make([]hookrelay.Claim, len(ps)), make([]error, len(ps))
			for i, p := range ps {
				assert.Equal(t, ds[i].ID, p.ID, "in the order fetched")
				assert.Equal(t, "worker-1", p.Holder)
				assert.True(t, p.Now.Equal(now))
				assert.Equal(t, time.Minute, p.LeaseFor)
			}
			claims[0] = hookrelay.Claim{Delivery: ds[0], Lease: hookrelay.Lease{Token: 7, Holder: "worker-1", ExpiresAt: now.Add(time.Minute)}}
			claims[3] = hookrelay.Claim{Delivery: ds[3], Lease: hookrelay.Lease{Token: 8, Holder: "worker-1", ExpiresAt: now.Add(time.Minute)}}
			errs[1] = hookrelay.ErrInvalidState
			errs[2] = hookrelay.ErrLeaseLost
			errs[4] = &hookrelay.NotDueError{ID: ds[4].ID, At: now.Add(time.Hour)}
			return claims, errs, nil
		}).Times(1)
	// No AcquireLease call is expected: the mock fails the test on one.

	cs, err := q.Claim(ctx, hookrelay.ClaimParams{Now: now, Limit: 5, LeaseFor: time.Minute, Holder: "worker-1"})
	require.NoError(t, err)
	require.Len(t, cs, 2)
	assert.Equal(t, []string{ds[0].ID, ds[3].ID}, []string{cs[0].Delivery.ID, cs[1].Delivery.ID})
	assert.Equal(t, 2, q.InFlight())
	assert.Equal(t, 4, b.pending(), "the finished delivery's message is acknowledged; the others wait")
}

// When the batch fails, no message is lost or held: all go back to the
// broker, and the claim reports the ledger's failure.
func TestAFailedBatchHandsEveryMessageBack(t *testing.T) {
	ctx := context.Background()
	b, ledger, _, now := batchFixture(t, 3)
	q := newQueue(t, b, ledger)
	down := errors.New("ledger down")
	ledger.EXPECT().AcquireLeases(gomock.Any(), gomock.Len(3)).Return(nil, nil, down).Times(1)

	_, err := q.Claim(ctx, hookrelay.ClaimParams{Now: now, Limit: 3, LeaseFor: time.Minute, Holder: "worker-1"})
	require.ErrorIs(t, err, down)
	var oe *hookrelay.OpError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "ledger.acquire_leases", oe.Op)
	assert.Zero(t, q.InFlight())
	assert.Equal(t, 3, b.pending())
	require.Eventually(t, func() bool {
		msgs, err := b.Fetch(ctx, 10, 0)
		require.NoError(t, err)
		return len(msgs) == 3
	}, time.Second, time.Millisecond, "every message can be fetched again after the error delay")
}

// A ledger whose answer does not match the question (a claim or error
// missing) is treated as a failed batch, not trusted entry by entry.
func TestABatchAnswerOfTheWrongLengthIsAFailure(t *testing.T) {
	ctx := context.Background()
	b, ledger, _, now := batchFixture(t, 3)
	q := newQueue(t, b, ledger)
	ledger.EXPECT().AcquireLeases(gomock.Any(), gomock.Len(3)).Return(make([]hookrelay.Claim, 2), make([]error, 2), nil).Times(1)

	_, err := q.Claim(ctx, hookrelay.ClaimParams{Now: now, Limit: 3, LeaseFor: time.Minute, Holder: "worker-1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2 claims and 2 errors for 3 leases asked")
	assert.Zero(t, q.InFlight())
	assert.Equal(t, 3, b.pending(), "every message handed back")
}
