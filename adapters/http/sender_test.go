package hookhttp

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

var (
	loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	sendTime = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
)

const (
	testSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testSecret2 = "whsec_c2Vjb25kLXNlY3JldC1mb3Itcm90YXRpb24="
)

func newTestSender(t *testing.T, cfg Config) *Sender {
	t.Helper()
	if cfg.AllowNetworks == nil {
		cfg.AllowNetworks = loopback
	}
	s, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(s.CloseIdleConnections)
	return s
}

func sendParams(url, payload string) hookrelay.SendParams {
	return hookrelay.SendParams{
		Delivery: hookrelay.Delivery{
			ID: "whd_0f8e2a4c-1111-5222-8333-444455556666", EventID: "evt_42",
			DestinationID: "dest-1", Payload: []byte(payload), Attempt: 1,
		},
		Destination: hookrelay.Destination{ID: "dest-1", URL: url, Secrets: []string{testSecret}},
		Now:         sendTime,
	}
}

// recorded is what a test server saw of one request.
type recorded struct {
	header http.Header
	body   []byte
}

func recordingServer(t *testing.T, status int) (*httptest.Server, func() []recorded) {
	t.Helper()
	var mu sync.Mutex
	var seen []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, recorded{header: r.Header.Clone(), body: b})
		mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []recorded {
		mu.Lock()
		defer mu.Unlock()
		return append([]recorded(nil), seen...)
	}
}

func TestSendSetsStandardWebhooksHeadersAndSendsPayloadUnchanged(t *testing.T) {
	srv, seen := recordingServer(t, http.StatusNoContent)
	s := newTestSender(t, Config{})
	payload := "{\"amount_cents\": 125000, \"note\": \"caf\u00e9\" }\n"
	p := sendParams(srv.URL+"/hooks", payload)
	p.Destination.Secrets = []string{testSecret, testSecret2}
	p.Destination.Headers = map[string]string{
		"Authorization": "Bearer tok_abc",
		"webhook-id":    "forged", // cannot replace the protocol headers
	}

	res := s.Send(context.Background(), p)

	assert.Equal(t, hookrelay.Delivered(http.StatusNoContent), res)
	got := seen()
	require.Len(t, got, 1)
	h := got[0].header
	assert.Equal(t, payload, string(got[0].body))
	assert.Equal(t, p.Delivery.ID, h.Get("webhook-id"))
	assert.Equal(t, p.Delivery.ID, h.Get("Idempotency-Key"))
	assert.Equal(t, strconv.FormatInt(sendTime.Unix(), 10), h.Get("webhook-timestamp"))
	assert.Equal(t, "application/json", h.Get("Content-Type"))
	assert.Equal(t, "hookrelay/"+version, h.Get("User-Agent"))
	assert.Equal(t, "Bearer tok_abc", h.Get("Authorization"))
	sigs := strings.Split(h.Get("webhook-signature"), " ")
	require.Len(t, sigs, 2, "every active secret signs")

	// Each signature verifies with the official Standard Webhooks library.
	for _, secret := range []string{testSecret, testSecret2} {
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		assert.NoError(t, wh.VerifyIgnoringTimestamp(got[0].body, h), "secret %s", secret)
	}
	other, err := standardwebhooks.NewWebhook("whsec_" + base64.StdEncoding.EncodeToString([]byte("not-a-secret-we-use")))
	require.NoError(t, err)
	assert.Error(t, other.VerifyIgnoringTimestamp(got[0].body, h))
}

