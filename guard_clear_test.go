package hookrelay_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// clearHarness is a running worker sending to destination "acct" with a
// sender answering what next says, and the events it saw. It runs in a
// synctest bubble: time is the bubble's, never the wall clock's.
type clearHarness struct {
	mu     sync.Mutex
	next   hookrelay.Result
	sent   []string // event IDs sent, in order
	events []hookrelay.Event
}

func (h *clearHarness) sender() hookrelay.Sender {
	return hookrelay.SenderFunc(func(_ context.Context, p hookrelay.SendParams) hookrelay.Result {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.sent = append(h.sent, p.Delivery.EventID)
		return h.next
	})
}

func (h *clearHarness) observer() hookrelay.Observer {
	return hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.events = append(h.events, e)
	})
}

func (h *clearHarness) answer(r hookrelay.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next = r
}

func (h *clearHarness) sentIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.sent...)
}

func (h *clearHarness) of(name hookrelay.EventName) []hookrelay.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookrelay.Event
	for _, e := range h.events {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func enqueueTo(t *testing.T, c *hookrelay.Client, eventID string) {
	t.Helper()
	_, err := c.Enqueue(context.Background(), hookrelay.EnqueueParams{EventID: eventID, TenantID: "tenant_a",
		DestinationID: "acct", EventType: "lease.payment_recorded", Payload: []byte(`{}`)})
	require.NoError(t, err)
}

func guardOf(t *testing.T, dests *memory.Destinations) hookrelay.GuardState {
	t.Helper()
	gs, err := dests.GuardStates(context.Background(), hookrelay.GuardStatesParams{IDs: []string{"acct"}})
	require.NoError(t, err)
	require.Len(t, gs, 1)
	return gs[0]
}

// A destination held by a Retry-After (an hour, within the policy's cap)
// behind a circuit that opened is sent to as soon as an operator clears its
// guard: the worker of this process claims its waiting delivery at once,
// with no time passing. The circuit is closed, the failures in a row are
// gone, and the rate-limit bucket is kept as it was.
func TestClearDestinationGuardSendsAHeldDestinationAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.NewStore()
		dests := memory.NewDestinations(hookrelay.Destination{ID: "acct", TenantID: "tenant_a", URL: "https://acct.example/hooks", MaxPerSecond: 10})
		h := &clearHarness{}
		policy := hookrelay.DefaultPolicy()
		policy.MaxDelay = 2 * time.Hour
		c, err := hookrelay.New(hookrelay.Config{Queue: store, Ledger: store, Destinations: dests, Policy: &policy,
			CircuitFailureThreshold: 1, CircuitCoolDown: time.Hour,
			Sender: h.sender(), Observer: h.observer()})
		require.NoError(t, err)
		require.NoError(t, c.Start(ctx))
		defer func() { require.NoError(t, c.Stop(ctx)) }()

		h.answer(hookrelay.Result{Kind: hookrelay.KindRetryable, StatusCode: 429, Reason: hookrelay.ReasonRateLimited, RetryAfter: time.Hour})
		enqueueTo(t, c, "evt_first")
		synctest.Wait()
		require.Equal(t, []string{"evt_first"}, h.sentIDs())
		held := guardOf(t, dests)
		require.True(t, held.HeldUntil.After(time.Now()), "held: %+v", held)
		require.Equal(t, hookrelay.CircuitOpen, held.Circuit)

		h.answer(hookrelay.Delivered(200))
		enqueueTo(t, c, "evt_second")
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, []string{"evt_first"}, h.sentIDs(), "held: nothing more is sent")

		require.NoError(t, c.ClearDestinationGuard(ctx, "acct"))
		cleared := guardOf(t, dests)
		synctest.Wait() // no time passes
		assert.Equal(t, []string{"evt_first", "evt_second"}, h.sentIDs(), "sent right after the clear")

		assert.Zero(t, cleared.HeldUntil)
		assert.Zero(t, cleared.LimitedUntil)
		assert.False(t, cleared.IsOpen(), "circuit closed: %+v", cleared)
		assert.Zero(t, cleared.ConsecutiveFailures)
		assert.Empty(t, cleared.Probe)
		assert.Zero(t, cleared.OpenUntil)
		assert.Equal(t, held.Tokens, cleared.Tokens, "the bucket is kept")
		assert.Equal(t, held.RefilledAt, cleared.RefilledAt, "the bucket is kept")
		assert.Equal(t, held.FailingSince, cleared.FailingSince, "the failing run is kept")

		ev := h.of(hookrelay.EventDestinationGuardCleared)
		require.Len(t, ev, 1)
		assert.Equal(t, "acct", ev[0].Delivery.DestinationID)
		assert.Equal(t, held.ClaimableAt(), ev[0].At)
		assert.EqualValues(t, 1, ev[0].Count)

		assert.ErrorIs(t, c.ClearDestinationGuard(ctx, "nowhere"), hookrelay.ErrDestinationNotFound)
		_, err = dests.GuardStates(ctx, hookrelay.GuardStatesParams{IDs: []string{"nowhere"}})
		require.NoError(t, err)
	})
}

