package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// ledgerWith returns a memory ledger holding one delivery "d1" whose
// attempts end as the results say (the last one decides its state; none:
// still pending).
func ledgerWith(t *testing.T, results ...hookrelay.Result) hookrelay.Ledger {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	store := memory.NewStore()
	_, err := store.Create(ctx, []hookrelay.Delivery{{ID: "d1", EventID: "e1", DestinationID: "x", FirstQueuedAt: now, NextAttemptAt: now}})
	require.NoError(t, err)
	for i, res := range results {
		claims, err := store.Claim(ctx, hookrelay.ClaimParams{Now: now, Limit: 1, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, claims, 1)
		lease := claims[0].Lease
		a := hookrelay.Attempt{DeliveryID: "d1", Number: i + 1, Kind: res.Kind, Outcome: res.Outcome, StatusCode: res.StatusCode, Reason: res.Reason}
		switch {
		case res.Kind == hookrelay.KindDelivered:
			require.NoError(t, store.MarkDelivered(ctx, hookrelay.MarkDeliveredParams{ID: "d1", Lease: lease, Attempt: a, Now: now}))
		case i == len(results)-1:
			require.NoError(t, store.RecordDeadLetter(ctx, hookrelay.RecordDeadLetterParams{ID: "d1", Lease: lease, Reason: "attempts_exhausted", Attempt: &a, Now: now}))
		default:
			require.NoError(t, store.RecordRetry(ctx, hookrelay.RecordRetryParams{ID: "d1", Lease: lease, Attempt: a, NextAttempt: i + 2, NextAttemptAt: now, Now: now}))
			require.NoError(t, store.RetryAt(ctx, hookrelay.RetryAtParams{Delivery: claims[0].Delivery, Lease: lease, At: now, Now: now}))
		}
	}
	return store
}

func TestCheckCatchesEachViolation(t *testing.T) {
	ok204 := hookrelay.Delivered(204)
	unavailable := hookrelay.Retryable(hookrelay.ReasonServiceUnavailable).WithStatus(503)
	lost := hookrelay.Unknown(hookrelay.ReasonConnectionReset)
	accept := request{fault: faultAccept, status: 204}
	for _, tc := range []struct {
		name      string
		ledger    hookrelay.Ledger
		reqs      map[string][]request
		applied   map[string]int
		violation string // "" for none
	}{
		{"retry then delivered is consistent", ledgerWith(t, unavailable, ok204),
			map[string][]request{"d1": {{fault: faultServerError, status: 503}, accept}}, map[string]int{"d1": 1}, ""},
		{"a request killed before the ledger write is allowed", ledgerWith(t, ok204),
			map[string][]request{"d1": {{fault: faultDropAfterApply}, {fault: faultAccept, status: 204, replayed: true}}}, map[string]int{"d1": 1}, ""},
		{"effect applied twice", ledgerWith(t, ok204),
			map[string][]request{"d1": {accept, accept}}, map[string]int{"d1": 2}, "effect applied 2 times"},
		{"delivered but never applied", ledgerWith(t, ok204),
			map[string][]request{"d1": {accept}}, map[string]int{}, "never applied it"},
		{"ledger status the recipient never wrote", ledgerWith(t, unavailable, ok204),
			map[string][]request{"d1": {accept, accept}}, map[string]int{"d1": 1}, "status 503"},
		{"more answered attempts than requests", ledgerWith(t, unavailable, ok204),
			map[string][]request{"d1": {accept}}, map[string]int{"d1": 1}, "2 answered attempts, the recipient saw 1 requests"},
		{"an unknown outcome whose request never arrived is allowed", ledgerWith(t, lost, ok204),
			map[string][]request{"d1": {accept}}, map[string]int{"d1": 1}, ""},
		{"still pending", ledgerWith(t),
			nil, nil, "still pending"},
		{"dead and applied with every response seen", ledgerWith(t, unavailable),
			map[string][]request{"d1": {{fault: faultServerError, status: 503}}}, map[string]int{"d1": 1}, "no attempt was unknown"},
		{"dead and applied after a lost response", ledgerWith(t, lost, unavailable),
			map[string][]request{"d1": {{fault: faultDropAfterApply}, {fault: faultServerError, status: 503}}}, map[string]int{"d1": 1}, ""},
		{"request for an unknown ID", ledgerWith(t, ok204),
			map[string][]request{"d1": {accept}, "d9": {accept}}, map[string]int{"d1": 1}, "never enqueued"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, v := check(context.Background(), tc.ledger, []string{"d1"}, tc.reqs, tc.applied)
			if tc.violation == "" {
				assert.Empty(t, v)
				return
			}
			require.NotEmpty(t, v)
			found := false
			for _, line := range v {
				found = found || strings.Contains(line, tc.violation)
			}
			assert.True(t, found, "%q among %q", tc.violation, v)
		})
	}
}