// The payload goes out with a Content-Length, whatever its size (none
// included): a chunked body of unknown length is refused by some
// receivers and proxies, and costs the recipient more to read.
func TestPayloadIsSentWithItsContentLength(t *testing.T) {
	type framing struct {
		length   int64
		encoding []string
		body     []byte
	}
	var mu sync.Mutex
	var seen []framing
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, framing{length: r.ContentLength, encoding: r.TransferEncoding, body: b})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	s := newTestSender(t, Config{})
	for _, n := range []int{0, 1, 512, 64 << 10} {
		payload := strings.Repeat("x", n)
		res := s.Send(context.Background(), sendParams(srv.URL+"/hooks", payload))
		require.Equal(t, hookrelay.Delivered(http.StatusNoContent), res, "payload of %d bytes", n)
		mu.Lock()
		got := seen[len(seen)-1]
		mu.Unlock()
		assert.Equal(t, int64(n), got.length, "Content-Length of a %d-byte payload", n)
		assert.Empty(t, got.encoding, "Transfer-Encoding of a %d-byte payload", n)
		assert.Equal(t, payload, string(got.body), "body of a %d-byte payload", n)
	}
}

// A small request leaves in one write, headers and payload together: a
// body the transport does not know to be in memory makes it flush the
// headers first, a second syscall and packet on every send.
func TestSmallRequestLeavesInOneWrite(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	s := newTestSender(t, Config{})
	var writes atomic.Int64
	dial := s.tr.DialContext
	s.tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, writes: &writes}, nil
	}
	for i := range 3 {
		before := writes.Load()
		res := s.Send(context.Background(), sendParams(srv.URL+"/hooks", strings.Repeat("x", 512)))
		require.Equal(t, hookrelay.Delivered(http.StatusNoContent), res)
		assert.Equal(t, int64(1), writes.Load()-before, "writes for request %d", i+1)
	}
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

func TestSignatureMatchesTheSpecificationByHand(t *testing.T) {
	// The definition: HMAC-SHA256, keyed with the base64-decoded part of
	// the secret after "whsec_", over "<id>.<timestamp>.<body>", base64,
	// prefixed "v1,". The values are the specification's own example.
	key, err := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(`msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}`))
	byHand := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	assert.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", byHand)

	got, err := SignatureHeader([]string{testSecret}, "msg_p5jXN8AQM9LWM0D4loKWxJek",
		time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	require.NoError(t, err)
	assert.Equal(t, byHand, got)
}

func TestStatusClassificationTable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if err != nil {
			code = http.StatusTeapot
		}
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "/200")
		}
		if r.URL.Query().Has("retry") {
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	s := newTestSender(t, Config{})

	const (
		delivered = hookrelay.KindDelivered
		retryable = hookrelay.KindRetryable
		permanent = hookrelay.KindPermanent
	)
	tests := []struct {
		path       string
		kind       hookrelay.Kind
		reason     string
		retryAfter time.Duration
		disable    bool
	}{
		{"/200", delivered, "", 0, false},
		{"/201", delivered, "", 0, false},
		{"/202", delivered, "", 0, false},
		{"/204", delivered, "", 0, false},
		{"/301", permanent, hookrelay.ReasonRedirect, 0, false},
		{"/302", permanent, hookrelay.ReasonRedirect, 0, false},
		{"/303", permanent, hookrelay.ReasonRedirect, 0, false},
		{"/307", permanent, hookrelay.ReasonRedirect, 0, false},
		{"/308", permanent, hookrelay.ReasonRedirect, 0, false},
		{"/400", permanent, hookrelay.ReasonBadRequest, 0, false},
		{"/401", permanent, hookrelay.ReasonAuthRejected, 0, false},
		{"/403", permanent, hookrelay.ReasonAuthRejected, 0, false},
		{"/404", permanent, hookrelay.ReasonNotFound, 0, false},
		{"/405", permanent, hookrelay.ReasonClientError, 0, false},
		{"/408?retry", retryable, hookrelay.ReasonRequestTimeout, 7 * time.Second, false},
		{"/409", permanent, hookrelay.ReasonClientError, 0, false},
		{"/409?retry", retryable, ReasonConflictInProgress, 7 * time.Second, false},
		{"/410", permanent, hookrelay.ReasonDestinationGone, 0, true},
		{"/410?retry", permanent, hookrelay.ReasonDestinationGone, 0, true},
		{"/413", permanent, hookrelay.ReasonPayloadTooLarge, 0, false},
		{"/418", permanent, hookrelay.ReasonClientError, 0, false},
		{"/422", permanent, hookrelay.ReasonUnprocessable, 0, false},
		{"/425", retryable, hookrelay.ReasonTooEarly, 0, false},
		{"/429?retry", retryable, hookrelay.ReasonRateLimited, 7 * time.Second, false},
		{"/500", retryable, hookrelay.ReasonServerError, 0, false},
		{"/501", retryable, hookrelay.ReasonServerError, 0, false},
		{"/502", retryable, hookrelay.ReasonBadGateway, 0, false},
		{"/503?retry", retryable, hookrelay.ReasonServiceUnavailable, 7 * time.Second, false},
		{"/504", retryable, hookrelay.ReasonGatewayTimeout, 0, false},
		{"/599", retryable, hookrelay.ReasonServerError, 0, false},
		{"/600", retryable, hookrelay.ReasonUnexpectedStatus, 0, false},
		{"/400?retry", permanent, hookrelay.ReasonBadRequest, 0, false},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.path, "/"), func(t *testing.T) {
			res := s.Send(context.Background(), sendParams(srv.URL+tt.path, "{}"))
			code, _ := strconv.Atoi(strings.TrimPrefix(strings.Split(tt.path, "?")[0], "/"))
			assert.Equal(t, tt.kind, res.Kind)
			assert.Equal(t, tt.reason, res.Reason)
			assert.Equal(t, code, res.StatusCode)
			assert.Equal(t, tt.retryAfter, res.RetryAfter)
			assert.Equal(t, tt.disable, res.DisableDestination)
			want := hookrelay.OutcomeRejected
			if tt.kind == delivered {
				want = hookrelay.OutcomeAccepted
			}
			assert.Equal(t, want, res.Outcome, "a response is never an unknown outcome")
		})
	}
}

