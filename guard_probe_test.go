package hookrelay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// A half-open circuit's probe cancelled by a shutdown (its send did not
// finish) gives the probe back: the next process to start sends the next
// probe at once. It held the circuit half-open for a whole LeaseFor
// (2 minutes), so every deploy that cut a probe short kept a recovered
// recipient waiting that long.
func TestAProbeCancelledByShutdownGivesTheProbeBack(t *testing.T) {
	ctx := context.Background()
	store := memory.NewStore()
	dests := memory.NewDestinations(hookrelay.Destination{ID: "acct", TenantID: "tenant_a", URL: "https://acct.example/hooks"})
	clk := clock.NewMock()
	clk.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var sends int
	var fail bool
	var cancelRun context.CancelFunc
	newClient := func() *hookrelay.Client {
		c, err := hookrelay.New(hookrelay.Config{Queue: store, Ledger: store, Destinations: dests, Clock: clk,
			CircuitFailureThreshold: 1, CircuitCoolDown: time.Minute,
			Sender: hookrelay.SenderFunc(func(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
				sends++
				if cancelRun != nil {
					cancelRun() // the shutdown, mid-send
					<-ctx.Done()
					return hookrelay.Unknown(hookrelay.ReasonTimeout)
				}
				if fail {
					return hookrelay.Retryable(hookrelay.ReasonConnectionRefused)
				}
				return hookrelay.Delivered(200)
			})})
		require.NoError(t, err)
		return c
	}
	step := func(c *hookrelay.Client, ctx context.Context) error {
		cs, err := store.Claim(context.Background(), hookrelay.ClaimParams{Now: clk.Now(), Limit: 1, LeaseFor: 2 * time.Minute, Holder: "w"})
		require.NoError(t, err)
		require.Len(t, cs, 1)
		return c.Process(ctx, cs[0])
	}
	first := newClient()
	for i := range 3 {
		_, err := first.Enqueue(ctx, hookrelay.EnqueueParams{EventID: fmt.Sprint("evt_", i), TenantID: "tenant_a",
			DestinationID: "acct", EventType: "lease.payment_recorded", Payload: []byte(`{}`)})
		require.NoError(t, err)
	}
	fail = true
	require.NoError(t, step(first, ctx)) // the circuit opens
	clk.Add(time.Minute + time.Second)   // the cool-down ends

	runCtx, cancel := context.WithCancel(ctx)
	cancelRun = cancel
	require.ErrorIs(t, step(first, runCtx), context.Canceled, "the probe's send was cut short")
	cancelRun = nil
	require.Equal(t, 2, sends)

	// The next process starts a second later; the recipient is up again.
	clk.Add(time.Second)
	fail = false
	require.NoError(t, step(newClient(), ctx))
	assert.Equal(t, 3, sends, "the next probe went at once")
}
