package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
	"github.com/hookrelay/hookrelay/internal/benchenv"
)

func only(f fault) faultOdds {
	var o faultOdds
	o[f] = 1
	return o
}

// Each fault, as the real sender sees it, followed by an accepted retry of
// the same delivery: the effect lands exactly once either way.
func TestRecipientFaultsAsTheSenderSeesThem(t *testing.T) {
	const timeout = 200 * time.Millisecond
	sender, err := benchenv.LoopbackSender(hookhttp.Config{Timeout: timeout})
	require.NoError(t, err)
	defer sender.CloseIdleConnections()
	for _, tc := range []struct {
		fault   fault
		kind    hookrelay.Kind
		outcome hookrelay.Outcome
		status  int
		applied int // by the first request
	}{
		{faultAccept, hookrelay.KindDelivered, hookrelay.OutcomeAccepted, 204, 1},
		{faultServerError, hookrelay.KindRetryable, hookrelay.OutcomeRejected, 503, 0},
		{faultRateLimited, hookrelay.KindRetryable, hookrelay.OutcomeRejected, 429, 0},
		{faultDropAfterApply, hookrelay.KindRetryable, hookrelay.OutcomeUnknown, 0, 1},
		{faultHang, hookrelay.KindRetryable, hookrelay.OutcomeUnknown, 0, 1},
	} {
		t.Run(tc.fault.String(), func(t *testing.T) {
			r, err := startRecipient(secret, 2*timeout, 1, only(tc.fault))
			require.NoError(t, err)
			defer r.close()
			event, destID := "evt_"+tc.fault.String(), "dest_0"
			p := hookrelay.SendParams{
				Delivery: hookrelay.Delivery{
					ID: hookrelay.DeliveryID(event, destID), EventID: event, DestinationID: destID, Attempt: 1,
					Payload: fmt.Appendf(nil, `{"event":%q,"destination":%q}`, event, destID),
				},
				Destination: hookrelay.Destination{ID: destID, URL: r.url + "/d/0", Secrets: []string{secret}},
				Now:         time.Now(),
			}
			id := p.Delivery.ID

			res := sender.Send(context.Background(), p)
			assert.Equal(t, tc.kind, res.Kind, "%+v", res)
			assert.Equal(t, tc.outcome, res.Outcome)
			assert.Equal(t, tc.status, res.StatusCode)
			// The recipient records a request when it is done with it
			// (after the hang, for faultHang).
			require.Eventually(t, func() bool {
				reqs, _, _ := r.snapshot()
				return len(reqs[id]) == 1
			}, 5*time.Second, 10*time.Millisecond)
			_, applied, _ := r.snapshot()
			assert.Equal(t, tc.applied, applied[id])

			r.setOdds(only(faultAccept))
			p.Delivery.Attempt, p.Now = 2, time.Now()
			res = sender.Send(context.Background(), p)
			assert.Equal(t, hookrelay.KindDelivered, res.Kind, "%+v", res)
			reqs, applied, violations := r.snapshot()
			assert.Equal(t, 1, applied[id], "exactly once")
			assert.Empty(t, violations)
			require.Len(t, reqs[id], 2)
			assert.Equal(t, tc.applied == 1, reqs[id][1].replayed, "a retry after the effect is replayed, not applied")
		})
	}
}