func TestClassifyCanBeOverriddenPerDestination(t *testing.T) {
	srv, _ := recordingServer(t, http.StatusNotFound)
	s := newTestSender(t, Config{Classify: func(p ClassifyParams) hookrelay.Result {
		if p.DestinationID == "flaky-crm" && p.StatusCode == http.StatusNotFound {
			return hookrelay.Retryable(hookrelay.ReasonNotFound)
		}
		return DefaultClassify(p)
	}})

	p := sendParams(srv.URL, "{}")
	assert.Equal(t, hookrelay.KindPermanent, s.Send(context.Background(), p).Kind)
	p.Destination.ID = "flaky-crm"
	res := s.Send(context.Background(), p)
	assert.Equal(t, hookrelay.KindRetryable, res.Kind)
	assert.Equal(t, hookrelay.ReasonNotFound, res.Reason)
	assert.Equal(t, http.StatusNotFound, res.StatusCode, "the sender fills in the status")
}

func TestRetryAfterFromResponseInBothForms(t *testing.T) {
	var value atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", value.Load().(string))
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	s := newTestSender(t, Config{})

	tests := []struct {
		header string
		want   time.Duration
	}{
		{"120", 2 * time.Minute},
		// An HTTP-date is taken relative to SendParams.Now, not the wall clock.
		{sendTime.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{sendTime.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"soon", 0},
	}
	for _, tt := range tests {
		value.Store(tt.header)
		res := s.Send(context.Background(), sendParams(srv.URL, "{}"))
		assert.Equal(t, hookrelay.KindRetryable, res.Kind, tt.header)
		assert.Equal(t, tt.want, res.RetryAfter, tt.header)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2015, 10, 21, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"0", 0, true},
		{"120", 120 * time.Second, true},
		{" 5 ", 5 * time.Second, true},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 28 * time.Minute, true},
		{"Wednesday, 21-Oct-15 07:01:00 GMT", time.Minute, true},
		{"Wed Oct 21 07:00:30 2015", 30 * time.Second, true},
		{"Tue, 20 Oct 2015 07:28:00 GMT", 0, true},
		{"99999999999999999999999", maxRetryAfter, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"+3", 0, false},
		{"1e3", 0, false},
		{"tomorrow", 0, false},
	}
	for _, tt := range tests {
		d, ok := ParseRetryAfter(tt.in, now)
		assert.Equal(t, tt.wantOK, ok, "%q", tt.in)
		assert.Equal(t, tt.want, d, "%q", tt.in)
	}
}

