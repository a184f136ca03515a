package hookrelay

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// answerLateGuard is a DestinationGuard (an in-process GuardMap) whose
// first UpdateGuard writes at once but returns its answer only when the
// test closes release; later calls return as they finish, each signalled
// on done.
type answerLateGuard struct {
	Destinations // nil: the test uses the guard only
	GuardMap
	held    chan struct{} // closed when the first call has written
	release chan struct{}
	done    chan GuardState
	mu      sync.Mutex
	calls   int
}

func (g *answerLateGuard) UpdateGuard(ctx context.Context, p UpdateGuardParams) (GuardState, error) {
	st, err := g.GuardMap.UpdateGuard(ctx, p)
	g.mu.Lock()
	g.calls++
	first := g.calls == 1
	g.mu.Unlock()
	if first {
		close(g.held)
		<-g.release
		return st, err
	}
	g.done <- st
	return st, err
}

// Two attempts to one destination fail at once and each records its
// failure in the store. The one the store ran first must not put its
// answer (one failure, circuit closed) into the worker's cache after the
// other's (two failures: the circuit it opened), or the worker's next
// attempt reads a closed circuit and is sent. This happened on MariaDB
// under load (the conformance suite's
// DestinationGuard/StartedWorkerOpensProbesOnceAndClosesTheCircuit saw a
// fifth send, 4 runs in 80 with -race and two runs at once).
func TestGuardCacheKeepsTheNewerOfTwoConcurrentWrites(t *testing.T) {
	g := &answerLateGuard{held: make(chan struct{}), release: make(chan struct{}), done: make(chan GuardState, 1)}
	type ports struct {
		Queue
		Ledger
	}
	c, err := New(Config{Queue: ports{}, Ledger: ports{}, Destinations: g,
		CircuitFailureThreshold: 2, CircuitCoolDown: time.Minute, DestinationCacheTTL: time.Hour})
	require.NoError(t, err)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	rules := c.rulesFor(Destination{ID: "dest_1"})
	failed := Retryable(ReasonConnectionRefused)

	var wg sync.WaitGroup
	wg.Go(func() {
		c.recordOutcome(ctx, &Delivery{ID: "a", DestinationID: "dest_1"}, &failed, rules, c.policy, false, now)
	})
	<-g.held // the first failure is stored; its answer is held back
	wg.Go(func() {
		c.recordOutcome(ctx, &Delivery{ID: "b", DestinationID: "dest_1"}, &failed, rules, c.policy, false, now)
	})
	// Unordered, the second write runs now and opens the circuit; ordered,
	// it waits for the first's answer. Either way the first then answers.
	select {
	case st := <-g.done:
		require.True(t, st.IsOpen(), "the second failure opens the circuit")
	case <-time.After(time.Second):
	}
	close(g.release)
	wg.Wait()
	select {
	case <-g.done:
	default:
	}

	stored, err := g.GuardMap.GuardStates(ctx, GuardStatesParams{IDs: []string{"dest_1"}})
	require.NoError(t, err)
	require.Len(t, stored, 1)
	require.True(t, stored[0].IsOpen(), "two failures at threshold 2 open the circuit")
	cached, ok := c.worker.guards.get("dest_1", now)
	require.True(t, ok)
	assert.Equal(t, stored[0], cached, "the cache holds the newer state, the one the store holds")
	adm, err := c.admitSend(ctx, Delivery{ID: "c", DestinationID: "dest_1"}, rules, true, now)
	require.NoError(t, err)
	assert.False(t, adm.ok, "the next attempt finds the circuit open")
}
