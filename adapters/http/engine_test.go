package hookhttp_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
	"github.com/hookrelay/hookrelay/adapters/http/recipient"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// onlyLoopback is a last line of defence under the SSRF guard: whatever the
// guard decides, no test dials anything but loopback.
func onlyLoopback(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		return syscall.EPERM
	}
	return nil
}

func newLoopbackSender(t *testing.T, cfg hookhttp.Config) *hookhttp.Sender {
	t.Helper()
	cfg.AllowNetworks = loopback
	cfg.Dialer = &net.Dialer{Control: onlyLoopback}
	s, err := hookhttp.New(cfg)
	require.NoError(t, err)
	t.Cleanup(s.CloseIdleConnections)
	return s
}

type half struct{}

func (half) Float64() float64 { return 0.5 }

// engine is a hookrelay client with memory adapters, a mock clock and an
// observer that keeps every event.
type engine struct {
	client *hookrelay.Client
	store  *memory.Store
	dests  *memory.Destinations
	mock   *clock.Mock

	mu     sync.Mutex
	events []hookrelay.Event
}

func newEngine(t *testing.T, sender hookrelay.Sender, maxAttempts int, dests ...hookrelay.Destination) *engine {
	t.Helper()
	e := &engine{store: memory.NewStore(), dests: memory.NewDestinations(dests...), mock: clock.NewMock()}
	// A mock time ahead of the wall clock: the send's context carries the
	// lease deadline in mock time, and a deadline that is already past in
	// real time would hide the sender's own (real) timeout behind it.
	e.mock.Set(time.Date(2036, 3, 4, 5, 6, 7, 0, time.UTC))
	policy := hookrelay.Policy{Version: "test", MaxAttempts: maxAttempts, BaseDelay: time.Second, MaxDelay: 2 * time.Second}
	c, err := hookrelay.New(hookrelay.Config{
		Queue: e.store, Ledger: e.store, Destinations: e.dests, Sender: sender,
		Clock: e.mock, Random: half{}, Policy: &policy,
		Observer: hookrelay.ObserverFunc(func(_ context.Context, ev hookrelay.Event) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.events = append(e.events, ev)
		}),
	})
	require.NoError(t, err)
	e.client = c
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, c.StopAndCancel(ctx))
	})
	return e
}

func (e *engine) enqueue(t *testing.T, eventID, destID string) string {
	t.Helper()
	res, err := e.client.Enqueue(context.Background(), hookrelay.EnqueueParams{
		EventID: eventID, TenantID: "tenant-1", DestinationID: destID,
		EventType: "lease.payment_recorded", Payload: []byte(`{"payment_id":"pay_7319","amount_cents":125000}`),
	})
	require.NoError(t, err)
	return res.ID
}

func (e *engine) snapshot() []hookrelay.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]hookrelay.Event(nil), e.events...)
}

// settle advances the mock clock until every delivery in ids is delivered
// or dead. Time moves only here; retries become due as it does.
func (e *engine) settle(t *testing.T, ids ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, id := range ids {
			d, err := e.store.Get(context.Background(), id)
			if err != nil || d.State == hookrelay.StatePending {
				e.mock.Add(250 * time.Millisecond)
				return false
			}
		}
		return true
	}, 20*time.Second, time.Millisecond)
}

func (e *engine) delivery(t *testing.T, id string) (hookrelay.Delivery, []hookrelay.Attempt) {
	t.Helper()
	d, err := e.store.Get(context.Background(), id)
	require.NoError(t, err)
	attempts, err := e.store.Attempts(context.Background(), id)
	require.NoError(t, err)
	return d, attempts
}

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestEndToEndResponseLostAfterTheEffectIsAppliedOnce(t *testing.T) {
	var effects, requests atomic.Int32
	var mu sync.Mutex
	var ids []string
	var kit http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get("webhook-id"))
		mu.Unlock()
		if requests.Add(1) == 1 {
			// The recipient applies the effect and stores its response,
			// then the connection drops before the sender sees it.
			kit.ServeHTTP(httptest.NewRecorder(), r)
			conn, _, err := http.NewResponseController(w).Hijack()
			if assert.NoError(t, err) {
				_ = conn.Close()
			}
			return
		}
		kit.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	e := newEngine(t, newLoopbackSender(t, hookhttp.Config{}), 5,
		hookrelay.Destination{ID: "accounting", URL: srv.URL + "/webhooks", Secrets: []string{secret}})
	verifier, err := recipient.NewVerifier(recipient.VerifierConfig{Secrets: []string{secret}, Clock: e.mock})
	require.NoError(t, err)
	idem, err := recipient.NewIdempotency(recipient.IdempotencyConfig{Store: recipient.NewMemoryStore(), Clock: e.mock})
	require.NoError(t, err)
	kit = verifier.Middleware(idem.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		effects.Add(1)
		_, _ = io.WriteString(w, "payment booked")
	})))

	id := e.enqueue(t, "evt_42", "accounting")
	e.settle(t, id)

	d, attempts := e.delivery(t, id)
	assert.Equal(t, hookrelay.StateDelivered, d.State)
	assert.Equal(t, int32(1), effects.Load(), "one business effect")
	assert.Equal(t, []string{id, id}, ids, "the retry carries the same ID")
	require.Len(t, attempts, 2)
	assert.Equal(t, hookrelay.OutcomeUnknown, attempts[0].Outcome)
	assert.Equal(t, hookrelay.ReasonConnectionReset, attempts[0].Reason)
	assert.Equal(t, hookrelay.OutcomeAccepted, attempts[1].Outcome)
	assert.Equal(t, "payment booked", attempts[1].Detail, "the stored response, replayed")
}