func TestRedirectIsNeverFollowed(t *testing.T) {
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/target", func(w http.ResponseWriter, r *http.Request) { followed.Add(1) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/target", http.StatusTemporaryRedirect)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s := newTestSender(t, Config{})

	res := s.Send(context.Background(), sendParams(srv.URL+"/start", "{}"))

	assert.Equal(t, hookrelay.KindPermanent, res.Kind)
	assert.Equal(t, hookrelay.ReasonRedirect, res.Reason)
	assert.Equal(t, http.StatusTemporaryRedirect, res.StatusCode)
	assert.Zero(t, followed.Load())
}

// TestURLUserInfoIsSentAsBasicAuthorization: user info in a destination
// URL reaches the recipient as Basic authorization (what Go's http.Client
// did for the sender), unless a destination header or OnRequest already
// sets Authorization, which wins.
func TestURLUserInfoIsSentAsBasicAuthorization(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	withUser := strings.Replace(srv.URL, "http://", "http://ops%40example.com:p%3Ass@", 1)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops@example.com:p:ss"))

	for _, tt := range []struct {
		name      string
		headers   map[string]string
		onRequest func(context.Context, *http.Request)
		want      string
	}{
		{name: "user info only", want: basic},
		{name: "a destination header wins", headers: map[string]string{"authorization": "Bearer tok_dest"}, want: "Bearer tok_dest"},
		{name: "OnRequest wins", onRequest: func(_ context.Context, r *http.Request) { r.Header.Set("Authorization", "Bearer tok_hook") }, want: "Bearer tok_hook"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestSender(t, Config{OnRequest: tt.onRequest})
			p := sendParams(withUser+"/hooks", "{}")
			p.Destination.Headers = tt.headers
			res := s.Send(context.Background(), p)
			require.Equal(t, hookrelay.KindDelivered, res.Kind, "%+v", res)
			assert.Equal(t, tt.want, <-got)
		})
	}
}

func TestSlowResponseTimesOutAsUnknown(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	s := newTestSender(t, Config{})
	p := sendParams(srv.URL, "{}")
	p.Destination.Timeout = 30 * time.Millisecond

	res := s.Send(context.Background(), p)

	assert.Equal(t, hookrelay.KindRetryable, res.Kind)
	assert.Equal(t, hookrelay.OutcomeUnknown, res.Outcome, "the request was written: it may have been applied")
	assert.Equal(t, hookrelay.ReasonTimeout, res.Reason)
}

func TestDefaultTimeoutAppliesWithoutDestinationTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	s := newTestSender(t, Config{Timeout: 30 * time.Millisecond})

	res := s.Send(context.Background(), sendParams(srv.URL, "{}"))

	assert.Equal(t, hookrelay.Unknown(hookrelay.ReasonTimeout).Reason, res.Reason)
	assert.Equal(t, hookrelay.OutcomeUnknown, res.Outcome)
}

func hijackAndClose(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if !assert.NoError(t, err) {
		return
	}
	_ = conn.Close()
}

func TestResetAfterTheRequestWasReadIsUnknown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		hijackAndClose(t, w)
	}))
	t.Cleanup(srv.Close)
	s := newTestSender(t, Config{})

	res := s.Send(context.Background(), sendParams(srv.URL, "{}"))

	assert.Equal(t, hookrelay.KindRetryable, res.Kind)
	assert.Equal(t, hookrelay.OutcomeUnknown, res.Outcome)
	assert.Equal(t, hookrelay.ReasonConnectionReset, res.Reason)
}

