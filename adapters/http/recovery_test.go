package hookhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
	"github.com/hookrelay/hookrelay/adapters/http/recipient"
)

// accountingRecipient is an accounting integration behind real HTTP: the
// old path answers 503 (the integration moved), the new path verifies the
// Standard Webhooks signature against the rotated secret and deduplicates by
// webhook-id before booking the payment.
type accountingRecipient struct {
	srv     *httptest.Server
	effects atomic.Int32

	mu      sync.Mutex
	oldPath []string // webhook-id of each request to the old path
	newPath []string // webhook-id of each request to the new path
}

const rotatedSecret = "whsec_cm90YXRlZC1zZWNyZXQtMDEyMzQ1Njc4OWFi"

func newAccountingRecipient(t *testing.T, e *engine) *accountingRecipient {
	t.Helper()
	a := &accountingRecipient{}
	verifier, err := recipient.NewVerifier(recipient.VerifierConfig{Secrets: []string{rotatedSecret}, Clock: e.mock})
	require.NoError(t, err)
	idem, err := recipient.NewIdempotency(recipient.IdempotencyConfig{Store: recipient.NewMemoryStore(), Clock: e.mock})
	require.NoError(t, err)
	book := verifier.Middleware(idem.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		a.effects.Add(1)
		_, _ = io.WriteString(w, "payment booked")
	})))
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/webhooks", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.oldPath = append(a.oldPath, r.Header.Get("webhook-id"))
		a.mu.Unlock()
		http.Error(w, "integration moved; try later", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/v2/webhooks", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.newPath = append(a.newPath, r.Header.Get("webhook-id"))
		a.mu.Unlock()
		book.ServeHTTP(w, r)
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *accountingRecipient) seen() (old, fixed []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.oldPath...), append([]string(nil), a.newPath...)
}

// redrive runs a redrive while advancing the mock clock, so its rate
// limiter's waits pass; it returns the audit entry.
func (e *engine) redrive(t *testing.T, p hookrelay.RedriveParams) hookrelay.RedriveAudit {
	t.Helper()
	type result struct {
		a   hookrelay.RedriveAudit
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := e.client.Redrive(context.Background(), p)
		done <- result{a, err}
	}()
	var r result
	require.Eventually(t, func() bool {
		select {
		case r = <-done:
			return true
		default:
			e.mock.Add(100 * time.Millisecond)
			return false
		}
	}, 20*time.Second, time.Millisecond)
	require.NoError(t, r.err)
	return r.a
}

