package hookrelay_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// timedSender is a Sender that says its attempts end within timeout
// (hookrelay.SendTimeouter), as the HTTP sender does. It records the
// deadline of the context each send gets.
type timedSender struct {
	timeout     time.Duration
	deadline    time.Time
	hasDeadline bool
}

func (s *timedSender) Send(ctx context.Context, _ hookrelay.SendParams) hookrelay.Result {
	s.deadline, s.hasDeadline = ctx.Deadline()
	return hookrelay.Delivered(204)
}

func (s *timedSender) SendTimeout(hookrelay.Destination) time.Duration { return s.timeout }

// untimedSender is a timedSender without SendTimeout: the client knows
// nothing of how long its sends take.
type untimedSender struct{ s *timedSender }

func (u untimedSender) Send(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
	return u.s.Send(ctx, p)
}

// No send may run past its lease: past it another worker may claim the
// delivery and send it too. The client bounds each send by the lease,
// unless the sender's own timeout (SendTimeouter) ends well before it —
// and then only on the wall clock, the one that timeout runs on.
func TestSendIsBoundedByItsLease(t *testing.T) {
	const leaseFor = 30 * time.Second
	for _, tc := range []struct {
		name    string
		timeout time.Duration // the sender's, 0: not a SendTimeouter
		mock    bool          // the client runs on a mock clock
		bounded bool          // the send's context ends at the lease
	}{
		{name: "sender without a timeout", bounded: true},
		{name: "sender timeout well inside the lease", timeout: 10 * time.Second, bounded: false},
		{name: "sender timeout ending with the lease", timeout: leaseFor, bounded: true},
		{name: "sender timeout within the margin of the lease", timeout: leaseFor - 500*time.Millisecond, bounded: true},
		{name: "sender timeout inside the lease on a mock clock", timeout: 10 * time.Second, mock: true, bounded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rec := &timedSender{timeout: tc.timeout}
			var sender hookrelay.Sender = rec
			if tc.timeout == 0 {
				sender = untimedSender{rec}
			}
			store := memory.NewStore()
			cfg := hookrelay.Config{
				Queue: store, Ledger: store, Sender: sender, LeaseFor: time.Hour,
				Destinations: memory.NewDestinations(hookrelay.Destination{ID: "d", URL: "https://example.com/hook"}),
			}
			if tc.mock {
				clk := clock.NewMock()
				clk.Set(time.Now())
				cfg.Clock = clk
			}
			c, err := hookrelay.New(cfg)
			require.NoError(t, err)
			_, err = c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "e", TenantID: "t", DestinationID: "d", EventType: "x", Payload: []byte("{}")})
			require.NoError(t, err)
			claims, err := store.Claim(ctx, hookrelay.ClaimParams{Now: c.Clock().Now(), Limit: 1, LeaseFor: leaseFor, Holder: "test"})
			require.NoError(t, err)
			require.Len(t, claims, 1)
			require.NoError(t, c.Process(ctx, claims[0]))

			if tc.bounded {
				require.True(t, rec.hasDeadline, "the send's context has no deadline: it could run past its lease")
				assert.True(t, rec.deadline.Equal(claims[0].Lease.ExpiresAt), "send deadline %v, lease ends %v", rec.deadline, claims[0].Lease.ExpiresAt)
			} else {
				assert.False(t, rec.hasDeadline, "the client added a deadline the sender's own timeout makes redundant")
			}
		})
	}
}
