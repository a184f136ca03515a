package hookrelay

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The lowest limit of its own a destination has follows changes: a
// destination whose limit is raised or removed no longer holds every idle
// destination's default room down (claimOnce).
func TestLowestLimitFollowsChangedLimits(t *testing.T) {
	var w worker
	w.init()
	now := time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)
	_, ok := w.lowestLimit()
	assert.False(t, ok, "no destination has a limit of its own")
	w.setLimit("a", 2, now)
	w.setLimit("b", 5, now)
	w.setLimit("b", 5, now) // seen again, unchanged
	lowest, ok := w.lowestLimit()
	assert.True(t, ok)
	assert.Equal(t, 2, lowest)
	w.setLimit("a", 8, now)
	lowest, _ = w.lowestLimit()
	assert.Equal(t, 5, lowest, "a raised to 8")
	w.setLimit("b", 0, now)
	lowest, _ = w.lowestLimit()
	assert.Equal(t, 8, lowest, "b's limit removed")
	w.setLimit("a", 0, now)
	_, ok = w.lowestLimit()
	assert.False(t, ok, "every limit removed")
	assert.Empty(t, w.limits.entries)
}

// A worker that sends to new destinations all the time does not keep the
// limit of every destination it ever sent to: a limit not looked up for
// limitMemory is dropped, and no longer counts toward the lowest. One
// looked up again meanwhile is kept.
func TestLimitsOfDestinationsNotSentToAreForgotten(t *testing.T) {
	var w worker
	w.init()
	start := time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 3 * expiringSweepMin
	for i := range n {
		w.setLimit(fmt.Sprintf("old_%d", i), 1, start)
	}
	w.setLimit("kept", 3, start)
	later := start.Add(limitMemory / 2)
	w.setLimit("kept", 3, later)
	lowest, _ := w.lowestLimit()
	assert.Equal(t, 1, lowest)

	after := start.Add(limitMemory + time.Second)
	for i := range n {
		w.setLimit(fmt.Sprintf("new_%d", i), 5, after)
	}
	assert.LessOrEqual(t, len(w.limits.entries), n+1, "limits held after the old destinations' memory ran out")
	lowest, ok := w.lowestLimit()
	assert.True(t, ok)
	assert.Equal(t, 3, lowest, "the old destinations' limit of 1 was forgotten; kept's 3 was not")
	assert.Equal(t, map[int]int{3: 1, 5: n}, w.limitCounts)
	w.perDestDefault = 4
	assert.Equal(t, 3, w.limitFor("kept"))
	assert.Equal(t, 4, w.limitFor("old_0"), "a forgotten destination has the default limit until looked up again")
}
