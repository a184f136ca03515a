package hookrelay

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The lowest limit of its own a destination has follows changes: a
// destination whose limit is raised or removed no longer holds every idle
// destination's default room down (claimOnce).
func TestLowestLimitFollowsChangedLimits(t *testing.T) {
	var w worker
	w.init()
	_, ok := w.lowestLimit()
	assert.False(t, ok, "no destination has a limit of its own")
	w.setLimit("a", 2)
	w.setLimit("b", 5)
	w.setLimit("b", 5) // seen again, unchanged
	lowest, ok := w.lowestLimit()
	assert.True(t, ok)
	assert.Equal(t, 2, lowest)
	w.setLimit("a", 8)
	lowest, _ = w.lowestLimit()
	assert.Equal(t, 5, lowest, "a raised to 8")
	w.setLimit("b", 0)
	lowest, _ = w.lowestLimit()
	assert.Equal(t, 8, lowest, "b's limit removed")
	w.setLimit("a", 0)
	_, ok = w.lowestLimit()
	assert.False(t, ok, "every limit removed")
	assert.Empty(t, w.limits)
}
