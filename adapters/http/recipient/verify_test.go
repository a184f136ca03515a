package recipient

import (
	"encoding/base64"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	secretOld = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secretNew = "whsec_c2Vjb25kLXNlY3JldC1mb3Itcm90YXRpb24="
)

var now = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// signedHeader signs with the official Standard Webhooks library, so the
// tests also show interoperability.
func signedHeader(t *testing.T, secret, id string, ts time.Time, body []byte) http.Header {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	sig, err := wh.Sign(id, ts, body)
	require.NoError(t, err)
	h := http.Header{}
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderWebhookSignature, sig)
	return h
}

func TestVerifyAcceptsTheSpecificationExample(t *testing.T) {
	h := http.Header{}
	h.Set(HeaderWebhookID, "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set(HeaderWebhookTimestamp, "1614265330")
	h.Set(HeaderWebhookSignature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	err := Verify(VerifyParams{
		Secrets: []string{secretOld}, Header: h, Body: []byte(`{"test": 2432232314}`),
		Now: time.Unix(1614265330, 0).Add(time.Minute),
	})
	assert.NoError(t, err)
}

func TestVerify(t *testing.T) {
	body := []byte(`{"payment_id":"pay_7319"}`)
	valid := func() http.Header { return signedHeader(t, secretNew, "whd_1", now, body) }
	tests := []struct {
		name    string
		header  func() http.Header
		body    []byte
		now     time.Time
		secrets []string
		want    error
	}{
		{"valid", valid, body, now, []string{secretNew}, nil},
		{"rotation: either accepted secret", valid, body, now, []string{secretOld, secretNew}, nil},
		{"several signatures, one matches", func() http.Header {
			h := valid()
			h.Set(HeaderWebhookSignature, "v1,AAAA v2,zzz junk "+h.Get(HeaderWebhookSignature))
			return h
		}, body, now, []string{secretNew}, nil},
		{"at the tolerance edge", valid, body, now.Add(5 * time.Minute), []string{secretNew}, nil},
		{"wrong secret", valid, body, now, []string{secretOld}, ErrNoMatchingSignature},
		{"tampered body", valid, []byte(`{"payment_id":"pay_7320"}`), now, []string{secretNew}, ErrNoMatchingSignature},
		{"tampered id", func() http.Header { h := valid(); h.Set(HeaderWebhookID, "whd_2"); return h }, body, now, []string{secretNew}, ErrNoMatchingSignature},
		{"only another version", func() http.Header {
			h := valid()
			h.Set(HeaderWebhookSignature, strings.Replace(h.Get(HeaderWebhookSignature), "v1,", "v1a,", 1))
			return h
		}, body, now, []string{secretNew}, ErrNoMatchingSignature},
		{"too old", valid, body, now.Add(5*time.Minute + time.Second), []string{secretNew}, ErrTimestampTooOld},
		{"too new", valid, body, now.Add(-5*time.Minute - time.Second), []string{secretNew}, ErrTimestampTooNew},
		{"missing id", func() http.Header { h := valid(); h.Del(HeaderWebhookID); return h }, body, now, []string{secretNew}, ErrMissingHeaders},
		{"missing timestamp", func() http.Header { h := valid(); h.Del(HeaderWebhookTimestamp); return h }, body, now, []string{secretNew}, ErrMissingHeaders},
		{"missing signature", func() http.Header { h := valid(); h.Del(HeaderWebhookSignature); return h }, body, now, []string{secretNew}, ErrMissingHeaders},
		{"timestamp not a number", func() http.Header { h := valid(); h.Set(HeaderWebhookTimestamp, "2026-03-04"); return h }, body, now, []string{secretNew}, ErrInvalidTimestamp},
		{"extreme timestamp", func() http.Header { h := valid(); h.Set(HeaderWebhookTimestamp, "-9223372036854775808"); return h }, body, now, []string{secretNew}, ErrTimestampTooOld},
		{"no secret", valid, body, now, nil, ErrInvalidSecret},
		{"bad secret", valid, body, now, []string{"whsec_%%%"}, ErrInvalidSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(VerifyParams{Secrets: tt.secrets, Header: tt.header(), Body: tt.body, Now: tt.now})
			if tt.want == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tt.want)
			}
		})
	}
}