// The recovery rehearsal over real HTTP with the recipient kit: a
// payment webhook meets a moved integration, retries with one ID, exhausts
// its budget, is inspected, the destination is corrected (new URL and
// rotated secret), and a rate-limited redrive books the payment once.
func TestRecoveryRehearsalOverHTTP(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, newLoopbackSender(t, hookhttp.Config{}), 3)
	acct := newAccountingRecipient(t, e)
	require.NoError(t, e.dests.Put(ctx, hookrelay.Destination{ID: "accounting", TenantID: "tenant-1", URL: acct.srv.URL + "/v1/webhooks", Secrets: []string{secret}}))

	id := e.enqueue(t, "pay_7319", "accounting")
	second := e.enqueue(t, "pay_7320", "accounting")
	e.settle(t, id, second)

	d, attempts := e.delivery(t, id)
	require.Equal(t, hookrelay.StateDead, d.State)
	assert.Equal(t, hookrelay.ReasonAttemptsExhausted, d.LastReason)
	require.Len(t, attempts, 3)
	assert.Equal(t, http.StatusServiceUnavailable, attempts[2].StatusCode)
	old, _ := acct.seen()
	assert.ElementsMatch(t, []string{id, id, id, second, second, second}, old, "every attempt, the delayed ones too, carried its one delivery ID")

	page, err := e.client.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: hookrelay.DeadLetterFilter{DestinationIDs: []string{"accounting"}}})
	require.NoError(t, err)
	assert.Len(t, page.Deliveries, 2)
	plan, err := e.client.PlanRedrive(ctx, hookrelay.DeadLetterFilter{DestinationIDs: []string{"accounting"}})
	require.NoError(t, err)
	assert.Equal(t, []hookrelay.PlanRow{{TenantID: "tenant-1", DestinationID: "accounting", Reason: hookrelay.ReasonAttemptsExhausted, Count: 2}}, plan.Rows)

	require.NoError(t, e.dests.Put(ctx, hookrelay.Destination{ID: "accounting", TenantID: "tenant-1", URL: acct.srv.URL + "/v2/webhooks", Secrets: []string{rotatedSecret}}))
	audit := e.redrive(t, hookrelay.RedriveParams{
		Filter: hookrelay.DeadLetterFilter{DestinationIDs: []string{"accounting"}},
		Actor:  "ops@example", Reason: "integration moved to /v2, secret rotated", RatePerSecond: 1,
	})
	assert.Equal(t, hookrelay.RedriveFinished, audit.State)
	assert.EqualValues(t, 2, audit.Redriven)
	var redriven []time.Time
	for _, ev := range e.snapshot() {
		if ev.Name == hookrelay.EventRedriven {
			redriven = append(redriven, ev.Time)
		}
	}
	require.Len(t, redriven, 2)
	assert.GreaterOrEqual(t, redriven[1].Sub(audit.CreatedAt), time.Second, "one per second to the destination")

	e.settle(t, id, second)
	for _, x := range []string{id, second} {
		d, attempts := e.delivery(t, x)
		assert.Equal(t, hookrelay.StateDelivered, d.State)
		require.Len(t, attempts, 4, "three old attempts kept, one new")
		assert.Equal(t, 4, attempts[3].Number)
		assert.Equal(t, http.StatusOK, attempts[3].StatusCode)
	}
	_, fixed := acct.seen()
	assert.ElementsMatch(t, []string{id, second}, fixed, "the redrive sent the same delivery IDs")
	assert.Equal(t, int32(2), acct.effects.Load(), "one booking per payment")
}

// The permanent half of the rehearsal: a wrong signing secret is rejected
// (401, permanent), the delivery never returns to the active queue on its
// own, and only a redrive after the secret is fixed delivers it.
func TestPermanentRejectionWaitsForAnExplicitRedriveOverHTTP(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, newLoopbackSender(t, hookhttp.Config{}), 3)
	acct := newAccountingRecipient(t, e)
	require.NoError(t, e.dests.Put(ctx, hookrelay.Destination{ID: "accounting", TenantID: "tenant-1", URL: acct.srv.URL + "/v2/webhooks", Secrets: []string{secret}}))

	id := e.enqueue(t, "pay_7319", "accounting")
	e.settle(t, id)
	d, attempts := e.delivery(t, id)
	require.Equal(t, hookrelay.StateDead, d.State)
	assert.Equal(t, hookrelay.ReasonAuthRejected, d.LastReason)
	require.Len(t, attempts, 1, "no retry after a permanent rejection")

	for range 5 {
		e.mock.Add(3 * time.Second) // past the policy's 2 s cap: any retry would be due
	}
	claims, err := e.store.Claim(ctx, hookrelay.ClaimParams{Now: e.mock.Now().Add(30 * 24 * time.Hour), Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	assert.Empty(t, claims, "nothing is claimable, however late")
	_, fixed := acct.seen()
	assert.Equal(t, []string{id}, fixed, "it never returned to the active queue on its own")
	d, _ = e.delivery(t, id)
	assert.Equal(t, hookrelay.StateDead, d.State)

	require.NoError(t, e.dests.Put(ctx, hookrelay.Destination{ID: "accounting", TenantID: "tenant-1", URL: acct.srv.URL + "/v2/webhooks", Secrets: []string{rotatedSecret}}))
	e.redrive(t, hookrelay.RedriveParams{
		Filter: hookrelay.DeadLetterFilter{Reasons: []string{hookrelay.ReasonAuthRejected}},
		Actor:  "ops@example", Reason: "secret rotated", RatePerSecond: 1,
	})
	e.settle(t, id)
	d, _ = e.delivery(t, id)
	assert.Equal(t, hookrelay.StateDelivered, d.State)
	assert.Equal(t, int32(1), acct.effects.Load())
	_, fixed = acct.seen()
	assert.Equal(t, []string{id, id}, fixed)
}
