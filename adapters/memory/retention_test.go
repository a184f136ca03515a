package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// With a cleaner, the store's maps hold the history the policy keeps, not
// every delivery the store ever saw.
func TestCleanerLeavesNothingOfRemovedDeliveries(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	s := NewStore()
	for round := range 3 {
		var ds []hookrelay.Delivery
		for i := range 1000 {
			ds = append(ds, hookrelay.Delivery{ID: fmt.Sprintf("whd_%d_%d", round, i), DestinationID: fmt.Sprintf("dest_%d", i%7),
				Attempt: 1, NextAttemptAt: now, UpdatedAt: now})
		}
		_, err := s.Create(ctx, ds)
		require.NoError(t, err)
		cs, err := s.Claim(ctx, hookrelay.ClaimParams{Now: now, Limit: len(ds), LeaseFor: time.Minute})
		require.NoError(t, err)
		for _, c := range cs {
			require.NoError(t, s.MarkDelivered(ctx, hookrelay.MarkDeliveredParams{ID: c.Delivery.ID, Lease: c.Lease,
				Attempt: hookrelay.Attempt{DeliveryID: c.Delivery.ID, Number: 1, Kind: hookrelay.KindDelivered}, Now: now}))
		}
		for {
			res, err := s.CleanHistory(ctx, hookrelay.CleanHistoryParams{Now: now, Limit: 300})
			require.NoError(t, err)
			if !res.More {
				break
			}
		}
		s.mu.Lock()
		assert.Empty(t, s.records, "round %d: no record left", round)
		assert.Empty(t, s.queues, "round %d: no destination queue left", round)
		assert.Zero(t, s.ready.Len())
		s.mu.Unlock()
	}
}