func TestVerifyErrorsNeverContainTheSecret(t *testing.T) {
	err := Verify(VerifyParams{Secrets: []string{"whsec_SUPERSECRET%%"}, Header: http.Header{}, Now: now})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "SUPERSECRET")
}

// echoMiddleware is a Verifier (cfg; without a Clock, on one stopped at now) in front of a
// handler that answers 202 and keeps the body it read in *body.
func echoMiddleware(t *testing.T, cfg VerifierConfig) (http.Handler, *string) {
	t.Helper()
	if cfg.Clock == nil {
		mock := clock.NewMock()
		mock.Set(now)
		cfg.Clock = mock
	}
	v, err := NewVerifier(cfg)
	require.NoError(t, err)
	body := new(string)
	return v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*body = string(b)
		w.WriteHeader(http.StatusAccepted)
	})), body
}

func TestVerifierMiddleware(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(now)
	h, gotBody := echoMiddleware(t, VerifierConfig{Secrets: []string{secretOld, secretNew}, Clock: mock, MaxBodyBytes: 64})
	body := `{"ok":true}`
	serve := func(header http.Header, body string) int {
		req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	assert.Equal(t, http.StatusAccepted, serve(signedHeader(t, secretOld, "whd_1", now, []byte(body)), body))
	assert.Equal(t, body, *gotBody, "the handler reads the verified body")
	*gotBody = ""
	assert.Equal(t, http.StatusBadRequest, serve(http.Header{}, body))
	assert.Equal(t, http.StatusUnauthorized, serve(signedHeader(t, secretOld, "whd_1", now, []byte(body)), body+" "))
	mock.Add(6 * time.Minute)
	assert.Equal(t, http.StatusUnauthorized, serve(signedHeader(t, secretOld, "whd_1", now, []byte(body)), body), "replayed too late")
	big := strings.Repeat("x", 65)
	assert.Equal(t, http.StatusRequestEntityTooLarge, serve(signedHeader(t, secretOld, "whd_1", mock.Now(), []byte(big)), big))
	assert.Empty(t, *gotBody, "the handler never ran for a refused request")
}

func TestNewVerifierRejectsBadConfig(t *testing.T) {
	_, err := NewVerifier(VerifierConfig{})
	assert.ErrorIs(t, err, ErrInvalidSecret)
	_, err = NewVerifier(VerifierConfig{Secrets: []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("k"))}, Tolerance: -1})
	assert.Error(t, err)
}

// TestVerifyToleranceIsExact: webhook-timestamp has whole seconds but the
// recipient's clock does not, so the tolerance must be compared with the
// exact difference, not with the clock cut to its second: a request a
// moment past the tolerance is refused, one within a sub-second tolerance
// is accepted.
func TestVerifyToleranceIsExact(t *testing.T) {
	body := []byte(`{"ok":true}`)
	h := signedHeader(t, secretNew, "whd_1", now, body)
	tests := []struct {
		name      string
		now       time.Time
		tolerance time.Duration
		want      error
	}{
		{"exactly the tolerance old", now.Add(5 * time.Minute), 0, nil},
		{"a nanosecond too old", now.Add(5*time.Minute + time.Nanosecond), 0, ErrTimestampTooOld},
		{"most of a second too old", now.Add(5*time.Minute + 999*time.Millisecond), 0, ErrTimestampTooOld},
		{"exactly the tolerance ahead", now.Add(-5 * time.Minute), 0, nil},
		{"a nanosecond too far ahead", now.Add(-5*time.Minute - time.Nanosecond), 0, ErrTimestampTooNew},
		{"1.5s tolerance, 1.5s old", now.Add(1500 * time.Millisecond), 1500 * time.Millisecond, nil},
		{"1.5s tolerance, 1.9s old", now.Add(1900 * time.Millisecond), 1500 * time.Millisecond, ErrTimestampTooOld},
		{"1.5s tolerance, 1.5s ahead", now.Add(-1500 * time.Millisecond), 1500 * time.Millisecond, nil},
		{"1.5s tolerance, 1.9s ahead", now.Add(-1900 * time.Millisecond), 1500 * time.Millisecond, ErrTimestampTooNew},
		{"0.5s tolerance, 0.3s old", now.Add(300 * time.Millisecond), 500 * time.Millisecond, nil},
		{"0.5s tolerance, 0.3s ahead", now.Add(-300 * time.Millisecond), 500 * time.Millisecond, nil},
		{"0.5s tolerance, 0.7s old", now.Add(700 * time.Millisecond), 500 * time.Millisecond, ErrTimestampTooOld},
		{"0.5s tolerance, 0.7s ahead", now.Add(-700 * time.Millisecond), 500 * time.Millisecond, ErrTimestampTooNew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(VerifyParams{Secrets: []string{secretNew}, Header: h, Body: body, Now: tt.now, Tolerance: tt.tolerance})
			if tt.want == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tt.want)
			}

			mock := clock.NewMock()
			mock.Set(tt.now)
			v, err := NewVerifier(VerifierConfig{Secrets: []string{secretNew}, Clock: mock, Tolerance: tt.tolerance})
			require.NoError(t, err)
			if err := v.Verify(h, body); tt.want == nil {
				assert.NoError(t, err, "Verifier")
			} else {
				assert.ErrorIs(t, err, tt.want, "Verifier")
			}
		})
	}
}

