package hooksql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// TestCreateCancelledMidwayStoresAllOrNothing cancels Create (what
// Client.EnqueueMany and Publish call on a Store) at spread-out moments
// while it writes a batch of several INSERT chunks: each call either fails
// and stores none of its deliveries, or succeeds and stores every one.
func TestCreateCancelledMidwayStoresAllOrNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b, Options{})
		at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		const n = 2*insertChunkRows + 100
		// How long an uncancelled batch takes sets the spread of the
		// cancellation moments, so some land mid-write on any machine.
		warm := make([]hookrelay.Delivery, n)
		for i := range warm {
			warm[i] = newDelivery(fmt.Sprintf("warm_%04d", i), "dest_1", at)
		}
		began := time.Now()
		_, err := s.Create(context.Background(), warm)
		require.NoError(t, err)
		full := time.Since(began)

		outcomes := map[bool]int{}
		for round := range 24 {
			ds := make([]hookrelay.Delivery, n)
			for i := range ds {
				ds[i] = newDelivery(fmt.Sprintf("evt_%02d_%04d", round, i), "dest_1", at)
			}
			ctx, cancel := context.WithTimeout(context.Background(), full*time.Duration(round)/16)
			created, err := s.Create(ctx, ds)
			cancel()
			var stored int
			require.NoError(t, s.db.QueryRowContext(context.Background(),
				s.q("SELECT COUNT(*) FROM {d} WHERE event_id LIKE ?"), fmt.Sprintf("evt_%02d_%%", round)).Scan(&stored))
			if err != nil {
				assert.ErrorIs(t, err, context.DeadlineExceeded, "round %d: the error says why", round)
				assert.Zero(t, stored, "round %d: a failed Create stores nothing", round)
			} else {
				assert.Len(t, created, n)
				assert.Equal(t, n, stored, "round %d: a Create that succeeded stored every delivery", round)
			}
			outcomes[err == nil]++
		}
		t.Logf("%s: %d rounds cancelled, %d completed (uncancelled batch %v)", b.dialect, outcomes[false], outcomes[true], full)
	})
}