func TestResetWhileReadingTheResponseBodyKeepsTheStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if !assert.NoError(t, err) {
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
		_ = buf.Flush()
		_ = conn.Close()
	}))
	t.Cleanup(srv.Close)
	s := newTestSender(t, Config{})

	res := s.Send(context.Background(), sendParams(srv.URL, "{}"))

	assert.Equal(t, hookrelay.KindDelivered, res.Kind, "the recipient said 200: the body does not matter")
	assert.Equal(t, http.StatusOK, res.StatusCode)
}

func TestConnectionRefusedIsRetryableAndNothingWasSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	s := newTestSender(t, Config{})

	res := s.Send(context.Background(), sendParams("http://"+addr+"/", "{}"))

	assert.Equal(t, hookrelay.Retryable(hookrelay.ReasonConnectionRefused).Kind, res.Kind)
	assert.Equal(t, hookrelay.ReasonConnectionRefused, res.Reason)
	assert.Equal(t, hookrelay.OutcomeRejected, res.Outcome)
	assert.NotEmpty(t, res.Detail)
}

// noDNS is a resolver that answers nothing and sends nothing.
func noDNS() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "udp", Err: syscall.ENETUNREACH}
	}}
}

func TestDNSFailureIsRetryable(t *testing.T) {
	s := newTestSender(t, Config{Dialer: &net.Dialer{Resolver: noDNS()}})

	res := s.Send(context.Background(), sendParams("https://hooks.example.invalid/x", "{}"))

	assert.Equal(t, hookrelay.KindRetryable, res.Kind)
	assert.Equal(t, hookrelay.ReasonDNSFailure, res.Reason)
	assert.Equal(t, hookrelay.OutcomeRejected, res.Outcome)
}

func TestBadInputNeverReachesTheNetwork(t *testing.T) {
	var dials atomic.Int32
	s := newTestSender(t, Config{
		MaxPayloadBytes: 16,
		Dialer: &net.Dialer{Resolver: noDNS(), Control: func(string, string, syscall.RawConn) error {
			dials.Add(1)
			return syscall.EPERM
		}},
	})
	tests := []struct {
		name, url, payload, secret, reason string
	}{
		{"unparsable", "http://user:pw@[::1/x", "{}", testSecret, ReasonInvalidURL},
		{"bad port", "http://example.com:port/", "{}", testSecret, ReasonInvalidURL},
		{"port out of range", "http://example.com:65536/", "{}", testSecret, ReasonInvalidURL},
		{"huge port", "http://example.com:99999999999999999999/", "{}", testSecret, ReasonInvalidURL},
		{"port 0", "http://example.com:0/", "{}", testSecret, ReasonInvalidURL},
		{"relative", "/hooks", "{}", testSecret, ReasonInvalidURL},
		{"empty", "", "{}", testSecret, ReasonInvalidURL},
		{"no host", "http:///path", "{}", testSecret, ReasonInvalidURL},
		{"opaque", "http:example.com", "{}", testSecret, ReasonInvalidURL},
		{"ftp", "ftp://example.com/x", "{}", testSecret, ReasonUnsupportedScheme},
		{"file", "file:///etc/passwd", "{}", testSecret, ReasonInvalidURL},
		{"gopher", "gopher://example.com/", "{}", testSecret, ReasonUnsupportedScheme},
		{"too large", "https://example.com/", strings.Repeat("x", 17), testSecret, hookrelay.ReasonPayloadTooLarge},
		{"bad secret", "https://example.com/", "{}", "whsec_not base64!", ReasonInvalidSecret},
		{"header injection", "https://example.com/", "{}", testSecret, ReasonInvalidHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := sendParams(tt.url, tt.payload)
			p.Destination.Secrets = []string{tt.secret}
			if tt.reason == ReasonInvalidHeader {
				p.Destination.Headers = map[string]string{"Authorization": "Bearer x\r\nX-Injected: 1"}
			}
			res := s.Send(context.Background(), p)
			assert.Equal(t, hookrelay.KindPermanent, res.Kind)
			assert.Equal(t, tt.reason, res.Reason)
			assert.NotEmpty(t, res.Detail)
		})
	}
	assert.Zero(t, dials.Load())
}