func TestEndToEndDuplicateWhileTheFirstStillRunsIsRetriedLater(t *testing.T) {
	release := make(chan struct{})
	var effects atomic.Int32
	var kit http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { kit.ServeHTTP(w, r) }))
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }); srv.Close() })

	// The first request outlives the sender's 50 ms timeout (outcome
	// unknown); its retry meets the record in progress (409).
	e := newEngine(t, newLoopbackSender(t, hookhttp.Config{Timeout: 50 * time.Millisecond}), 50,
		hookrelay.Destination{ID: "slow", URL: srv.URL, Secrets: []string{secret}})
	idem, err := recipient.NewIdempotency(recipient.IdempotencyConfig{Store: recipient.NewMemoryStore(), Clock: e.mock})
	require.NoError(t, err)
	kit = idem.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		effects.Add(1)
		<-release
		w.WriteHeader(http.StatusAccepted)
	}))

	id := e.enqueue(t, "evt_43", "slow")
	require.Eventually(t, func() bool {
		_, attempts := e.delivery(t, id)
		for _, a := range attempts {
			if a.Reason == hookhttp.ReasonConflictInProgress {
				return true
			}
		}
		e.mock.Add(250 * time.Millisecond)
		return false
	}, 20*time.Second, time.Millisecond)
	once.Do(func() { close(release) })
	e.settle(t, id)

	d, attempts := e.delivery(t, id)
	assert.Equal(t, hookrelay.StateDelivered, d.State)
	assert.Equal(t, int32(1), effects.Load())
	assert.Equal(t, hookrelay.OutcomeUnknown, attempts[0].Outcome)
	assert.Equal(t, hookrelay.ReasonTimeout, attempts[0].Reason)
	var conflict *hookrelay.Attempt
	for i := range attempts {
		if attempts[i].Reason == hookhttp.ReasonConflictInProgress {
			conflict = &attempts[i]
			break
		}
	}
	require.NotNil(t, conflict)
	assert.Equal(t, hookrelay.KindRetryable, conflict.Kind)
	assert.Equal(t, http.StatusConflict, conflict.StatusCode)
	assert.Equal(t, http.StatusAccepted, attempts[len(attempts)-1].StatusCode)
}

func TestEndToEndGoneDisablesTheDestination(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "this endpoint was removed", http.StatusGone)
	}))
	t.Cleanup(srv.Close)
	e := newEngine(t, newLoopbackSender(t, hookhttp.Config{}), 5,
		hookrelay.Destination{ID: "old-crm", URL: srv.URL, Secrets: []string{secret}})

	id := e.enqueue(t, "evt_44", "old-crm")
	e.settle(t, id)

	d, attempts := e.delivery(t, id)
	assert.Equal(t, hookrelay.StateDead, d.State)
	assert.Equal(t, hookrelay.ReasonDestinationGone, d.LastReason)
	require.Len(t, attempts, 1)
	assert.Equal(t, http.StatusGone, attempts[0].StatusCode)
	dest, err := e.dests.Destination(context.Background(), "old-crm")
	require.NoError(t, err)
	assert.True(t, dest.Disabled)
	assert.Equal(t, hookrelay.ReasonDestinationGone, dest.DisabledReason)
	var disabled bool
	for _, ev := range e.snapshot() {
		disabled = disabled || ev.Name == hookrelay.EventDestinationDisabled
	}
	assert.True(t, disabled, "observers hear about it")
}