// TestVerifierMiddlewareLargestBodyLimit: MaxBodyBytes at its largest (no
// practical limit) still reads and verifies the body; the one byte read
// beyond the limit to detect an oversized body must not overflow it.
func TestVerifierMiddlewareLargestBodyLimit(t *testing.T) {
	h, gotBody := echoMiddleware(t, VerifierConfig{Secrets: []string{secretNew}, MaxBodyBytes: math.MaxInt64})
	body := `{"ok":true}`
	req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(body))
	for k, vs := range signedHeader(t, secretNew, "whd_1", now, []byte(body)) {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	assert.Equal(t, body, *gotBody)
}

// TestVerifyWithoutNowUsesTheWallClock: a caller who leaves Now unset gets
// the check at the current time, not at year 1 (where every real
// timestamp would be "too far in the future").
func TestVerifyWithoutNowUsesTheWallClock(t *testing.T) {
	body := []byte(`{"ok":true}`)
	wall := time.Now()
	fresh := signedHeader(t, secretNew, "whd_1", wall, body)
	assert.NoError(t, Verify(VerifyParams{Secrets: []string{secretNew}, Header: fresh, Body: body}))

	stale := signedHeader(t, secretNew, "whd_1", wall.Add(-time.Hour), body)
	assert.ErrorIs(t, Verify(VerifyParams{Secrets: []string{secretNew}, Header: stale, Body: body}), ErrTimestampTooOld)
}