func TestOnRequestSeesTheSignedRequestLast(t *testing.T) {
	srv, seen := recordingServer(t, http.StatusOK)
	var sawSignature bool
	s := newTestSender(t, Config{OnRequest: func(ctx context.Context, req *http.Request) {
		sawSignature = req.Header.Get("webhook-signature") != ""
		req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	}})

	res := s.Send(context.Background(), sendParams(srv.URL, "{}"))

	assert.Equal(t, hookrelay.KindDelivered, res.Kind)
	assert.True(t, sawSignature)
	require.Len(t, seen(), 1)
	assert.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", seen()[0].header.Get("traceparent"))
}

func TestResponseSnippetIsTruncatedAndTheConnectionReused(t *testing.T) {
	var conns atomic.Int32
	body := strings.Repeat("é", 300) + strings.Repeat("z", 20000) // 20 KB, multi-byte start
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s := newTestSender(t, Config{MaxSnippetBytes: 101})

	for range 3 {
		res := s.Send(context.Background(), sendParams(srv.URL, "{}"))
		assert.Equal(t, hookrelay.ReasonServerError, res.Reason)
		assert.Equal(t, strings.Repeat("é", 50), res.Detail, "cut on a rune boundary")
	}
	assert.Equal(t, int32(1), conns.Load(), "one connection for sequential sends")
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Timeout: -1},
		{MaxPayloadBytes: -1},
		{MaxSnippetBytes: -1},
		{AllowNetworks: []netip.Prefix{{}}},
	} {
		_, err := New(cfg)
		assert.ErrorIs(t, err, hookrelay.ErrInvalidConfig)
	}
}

func TestErrorDetailDropsTheURL(t *testing.T) {
	err := &url.Error{Op: "Post", URL: "http://admin:pw@hooks.example/?token=abc", Err: io.ErrUnexpectedEOF}
	assert.Equal(t, "unexpected EOF", errorDetail(err))
	assert.Equal(t, "a [REDACTED] b [REDACTED]", redact("a whsec_abcd b abcd", []string{"abcd", "whsec_abcd"}), "longest first")
}

func TestSendWithoutSecretsIsUnsigned(t *testing.T) {
	srv, seen := recordingServer(t, http.StatusOK)
	s := newTestSender(t, Config{})
	p := sendParams(srv.URL, "{}")
	p.Destination.Secrets = nil

	assert.Equal(t, hookrelay.KindDelivered, s.Send(context.Background(), p).Kind)
	require.Len(t, seen(), 1)
	assert.Empty(t, seen()[0].header.Values("webhook-signature"))
	assert.Equal(t, p.Delivery.ID, seen()[0].header.Get("webhook-id"))
}

func TestSenderIsSafeForConcurrentUse(t *testing.T) {
	srv, seen := recordingServer(t, http.StatusOK)
	s := newTestSender(t, Config{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			p := sendParams(srv.URL, "{}")
			p.Delivery.ID = "whd_" + strconv.Itoa(i)
			assert.Equal(t, hookrelay.KindDelivered, s.Send(context.Background(), p).Kind)
		})
	}
	wg.Wait()
	assert.Len(t, seen(), 8)
}

func TestValidHeader(t *testing.T) {
	assert.True(t, validHeader("X-Api-Key", "abc def"))
	assert.False(t, validHeader("", "v"))
	assert.False(t, validHeader("X Api", "v"))
	assert.False(t, validHeader("X:Api", "v"))
	assert.False(t, validHeader("X-Api", "a\nb"))
	assert.False(t, validHeader("X-Api", "a\x00b"))
}