func TestSecretsNeverLeakIntoResultsLedgerOrEvents(t *testing.T) {
	const marker = "SeKr3tZ"
	signing := "whsec_" + marker + marker + marker + "0000000" // valid base64
	auth := "Bearer " + marker + "-api-token"
	creds := "admin:" + marker + "pw"

	// A recipient that echoes every request header back, whatever it
	// answers: the worst case for stored snippets.
	echo := func(status int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			_ = r.Header.Write(w)
			_, _ = fmt.Fprintf(w, "secret=%s auth=%s\n", signing, auth)
		})
	}
	ok := httptest.NewServer(echo(http.StatusOK))
	bad := httptest.NewServer(echo(http.StatusForbidden))
	failing := httptest.NewServer(echo(http.StatusInternalServerError))
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); ok.Close(); bad.Close(); failing.Close(); slow.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := ln.Addr().String()
	require.NoError(t, ln.Close())

	withCreds := func(u string) string { return strings.Replace(u, "http://", "http://"+creds+"@", 1) }
	dest := func(id, url string) hookrelay.Destination {
		return hookrelay.Destination{
			ID: id, URL: url, Secrets: []string{signing}, Timeout: 50 * time.Millisecond,
			Headers: map[string]string{"Authorization": auth, "X-Api-Key": marker + "-key"},
		}
	}
	dests := []hookrelay.Destination{
		dest("ok", withCreds(ok.URL)),
		dest("forbidden", withCreds(bad.URL)),
		dest("failing", withCreds(failing.URL)),
		dest("slow", withCreds(slow.URL)),
		dest("unreachable", "http://"+creds+"@"+closedAddr+"/hooks?token="+marker),
		dest("invalid", "http://"+creds+"@[::1/hooks"),
		dest("bad-scheme", "ftp://"+creds+"@example.com/"),
		dest("blocked", "http://"+creds+"@10.0.0.1/"),
	}
	e := newEngine(t, newLoopbackSender(t, hookhttp.Config{}), 2, dests...)

	var ids []string
	for _, d := range dests {
		ids = append(ids, e.enqueue(t, "evt_"+d.ID, d.ID))
	}
	e.settle(t, ids...)

	var outputs []string
	redacted := false
	for _, id := range ids {
		d, attempts := e.delivery(t, id)
		outputs = append(outputs, fmt.Sprintf("%v %+v %#v", d, d, d))
		require.NotEmpty(t, attempts, id)
		for _, a := range attempts {
			outputs = append(outputs, fmt.Sprintf("%v %+v", a, a), a.Detail, a.Reason)
			redacted = redacted || strings.Contains(a.Detail, "[REDACTED]")
		}
	}
	for _, ev := range e.snapshot() {
		outputs = append(outputs, fmt.Sprintf("%v %+v", ev, ev))
		if ev.Result != nil {
			outputs = append(outputs, fmt.Sprintf("%v %+v", *ev.Result, *ev.Result))
		}
		if ev.Err != nil {
			outputs = append(outputs, ev.Err.Error())
		}
	}
	for _, out := range outputs {
		assert.NotContains(t, out, marker)
		assert.NotContains(t, out, creds)
	}
	assert.True(t, redacted, "the echoing recipients did send the secrets back")
	assert.Greater(t, len(outputs), 3*len(dests))

	// Each case failed the way it should have, so every path was covered.
	reasons := map[string]string{}
	for i, id := range ids {
		d, _ := e.delivery(t, id)
		reasons[dests[i].ID] = string(d.State) + "/" + d.LastReason
	}
	assert.Equal(t, map[string]string{
		"ok":          "delivered/",
		"forbidden":   "dead/" + hookrelay.ReasonAuthRejected,
		"failing":     "dead/" + hookrelay.ReasonAttemptsExhausted,
		"slow":        "dead/" + hookrelay.ReasonAttemptsExhausted,
		"unreachable": "dead/" + hookrelay.ReasonAttemptsExhausted,
		"invalid":     "dead/" + hookhttp.ReasonInvalidURL,
		"bad-scheme":  "dead/" + hookhttp.ReasonUnsupportedScheme,
		"blocked":     "dead/" + hookhttp.ReasonDestinationBlocked,
	}, reasons)
}

// A worker sending 200 requests at once to one host (many destinations on
// one recipient) keeps its connections: the second wave opens none. With
// the former default of 128 idle connections per host the second wave
// opened 72 again (in peerbench at Concurrency 200, 140–3,200 new
// connections per 20,000 deliveries).
func TestSenderKeepsAConnectionPerConcurrentSendToOneHost(t *testing.T) {
	var opened atomic.Int64
	gate := make(chan struct{})
	var arrived sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived.Done()
		<-gate
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	s := newLoopbackSender(t, hookhttp.Config{})
	const w = 200
	wave := func() {
		gate = make(chan struct{})
		arrived.Add(w)
		var done sync.WaitGroup
		for i := range w {
			done.Add(1)
			go func() {
				defer done.Done()
				res := s.Send(context.Background(), hookrelay.SendParams{
					Delivery:    hookrelay.Delivery{ID: "whd_" + strconv.Itoa(i), EventType: "x", Payload: []byte("{}")},
					Destination: hookrelay.Destination{ID: "d" + strconv.Itoa(i%10), URL: srv.URL + "/d/" + strconv.Itoa(i%10)},
					Now:         time.Now(),
				})
				assert.Equal(t, hookrelay.KindDelivered, res.Kind, res.Detail)
			}()
		}
		arrived.Wait() // all 200 in flight at once
		close(gate)
		done.Wait()
	}
	wave()
	first := opened.Load()
	wave()
	assert.Equal(t, first, opened.Load(), "the second wave reused every connection")
}