// A clear made by another process sharing the store (an operator's CLI) is
// seen by a running worker that found the destination held (by a
// Retry-After another worker was answered), released the delivery it had
// claimed and skips the destination: the delivery goes within the worker's
// PausedRecheck of the clear, not once the hour's hold ends.
func TestClearDestinationGuardFromAnotherProcessReachesARunningWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.NewStore()
		dests := memory.NewDestinations(hookrelay.Destination{ID: "acct", TenantID: "tenant_a", URL: "https://acct.example/hooks"})
		h := &clearHarness{}
		policy := hookrelay.DefaultPolicy()
		policy.MaxDelay = 2 * time.Hour
		worker, err := hookrelay.New(hookrelay.Config{Queue: store, Ledger: store, Destinations: dests, Policy: &policy,
			Sender: h.sender(), Observer: h.observer()})
		require.NoError(t, err)
		other, err := hookrelay.New(hookrelay.Config{Queue: store, Ledger: store, Destinations: dests, Policy: &policy,
			Sender: h.sender()})
		require.NoError(t, err)

		// Another process is answered 503 with an hour's Retry-After.
		h.answer(hookrelay.Result{Kind: hookrelay.KindRetryable, StatusCode: 503, Reason: hookrelay.ReasonServiceUnavailable, RetryAfter: time.Hour})
		enqueueTo(t, other, "evt_first")
		cs, err := store.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Minute, Holder: "other"})
		require.NoError(t, err)
		require.Len(t, cs, 1)
		require.NoError(t, other.Process(ctx, cs[0]))
		require.Equal(t, []string{"evt_first"}, h.sentIDs())

		h.answer(hookrelay.Delivered(200))
		enqueueTo(t, other, "evt_second")
		require.NoError(t, worker.Start(ctx))
		defer func() { require.NoError(t, worker.Stop(ctx)) }()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		require.Equal(t, []string{"evt_first"}, h.sentIDs(), "held")
		require.NotEmpty(t, h.of(hookrelay.EventReleased), "the worker claimed the delivery and found the hold")

		require.NoError(t, other.ClearDestinationGuard(ctx, "acct"))
		time.Sleep(hookrelay.DefaultPausedRecheck + hookrelay.DefaultPollInterval)
		synctest.Wait()
		assert.Equal(t, []string{"evt_first", "evt_second"}, h.sentIDs(), "sent within the worker's PausedRecheck of the clear")
	})
}

// plainDestinations hides the memory store's DestinationGuard: the client
// keeps the guard in its own process.
type plainDestinations struct{ hookrelay.Destinations }

// Without a DestinationGuard the client's own guard is cleared: an open
// circuit of this process closes and its waiting delivery goes at once.
func TestClearDestinationGuardInProcessWithoutADestinationGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.NewStore()
		dests := plainDestinations{memory.NewDestinations(hookrelay.Destination{ID: "acct", TenantID: "tenant_a", URL: "https://acct.example/hooks"})}
		_, isGuard := hookrelay.As[hookrelay.DestinationGuard](dests)
		require.False(t, isGuard)
		h := &clearHarness{}
		c, err := hookrelay.New(hookrelay.Config{Queue: store, Ledger: store, Destinations: dests,
			CircuitFailureThreshold: 2, CircuitCoolDown: time.Hour,
			Sender: h.sender(), Observer: h.observer()})
		require.NoError(t, err)
		require.NoError(t, c.Start(ctx))
		defer func() { require.NoError(t, c.Stop(ctx)) }()

		h.answer(hookrelay.Retryable(hookrelay.ReasonConnectionRefused))
		enqueueTo(t, c, "evt_first")
		enqueueTo(t, c, "evt_second")
		synctest.Wait()
		require.Len(t, h.of(hookrelay.EventCircuitOpened), 1)
		h.answer(hookrelay.Delivered(200))
		enqueueTo(t, c, "evt_third")
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Len(t, h.sentIDs(), 2, "the circuit holds the third")

		require.NoError(t, c.ClearDestinationGuard(ctx, "acct"))
		synctest.Wait() // no time passes
		// The two that failed were due again meanwhile: all three go.
		assert.ElementsMatch(t, []string{"evt_first", "evt_second", "evt_third"}, h.sentIDs()[2:])
		ev := h.of(hookrelay.EventDestinationGuardCleared)
		require.Len(t, ev, 1)
		assert.EqualValues(t, 2, ev[0].Count)
		assert.ErrorIs(t, c.ClearDestinationGuard(ctx, "nowhere"), hookrelay.ErrDestinationNotFound)
	})
}