// TestSetHeadersIsTheHeaderSetSequence compares setHeaders with the
// Header.Set calls it replaces, for destination headers that collide with
// every header the sender sets, in any spelling.
func TestSetHeadersIsTheHeaderSetSequence(t *testing.T) {
	s := newTestSender(t, Config{ContentType: "application/cloudevents+json", UserAgent: "acme/2"})
	for _, tt := range []struct {
		name string
		dest map[string]string
		sig  string
	}{
		{"none", nil, "v1,abc"},
		{"unsigned", map[string]string{"x-api-key": "k"}, ""},
		{"overrides", map[string]string{"content-type": "text/plain", "USER-AGENT": "mine", "authorization": "Bearer t"}, "v1,abc"},
		{"forged protocol headers", map[string]string{
			"webhook-id": "forged", "WEBHOOK-TIMESTAMP": "1", "webhook-signature": "v1,forged", "idempotency-key": "forged",
		}, "v1,abc v1,def"},
		{"forged signature unsigned", map[string]string{"webhook-signature": "v1,forged", "X-Trace": "a b"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := http.Header{}
			want.Set("Content-Type", s.cfg.ContentType)
			want.Set("User-Agent", s.cfg.UserAgent)
			for k, v := range tt.dest {
				want.Set(k, v)
			}
			want.Set(HeaderWebhookID, "whd_1")
			want.Set(HeaderWebhookTimestamp, "1772600767")
			if tt.sig != "" {
				want.Set(HeaderWebhookSignature, tt.sig)
			}
			want.Set(HeaderIdempotencyKey, "whd_1")

			got := http.Header{}
			s.setHeaders(got, tt.dest, "whd_1", "1772600767", tt.sig)
			assert.Equal(t, want, got)

			// Adding to one header leaves the others as they were.
			got.Add("Content-Type", "extra")
			got.Add("User-Agent", "extra")
			want.Add("Content-Type", "extra")
			want.Add("User-Agent", "extra")
			assert.Equal(t, want, got)
		})
	}
}

// TestHeaderValueWithAControlCharacterIsPermanent: the transport refuses
// every control character but tab in a header value, at every send; such a
// destination header is bad input, permanent and never sent, not a
// network error retried until the attempts run out.
func TestHeaderValueWithAControlCharacterIsPermanent(t *testing.T) {
	srv, seen := recordingServer(t, http.StatusOK)
	s := newTestSender(t, Config{})
	for _, v := range []string{"a\x01b", "a\x1fb", "a\x7fb", "a\vb", "a\fb", "a\rb", "a\nb", "a\x00b"} {
		p := sendParams(srv.URL, "{}")
		p.Destination.Headers = map[string]string{"X-Api-Key": v}
		res := s.Send(context.Background(), p)
		assert.Equal(t, hookrelay.KindPermanent, res.Kind, "%q", v)
		assert.Equal(t, ReasonInvalidHeader, res.Reason, "%q", v)
	}
	assert.Empty(t, seen())

	// Tab and non-ASCII bytes are sent.
	p := sendParams(srv.URL, "{}")
	p.Destination.Headers = map[string]string{"X-Api-Key": "a\tb", "X-Name": "Zoë"}
	assert.Equal(t, hookrelay.KindDelivered, s.Send(context.Background(), p).Kind)
	require.Len(t, seen(), 1)
	assert.Equal(t, "a\tb", seen()[0].header.Get("X-Api-Key"))
}

// TestInvalidHeaderNameDetailHoldsNoSecret: a whole header line written as
// a name ("Authorization: Bearer <token>") is refused, and the Detail
// names the header and the bad character without the token after it.
func TestInvalidHeaderNameDetailHoldsNoSecret(t *testing.T) {
	s := newTestSender(t, Config{})
	for _, name := range []string{
		"Authorization: Bearer Tk9-secret-token-123",
		"Authorization Bearer Tk9-secret-token-123",
		"X-Api-Key=Tk9-secret-token-123",
		"X-Api-Key:Tk9-secret-token-123\r\n",
	} {
		p := sendParams("https://hooks.example.com/", "{}")
		p.Destination.Headers = map[string]string{name: ""}
		res := s.Send(context.Background(), p)
		assert.Equal(t, ReasonInvalidHeader, res.Reason, "%q", name)
		assert.NotContains(t, res.Detail, "Tk9", "%q", name)
		assert.Contains(t, res.Detail, name[:9], "%q: names the header", name)
	}
}

