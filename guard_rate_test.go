package hookrelay

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// guardOnlyDestinations is a Destinations port with the DestinationGuard
// ability (an in-process GuardMap), for tests that use the guard only.
type guardOnlyDestinations struct {
	Destinations // nil: the test uses the guard only
	GuardMap
}

// newGuardClient returns a client whose Destinations have a GuardMap
// guard, for tests that call admitSend.
func newGuardClient(t *testing.T) *Client {
	t.Helper()
	type ports struct {
		Queue
		Ledger
	}
	c, err := New(Config{Queue: ports{}, Ledger: ports{}, Destinations: &guardOnlyDestinations{}})
	require.NoError(t, err)
	return c
}

// A rate so small that its wait for the next token is centuries (stores
// accept any finite positive MaxPerSecond) still holds the destination:
// the wait overflowed time.Duration and the delivery was released to a
// time in the past, claimed again at once and released again, in a loop.
func TestATinyRateHoldsTheDestinationInTheFuture(t *testing.T) {
	c := newGuardClient(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, rate := range []float64{1e-9, 1e-12, 5e-324} {
		d := Delivery{ID: "dlv_1", DestinationID: fmt.Sprint("dest_", rate)}
		rules := c.rulesFor(Destination{ID: d.DestinationID, MaxPerSecond: rate})
		first, err := c.admitSend(ctx, d, rules, false, now)
		require.NoError(t, err)
		require.True(t, first.ok, "rate %v: the bucket starts full", rate)
		later := now.Add(time.Second)
		second, err := c.admitSend(ctx, d, rules, false, later)
		require.NoError(t, err)
		require.False(t, second.ok, "rate %v: the bucket is empty", rate)
		assert.True(t, second.until.After(later), "rate %v: held until %v, after %v", rate, second.until, later)
		assert.False(t, second.until.After(maxStorableTime), "rate %v: held no later than a store can hold", rate)
	}
}

// The clock going back (a mock clock set earlier, an NTP step) does not
// freeze a rate-limited destination for the whole step: the bucket's
// elapsed time was negative and drained it by the step times the rate.
func TestARateLimitSurvivesTheClockGoingBack(t *testing.T) {
	c := newGuardClient(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	d := Delivery{ID: "dlv_1", DestinationID: "dest_1"}
	rules := c.rulesFor(Destination{ID: "dest_1", MaxPerSecond: 2})
	for range 2 { // the burst: one second's worth
		a, err := c.admitSend(ctx, d, rules, false, now)
		require.NoError(t, err)
		require.True(t, a.ok)
	}
	earlier := now.Add(-time.Hour)
	a, err := c.admitSend(ctx, d, rules, false, earlier)
	require.NoError(t, err)
	if !a.ok {
		assert.False(t, a.until.After(earlier.Add(time.Second)), "held until %v, an hour after the clock went back to %v", a.until, earlier)
	}
}

// An attempt whose time was read before a slower path to the store (a
// destination read, a guard row another worker held locked) may take its
// token after an attempt that read a later time. Its earlier time must not
// move the bucket's refill time back: the span between the two was counted
// as refill twice, and the bucket let more sends through than its rate.
func TestALateAdmissionWithAnEarlierTimeDoesNotRefillTheBucketTwice(t *testing.T) {
	c := newGuardClient(t)
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	d := Delivery{ID: "dlv_1", DestinationID: "dest_1"}
	rules := c.rulesFor(Destination{ID: "dest_1", MaxPerSecond: 2})
	sent := 0
	for _, at := range []time.Duration{0, 0, time.Second, 500 * time.Millisecond, time.Second, time.Second} {
		a, err := c.admitSend(ctx, d, rules, false, t0.Add(at))
		require.NoError(t, err)
		if a.ok {
			sent++
		}
	}
	// A bucket of two refilling at two a second lets at most 2 + 2·1 sends
	// through from t0 to t0+1s, whatever order their times come in.
	assert.LessOrEqual(t, sent, 4, "sends admitted within one second at two a second")
}