// TestNegativeToleranceIsRefused: a negative tolerance is a configuration
// mistake, refused with an error naming the field and the value, not
// silently replaced by the 5-minute default. Zero means the default.
func TestNegativeToleranceIsRefused(t *testing.T) {
	body := []byte(`{"ok":true}`)
	h := signedHeader(t, secretNew, "whd_1", now, body)

	err := Verify(VerifyParams{Secrets: []string{secretNew}, Header: h, Body: body, Now: now, Tolerance: -time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Tolerance")
	assert.Contains(t, err.Error(), "-1s")

	_, err = NewVerifier(VerifierConfig{Secrets: []string{secretNew}, Tolerance: -time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Tolerance")
	assert.Contains(t, err.Error(), "-1s")

	assert.NoError(t, Verify(VerifyParams{Secrets: []string{secretNew}, Header: h, Body: body, Now: now.Add(5 * time.Minute)}),
		"zero is the default tolerance")
}

// TestVerifierMiddlewareOuterBodyLimitIs413: a server that wraps r.Body in
// its own http.MaxBytesReader, tighter than MaxBodyBytes, gets 413 for an
// oversized body, as with MaxBodyBytes, not 400 as for an unreadable one.
func TestVerifierMiddlewareOuterBodyLimitIs413(t *testing.T) {
	h, gotBody := echoMiddleware(t, VerifierConfig{Secrets: []string{secretNew}})
	body := `{"payment_id":"pay_7319"}`
	req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(body))
	for k, vs := range signedHeader(t, secretNew, "whd_1", now, []byte(body)) {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	req.Body = http.MaxBytesReader(rec, req.Body, 10)
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
	assert.Empty(t, *gotBody, "the handler did not run")
}

// TestInvalidSecretErrorSaysWhatIsWrong: a secret pasted with a trailing
// space (or in another wrong spelling) is refused with an error naming its
// position and the problem, never the secret.
func TestInvalidSecretErrorSaysWhatIsWrong(t *testing.T) {
	_, err := NewVerifier(VerifierConfig{Secrets: []string{secretOld, secretNew + " "}})
	require.ErrorIs(t, err, ErrInvalidSecret)
	assert.Contains(t, err.Error(), "secret 2 of 2")
	assert.Contains(t, err.Error(), "whitespace")
	assert.NotContains(t, err.Error(), strings.TrimPrefix(secretNew, "whsec_")[:8])

	err = Verify(VerifyParams{Secrets: []string{"WHSEC_" + strings.TrimPrefix(secretOld, "whsec_")}, Header: http.Header{}, Now: now})
	require.ErrorIs(t, err, ErrInvalidSecret)
	assert.Contains(t, err.Error(), "lower-case whsec_")
}

// TestVerifyFindsHeadersWhateverTheirKeySpelling: a header map built
// without canonical keys (http.Header(event.MultiValueHeaders) from a
// serverless event, whose keys are lower-case) verifies like one from
// net/http, through Verify and Verifier.Verify.
func TestVerifyFindsHeadersWhateverTheirKeySpelling(t *testing.T) {
	body := []byte(`{"payment_id":"pay_7319"}`)
	signed := signedHeader(t, secretNew, "whd_1", now, body)
	v, _ := verifierAtNow(t)
	for _, spell := range []func(string) string{strings.ToLower, strings.ToUpper} {
		h := http.Header{}
		for k, vs := range signed {
			h[spell(k)] = vs
		}
		assert.NoError(t, Verify(VerifyParams{Secrets: []string{secretNew}, Header: h, Body: body, Now: now}), "%v", h)
		assert.NoError(t, v.Verify(h, body), "%v", h)
		h[spell(HeaderWebhookSignature)] = []string{"v1,AAAA"}
		assert.ErrorIs(t, v.Verify(h, body), ErrNoMatchingSignature, "a wrong signature under such a key is still checked")
	}
}

// countingBody counts the bytes read from it.
type countingBody struct {
	r    io.Reader
	read int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func TestVerifierMiddlewareJudgesHeadersBeforeReadingTheBody(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(now)
	h, gotBody := echoMiddleware(t, VerifierConfig{Secrets: []string{secretOld}, Clock: mock, MaxBodyBytes: 1 << 20})
	big := strings.Repeat("x", 2<<20) // over the limit
	stale := signedHeader(t, secretOld, "whd_1", now.Add(-time.Hour), []byte(big))
	malformed := signedHeader(t, secretOld, "whd_1", now, []byte(big))
	malformed.Set(HeaderWebhookTimestamp, "soon")
	for _, tc := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"unsigned", http.Header{}, http.StatusBadRequest},
		{"malformed timestamp", malformed, http.StatusBadRequest},
		{"stale timestamp", stale, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingBody{r: strings.NewReader(big)}
			req := httptest.NewRequest(http.MethodPost, "/hooks", body)
			for k, v := range tc.header {
				req.Header[k] = v
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, tc.want, rec.Code, "the headers' problem is named, not the body's size")
			assert.Zero(t, body.read, "a request refused on its headers is refused before its body is read")
		})
	}
	assert.Empty(t, *gotBody, "the handler never ran")
}

// verifierAtNow is a Verifier of secretNew on a mock clock set to now.
func verifierAtNow(t *testing.T) (*Verifier, *clock.Mock) {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(now)
	v, err := NewVerifier(VerifierConfig{Secrets: []string{secretNew}, Clock: mock})
	require.NoError(t, err)
	return v, mock
}
