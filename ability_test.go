package hookrelay_test

import (
	"context"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// Wrappers as a metrics or tracing layer would write them: they embed only
// the port, which hides every optional ability, and say what they wrap.
type tracedLedger struct{ hookrelay.Ledger }

func (l tracedLedger) Unwrap() hookrelay.Ledger { return l.Ledger }

type tracedQueue struct{ hookrelay.Queue }

func (q tracedQueue) Unwrap() hookrelay.Queue { return q.Queue }

type tracedDestinations struct{ hookrelay.Destinations }

func (d tracedDestinations) Unwrap() hookrelay.Destinations { return d.Destinations }

// loop unwraps to itself.
type loop struct{ hookrelay.Ledger }

func (l *loop) Unwrap() hookrelay.Ledger { return l }

func TestAsFindsAbilitiesThroughWrappers(t *testing.T) {
	store := memory.NewStore()
	ledger := tracedLedger{tracedLedger{store}} // two layers
	_, ok := hookrelay.As[hookrelay.DeadLetterLedger](ledger)
	assert.True(t, ok, "DeadLetterLedger")
	_, ok = hookrelay.As[hookrelay.RedriveAuditLog](ledger)
	assert.True(t, ok, "RedriveAuditLog")
	_, ok = hookrelay.As[hookrelay.LeaseLedger](ledger)
	assert.True(t, ok, "LeaseLedger")
	_, ok = hookrelay.As[hookrelay.LedgerStats](ledger)
	assert.True(t, ok, "LedgerStats")
	lq, ok := hookrelay.As[hookrelay.LedgerQueue](tracedQueue{store})
	assert.True(t, ok, "LedgerQueue")
	assert.Same(t, store, lq.(*memory.Store))
	_, ok = hookrelay.As[hookrelay.DestinationPauser](tracedDestinations{memory.NewDestinations()})
	assert.True(t, ok, "DestinationPauser")

	_, ok = hookrelay.As[hookrelay.DeadLetterLedger](separate{store})
	assert.False(t, ok, "a wrapper without Unwrap hides the ability")
	_, ok = hookrelay.As[hookrelay.DeadLetterLedger](nil)
	assert.False(t, ok)
	_, ok = hookrelay.As[hookrelay.DeadLetterLedger](&loop{})
	assert.False(t, ok, "a wrapper that unwraps to itself ends the search")
	_, ok = hookrelay.As[hookrelay.DeadLetterLedger](tracedLedger{nil})
	assert.False(t, ok, "a wrapper of nothing has nothing")
}

// A client over wrapped ports keeps redrive and pausing, which would
// otherwise fail with ErrUnsupported.
func TestClientKeepsAbilitiesThroughWrappers(t *testing.T) {
	ctx := context.Background()
	store := memory.NewStore()
	dests := memory.NewDestinations(hookrelay.Destination{ID: "acct", TenantID: "t", URL: "https://example.com/hook"})
	c, err := hookrelay.New(hookrelay.Config{
		Queue: tracedQueue{store}, Ledger: tracedLedger{store}, Destinations: tracedDestinations{dests}, Clock: clock.NewMock(),
	})
	require.NoError(t, err)
	_, err = c.PlanRedrive(ctx, hookrelay.DeadLetterFilter{})
	assert.NoError(t, err, "PlanRedrive finds the DeadLetterLedger")
	_, err = c.DeadLetters(ctx, hookrelay.DeadLettersParams{})
	assert.NoError(t, err)
	require.NoError(t, c.PauseDestination(ctx, "acct"), "PauseDestination finds the DestinationPauser")
	d, err := dests.Destination(ctx, "acct")
	require.NoError(t, err)
	assert.True(t, d.Paused)
}

// The worker's fast path survives a wrapped queue: the queue unwraps to the
// same LedgerQueue as the ledger.
func TestLedgerQueueFastPathThroughAWrappedQueue(t *testing.T) {
	store := &countingStore{Store: memory.NewStore()}
	deliverThree(t, store, tracedQueue{store})
	assert.Zero(t, store.wasDelivered.Load(), "a fresh claim needs no ledger check")
	assert.Zero(t, store.acks.Load(), "the ledger write was the acknowledgement")
}
