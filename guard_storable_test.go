package hookrelay

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// storableGuard is a GuardMap that refuses, as the SQL store does, a state
// holding a time outside what int64 nanoseconds hold.
type storableGuard struct {
	Destinations // nil: the test uses the guard only
	GuardMap
}

func (g *storableGuard) UpdateGuard(ctx context.Context, p UpdateGuardParams) (GuardState, error) {
	update := p.Update
	var bad error
	p.Update = func(s GuardState) GuardState {
		old := s
		s = update(s)
		for name, t := range map[string]time.Time{"RefilledAt": s.RefilledAt, "LimitedUntil": s.LimitedUntil,
			"HeldUntil": s.HeldUntil, "OpenUntil": s.OpenUntil, "FailingSince": s.FailingSince} {
			if !t.IsZero() && (t.Before(minStorableTime) || t.After(maxStorableTime)) {
				bad = fmt.Errorf("%s %v is out of the storable range", name, t)
				return old
			}
		}
		return s
	}
	st, err := g.GuardMap.UpdateGuard(ctx, p)
	if err == nil && bad != nil {
		err = bad
	}
	return st, err
}

// A 429 whose Retry-After an uncapped policy honours for centuries, and a
// circuit cool-down as long, hold the destination as long as a store can
// keep a time: the hold or the opened circuit was past that, every store
// but the memory one refused the write, and the attempt's failure was not
// counted and its hold not kept (a worker error each time instead).
func TestGuardTimesPastTheStorableRangeAreHeldAsLongAsAStoreCan(t *testing.T) {
	type ports struct {
		Queue
		Ledger
	}
	var mu sync.Mutex
	var workerErrors []error
	g := &storableGuard{}
	c, err := New(Config{Queue: ports{}, Ledger: ports{}, Destinations: g,
		CircuitFailureThreshold: 1, CircuitCoolDown: math.MaxInt64,
		Observer: ObserverFunc(func(_ context.Context, e Event) {
			if e.Name == EventWorkerError {
				mu.Lock()
				workerErrors = append(workerErrors, e.Err)
				mu.Unlock()
			}
		})})
	require.NoError(t, err)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	uncapped := Policy{Version: "uncapped", MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: math.MaxInt64}
	rules := c.rulesFor(Destination{ID: "dest_1"})
	res := ClassifyStatus(429, math.MaxInt64) // a Retry-After of 292 years
	c.recordOutcome(ctx, &Delivery{ID: "dlv_1", DestinationID: "dest_1"}, &res, rules, uncapped, false, now)

	assert.Empty(t, workerErrors)
	gs, err := g.GuardStates(ctx, GuardStatesParams{IDs: []string{"dest_1"}})
	require.NoError(t, err)
	require.Len(t, gs, 1, "the failure was recorded")
	assert.True(t, maxStorableTime.Equal(gs[0].HeldUntil), "held as long as a store can, not until %v", gs[0].HeldUntil)
	assert.Equal(t, CircuitOpen, gs[0].Circuit)
	assert.True(t, maxStorableTime.Equal(gs[0].OpenUntil), "open as long as a store can, not until %v", gs[0].OpenUntil)
	a, err := c.admitSend(ctx, Delivery{ID: "dlv_2", DestinationID: "dest_1"}, rules, false, now.Add(time.Hour))
	require.NoError(t, err)
	assert.False(t, a.ok, "the next delivery waits")
}