// TestSnippetOfInvalidUTF8StaysWithinTheLimit: a body that is not UTF-8
// (Latin-1, binary) keeps its text, with U+FFFD for the bytes that are not
// UTF-8, and its snippet is never longer than MaxSnippetBytes, whether the
// body is shorter than the limit or longer.
func TestSnippetOfInvalidUTF8StaysWithinTheLimit(t *testing.T) {
	const n = 64
	for _, body := range []string{
		strings.Repeat("a\xff", n/2),                          // exactly n bytes, half of them invalid
		strings.Repeat("\xfc", n),                             // one invalid run
		"Fehler: ung\xfcltig " + strings.Repeat("a\xff", 4*n), // longer than n, invalid early
		"\x1f\x8b" + strings.Repeat("\x00\xff", 2*n),          // gzip
	} {
		// With a secret, more than n bytes are read (the margin).
		for _, secrets := range [][]string{nil, {"Sx1-some-secret-value"}} {
			got := readSnippet(strings.NewReader(body), n, secrets)
			assert.LessOrEqual(t, len(got), n, "%q", body)
			assert.True(t, utf8.ValidString(got), "%q", got)
			if strings.HasPrefix(body, "Fehler") {
				assert.True(t, strings.HasPrefix(got, "Fehler: ung\uFFFDltig a\uFFFDa"), "%q", got)
			}
		}
	}
}

// TestConnectionSpecificDestinationHeadersAreNotSent: HTTP/2 forbids
// connection-specific headers and Go's transport refuses a request that has
// them, at every send. A destination stored with one (before stores refused
// them) still delivers, over HTTP/2 and HTTP/1.1, without it; its other
// headers are sent. A stored Host header does not change the host.
func TestConnectionSpecificDestinationHeadersAreNotSent(t *testing.T) {
	for _, h2 := range []bool{true, false} {
		t.Run(map[bool]string{true: "HTTP/2", false: "HTTP/1.1"}[h2], func(t *testing.T) {
			type seen struct {
				proto, host string
				header      http.Header
			}
			got := make(chan seen, 16)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- seen{r.Proto, r.Host, r.Header.Clone()}
				w.WriteHeader(http.StatusNoContent)
			}))
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			t.Cleanup(srv.Close)
			s := newTestSender(t, Config{TLSClientConfig: srv.Client().Transport.(*http.Transport).TLSClientConfig})
			for _, hdr := range []map[string]string{
				{"Connection": "upgrade"},
				{"upgrade": "websocket"},
				{"Transfer-Encoding": "gzip"},
				{"Keep-Alive": "timeout=5"},
				{"Proxy-Connection": "keep-alive"},
				{"TE": "gzip"},
				{"Host": "internal.example"},
			} {
				p := sendParams(srv.URL, "{}")
				p.Destination.Headers = map[string]string{"Authorization": "Bearer tok_abc"}
				for k, v := range hdr {
					p.Destination.Headers[k] = v
				}
				res := s.Send(context.Background(), p)
				require.Equal(t, hookrelay.Delivered(http.StatusNoContent), res, "destination header %v", hdr)
				r := <-got
				if h2 {
					assert.Equal(t, "HTTP/2.0", r.proto)
				}
				assert.Equal(t, strings.TrimPrefix(srv.URL, "https://"), r.host, "the request goes to the URL's host")
				assert.Equal(t, "Bearer tok_abc", r.header.Get("Authorization"), "the other headers are sent")
				for k := range hdr {
					assert.Empty(t, r.header.Values(k), "%s is not sent", k)
				}
			}
		})
	}
}
