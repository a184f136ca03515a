package hooksql

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// CleanHistory is two transactions: the removal, then the compaction. When
// the compaction fails after the removal committed, the call still counts
// what it removed: those records are gone, and no later call can count
// them, so a result without them left the worker's EventHistoryRemoved
// (hookrelay_history_removed_total) short of what was removed.
func TestCleanHistoryCountsItsRemovalWhenTheCompactionFails(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backends[0], Options{}) // SQLite: a trigger makes the compaction fail
	deliverAll(t, s, "old", 2)               // delivered at t0: removed
	later := t0.Add(48 * time.Hour)          // delivered then: compacted
	_, err := s.Create(ctx, []hookrelay.Delivery{newDelivery("later", "dst_1", later)})
	require.NoError(t, err)
	cs := claimAll(t, s, later)
	require.Len(t, cs, 1)
	require.NoError(t, s.MarkDelivered(ctx, hookrelay.MarkDeliveredParams{ID: cs[0].Delivery.ID, Lease: cs[0].Lease,
		Attempt: hookrelay.Attempt{Number: 1, StartedAt: later, FinishedAt: later, Outcome: hookrelay.OutcomeAccepted}, Now: later}))
	_, err = s.db.ExecContext(ctx, s.q("CREATE TRIGGER {sum}_refused BEFORE INSERT ON {sum} BEGIN SELECT RAISE(ABORT, 'compaction refused'); END"))
	require.NoError(t, err)

	res, err := s.CleanHistory(ctx, hookrelay.CleanHistoryParams{
		Now: t0.Add(100 * time.Hour), Policy: hookrelay.RetentionPolicy{Delivered: 80 * time.Hour, AttemptDetails: 24 * time.Hour}, Limit: 10,
	})
	require.ErrorContains(t, err, "compaction refused")
	assert.Equal(t, []hookrelay.HistoryCount{{DestinationID: "dst_1", State: hookrelay.StateDelivered, Removed: 2}}, res.Counts,
		"the removal committed: its count comes back with the error")
	var left int
	require.NoError(t, s.db.QueryRowContext(ctx, s.q("SELECT COUNT(*) FROM {d}")).Scan(&left))
	assert.Equal(t, 1, left, "the two old records are gone, the later one is kept")
	as, err := s.Attempts(ctx, cs[0].Delivery.ID)
	require.NoError(t, err)
	assert.Len(t, as, 1, "the failed compaction changed nothing")
}
