package hookrelay

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With more destinations in use within a TTL than the sweep size, an
// insert must not look at the whole map each time: 5,000 valid entries
// cost a handful of sweeps, not one per insert past the first 1,024.
func TestExpiringSweepsRarelyWhileEveryEntryIsValid(t *testing.T) {
	var m expiring[int]
	now := time.Unix(1_700_000_000, 0)
	const n = 5000
	for i := range n {
		m.put(fmt.Sprintf("dest_%d", i), i, now.Add(time.Hour), now)
	}
	require.Len(t, m.entries, n, "no valid entry is dropped")
	// 1,024 → 2,048 → 4,096: three sweeps, each doubling the next size.
	assert.LessOrEqual(t, m.sweeps, 3, "sweeps while inserting %d valid entries", n)
	for i := range n {
		v, ok := m.get(fmt.Sprintf("dest_%d", i), now)
		require.True(t, ok)
		require.Equal(t, i, v)
	}
}

// Expired entries are dropped by the sweeps: a cache whose destinations
// come and go holds about twice those still valid, not every one it saw.
func TestExpiringDropsExpiredEntries(t *testing.T) {
	var m expiring[int]
	now := time.Unix(1_700_000_000, 0)
	for i := range 20_000 {
		// 100 destinations a second, each valid for a second.
		at := now.Add(time.Duration(i) * 10 * time.Millisecond)
		m.put(fmt.Sprintf("dest_%d", i), i, at.Add(time.Second), at)
		require.LessOrEqual(t, len(m.entries), expiringSweepMin, "entries held after %d inserts", i+1)
	}
	_, ok := m.get("dest_0", now.Add(time.Hour))
	assert.False(t, ok, "an expired entry is not returned")
	m.put("dest_19999", 1, now.Add(time.Hour), now)
	m.forget("dest_19999")
	_, ok = m.get("dest_19999", now)
	assert.False(t, ok, "a forgotten entry is not returned")
}

// A key put again replaces its entry, valid or not, without a sweep.
func TestExpiringPutReplaces(t *testing.T) {
	var m expiring[string]
	now := time.Unix(1_700_000_000, 0)
	m.put("d", "old", now.Add(time.Second), now)
	_, ok := m.get("d", now.Add(time.Second))
	assert.False(t, ok, "valid until, not through, its time")
	m.put("d", "new", now.Add(time.Minute), now.Add(2*time.Second))
	v, ok := m.get("d", now.Add(3*time.Second))
	require.True(t, ok)
	assert.Equal(t, "new", v)
	assert.Zero(t, m.sweeps)
}
