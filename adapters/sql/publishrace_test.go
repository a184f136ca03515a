package hooksql

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// TestConcurrentPublishTxOfOneEvent publishes one event from several
// transactions at once, some of which roll back: each delivery exists
// once, is reported created by exactly one of the transactions that
// committed, every caller is told the same IDs, no attempt is recorded,
// and the only error a caller may see is ErrTxConflict (then it runs its
// transaction again, as EnqueueTx says).
func TestConcurrentPublishTxOfOneEvent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		for _, id := range []string{"acct", "crm", "bi"} {
			require.NoError(t, s.Put(ctx, hookrelay.Destination{ID: id, TenantID: "tenant_1", URL: "https://127.0.0.1/" + id}))
		}
		mock := clock.NewMock()
		mock.Set(t0)
		client, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: s, Clock: mock})
		require.NoError(t, err)

		const callers = 9
		results := make([]hookrelay.PublishResult, callers)
		errs := make([]error, callers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range callers {
			commit := i%3 != 0
			wg.Go(func() {
				<-start
				for range 10 {
					pp, err := client.PreparePublish(ctx, hookrelay.PublishParams{
						EventID: "evt_1", TenantID: "tenant_1", EventType: "lease.payment_recorded",
						Payload: fmt.Appendf(nil, `{"caller":%d}`, i),
					})
					if err != nil {
						errs[i] = err
						return
					}
					tx, err := s.DB().BeginTx(ctx, nil)
					if err != nil {
						errs[i] = err
						return
					}
					res, err := s.PublishTx(ctx, tx, pp)
					if err == nil && commit {
						err = tx.Commit()
					} else {
						_ = tx.Rollback()
					}
					if errors.Is(err, ErrTxConflict) {
						continue
					}
					results[i], errs[i] = res, err
					return
				}
				errs[i] = errors.New("ErrTxConflict ten times")
			})
		}
		close(start)
		wg.Wait()

		created := map[string]int{}
		for i := range callers {
			require.NoError(t, errs[i], "caller %d", i)
			require.Len(t, results[i].Deliveries, 3, "caller %d", i)
			for _, r := range results[i].Deliveries {
				assert.Equal(t, hookrelay.DeliveryID("evt_1", r.DestinationID), r.ID)
				if r.Created && i%3 != 0 {
					created[r.DestinationID]++
				}
			}
		}
		assert.Equal(t, map[string]int{"acct": 1, "bi": 1, "crm": 1}, created, "each delivery created by one committed transaction")
		for _, dest := range []string{"acct", "bi", "crm"} {
			id := hookrelay.DeliveryID("evt_1", dest)
			d, err := s.Get(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, hookrelay.StatePending, d.State)
			as, err := s.Attempts(ctx, id)
			require.NoError(t, err)
			assert.Empty(t, as)
		}
		var n int
		require.NoError(t, s.db.QueryRowContext(ctx, s.q("SELECT COUNT(*) FROM {d}")).Scan(&n))
		assert.Equal(t, 3, n)
	})
}
