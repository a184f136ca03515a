package recipient

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/hookrelay/hookrelay/adapters/http/internal/signature"
)

// Standard Webhooks header names.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// MaxSignatures is the most entries a webhook-signature header may hold;
// a header with more is refused with ErrTooManySignatures (400 from the
// middleware). A sender puts one entry per active secret (two or three
// during a rotation; a hookrelay sender at most 16), perhaps doubled by
// entries of another scheme, so 64 refuses no genuine sender while it
// bounds the work a request can ask for, whatever the server's header
// size limit.
const MaxSignatures = 64

// DefaultTolerance is how far a webhook-timestamp may be from the
// recipient's clock, either way, unless configured otherwise.
const DefaultTolerance = 5 * time.Minute

// Verification errors. An error from Verify wraps exactly one of them,
// unless it reports a negative Tolerance; none carries a secret.
var (
	// ErrMissingHeaders: webhook-id, webhook-timestamp or webhook-signature
	// is absent or empty.
	ErrMissingHeaders = errors.New("recipient: missing webhook-id, webhook-timestamp or webhook-signature header")
	// ErrInvalidTimestamp: webhook-timestamp is not a Unix time in seconds.
	ErrInvalidTimestamp = errors.New("recipient: webhook-timestamp is not an integer Unix time")
	// ErrTimestampTooOld and ErrTimestampTooNew: the timestamp is outside
	// the tolerance (a replayed or badly clocked request).
	ErrTimestampTooOld = errors.New("recipient: webhook-timestamp is too old")
	ErrTimestampTooNew = errors.New("recipient: webhook-timestamp is too far in the future")
	// ErrTooManySignatures: webhook-signature has more than MaxSignatures
	// entries. The request is refused whole, rather than checked on its
	// first MaxSignatures entries, so that the answer does not depend on
	// where the genuine signature stands, and so that a sender over the
	// limit is told why, not that no signature matched.
	ErrTooManySignatures = fmt.Errorf("recipient: webhook-signature has more than %d entries", MaxSignatures)
	// ErrNoMatchingSignature: no v1 signature matches any accepted secret.
	ErrNoMatchingSignature = errors.New("recipient: no signature matches an accepted secret")
	// ErrInvalidSecret: a configured secret is not a valid "whsec_" base64
	// key (a configuration error, not the sender's). The error wrapping it
	// names the secret's position and what is wrong (empty, surrounding
	// whitespace, an upper-case prefix, URL-safe base64, missing padding),
	// never the secret.
	ErrInvalidSecret = errors.New("recipient: " + signature.ErrInvalidSecret.Error())
)

// VerifyParams are the inputs of Verify.
type VerifyParams struct {
	// Secrets are the accepted secrets ("whsec_<base64 key>"); during a
	// rotation, list both old and new.
	Secrets []string
	// Header holds the request's headers; their keys need not be in
	// canonical form (http.Header(event.MultiValueHeaders) works).
	Header http.Header
	// Body is the raw request body, exactly as received.
	Body []byte
	// Now is the time the timestamp is checked against. Defaults to the
	// wall clock's current time (when it is the zero time.Time); tests pass
	// a fixed time.
	Now time.Time
	// Tolerance bounds |Now − webhook-timestamp|. Zero means
	// DefaultTolerance; a negative value is refused.
	Tolerance time.Duration
}

// String describes the parameters without their secrets (only how many
// there are) or the body (only its length), so printing them with any fmt verb
// cannot leak a secret.
func (p VerifyParams) String() string {
	return fmt.Sprintf("recipient.VerifyParams{Secrets: %s, Header: %d fields, Body: %d bytes, Now: %v, Tolerance: %v}",
		secretsCount(len(p.Secrets)), len(p.Header), len(p.Body), p.Now, p.Tolerance)
}

// Format writes String for every verb (%v, %+v, %#v, %d, …), so no
// verb prints the fields one by one.
func (p VerifyParams) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, p.String()) }

// secretsCount says how many secrets there are, in place of them.
func secretsCount(n int) string {
	if n == 1 {
		return "1 secret (redacted)"
	}
	return strconv.Itoa(n) + " secrets (redacted)"
}

// Verify checks a Standard Webhooks request: the three headers are
// present, webhook-signature has at most MaxSignatures entries, the
// timestamp is within the tolerance of Now (the current time when Now is
// zero), and at least one v1 signature in webhook-signature is the HMAC-SHA256 of
// "id.timestamp.body" under one of the secrets (compared in constant time).
// It returns nil, an error naming Tolerance when p.Tolerance is negative,
// or an error wrapping one of the Err values above.
func Verify(p VerifyParams) error {
	keys, err := decodeSecrets(p.Secrets)
	if err != nil {
		return err
	}
	tolerance, err := resolveTolerance("VerifyParams.Tolerance", p.Tolerance)
	if err != nil {
		return err
	}
	now := p.Now
	if now.IsZero() {
		now = clock.New().Now()
	}
	return verify(keys, p.Header, p.Body, now, tolerance)
}

func decodeSecrets(secrets []string) ([][]byte, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no secret configured", ErrInvalidSecret)
	}
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		k, err := signature.DecodeSecret(s)
		if err != nil {
			// The reason says what is wrong (e.g. surrounding whitespace)
			// without quoting the secret.
			reason := "unusable"
			var ise *signature.InvalidSecretError
			if errors.As(err, &ise) {
				reason = ise.Reason
			}
			return nil, fmt.Errorf("%w (secret %d of %d): %s", ErrInvalidSecret, i+1, len(secrets), reason)
		}
		keys[i] = k
	}
	return keys, nil
}

// resolveTolerance applies DefaultTolerance to zero. A negative tolerance
// is refused rather than defaulted: it is a mistake, and taken as given it
// would refuse every request.
func resolveTolerance(field string, d time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, fmt.Errorf("recipient: %s is %v; it must not be negative (zero means DefaultTolerance)", field, d)
	case d == 0:
		return DefaultTolerance, nil
	}
	return d, nil
}

// verify checks at now with a resolved (positive) tolerance.
func verify(keys [][]byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	signed, err := checkHeaders(h, now, tolerance)
	if err != nil {
		return err
	}
	return signed.match(keys, body)
}

// signedHeaders are a request's webhook headers that passed checkHeaders.
type signedHeaders struct {
	id   string
	sigs []signature.Signature
	unix int64
}

// checkHeaders checks what can be checked without the body: the three
// headers are present, webhook-signature has at most MaxSignatures
// entries and the timestamp is within the tolerance at now.
func checkHeaders(h http.Header, now time.Time, tolerance time.Duration) (signedHeaders, error) {
	id, ts, sig := headerValue(h, HeaderWebhookID), headerValue(h, HeaderWebhookTimestamp), headerValue(h, HeaderWebhookSignature)
	if id == "" || ts == "" || sig == "" {
		return signedHeaders{}, ErrMissingHeaders
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return signedHeaders{}, ErrInvalidTimestamp
	}
	sigs, ok := signature.Parse(sig, MaxSignatures)
	if !ok {
		return signedHeaders{}, ErrTooManySignatures
	}
	// Timestamps more than a second beyond the tolerance are settled in
	// whole seconds, so that extreme values cannot overflow; the others by
	// the exact difference from now, which has a fraction of a second that
	// the timestamp has not.
	nowUnix, tol := now.Unix(), int64(tolerance/time.Second)
	switch {
	case unix < nowUnix-tol-1:
		return signedHeaders{}, ErrTimestampTooOld
	case unix > nowUnix+tol+1:
		return signedHeaders{}, ErrTimestampTooNew
	}
	switch age := now.Sub(time.Unix(unix, 0)); {
	case age > tolerance:
		return signedHeaders{}, ErrTimestampTooOld
	case age < -tolerance:
		return signedHeaders{}, ErrTimestampTooNew
	}
	return signedHeaders{id: id, sigs: sigs, unix: unix}, nil
}

// match checks the signatures against body.
func (s signedHeaders) match(keys [][]byte, body []byte) error {
	if !signature.Match(keys, s.id, s.unix, body, s.sigs) {
		return ErrNoMatchingSignature
	}
	return nil
}

// headerValue is h.Get(name), but also finds the header under a key that
// is not in canonical form, as in a map converted from a serverless event
// (lower-case keys). With several such spellings and no canonical one, the
// first key in sort order wins, so the choice does not depend on map order.
func headerValue(h http.Header, name string) string {
	if vs := h[http.CanonicalHeaderKey(name)]; len(vs) > 0 {
		return vs[0]
	}
	key, value, found := "", "", false
	for k, vs := range h {
		if len(vs) > 0 && strings.EqualFold(k, name) && (!found || k < key) {
			key, value, found = k, vs[0], true
		}
	}
	return value
}

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	// Secrets are the accepted secrets; at least one is required.
	Secrets []string
	// Tolerance bounds |clock − webhook-timestamp|. Zero means
	// DefaultTolerance (5 minutes); a negative value is refused.
	Tolerance time.Duration
	// Clock defaults to the wall clock.
	Clock clock.Clock
	// MaxBodyBytes refuses larger bodies with 413. Defaults to 1 MiB.
	MaxBodyBytes int64
}

// String describes the configuration without its secrets (only how many
// there are), so printing it with any fmt verb cannot leak a secret.
func (c VerifierConfig) String() string {
	return fmt.Sprintf("recipient.VerifierConfig{Secrets: %s, Tolerance: %v, Clock: %v, MaxBodyBytes: %d}",
		secretsCount(len(c.Secrets)), c.Tolerance, c.Clock != nil, c.MaxBodyBytes)
}

// Format writes String for every verb (%v, %+v, %#v, %d, …), so no
// verb prints the fields one by one.
func (c VerifierConfig) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// Verifier verifies Standard Webhooks requests with pre-decoded secrets.
// It is safe for concurrent use.
type Verifier struct {
	keys      [][]byte
	tolerance time.Duration
	clock     clock.Clock
	maxBody   int64
}

// NewVerifier validates cfg and applies its defaults. It returns an error
// wrapping ErrInvalidSecret when a secret does not decode, and an error
// naming the field when Tolerance or MaxBodyBytes is negative.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	keys, err := decodeSecrets(cfg.Secrets)
	if err != nil {
		return nil, err
	}
	tolerance, err := resolveTolerance("VerifierConfig.Tolerance", cfg.Tolerance)
	if err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("recipient: VerifierConfig.MaxBodyBytes is %d; it must not be negative (zero means 1 MiB)", cfg.MaxBodyBytes)
	}
	v := &Verifier{keys: keys, tolerance: tolerance, clock: cfg.Clock, maxBody: cfg.MaxBodyBytes}
	if v.clock == nil {
		v.clock = clock.New()
	}
	if v.maxBody == 0 {
		v.maxBody = defaultMaxBodyBytes
	}
	return v, nil
}

// String describes the verifier without its keys (only how many there
// are), so printing it with any fmt verb cannot leak a secret.
func (v Verifier) String() string {
	return fmt.Sprintf("recipient.Verifier{Secrets: %s, Tolerance: %v, MaxBodyBytes: %d}",
		secretsCount(len(v.keys)), v.tolerance, v.maxBody)
}

// Format writes String for every verb (%v, %+v, %#v, %d, …), so no
// verb prints the fields one by one.
func (v Verifier) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, v.String()) }

// Verify checks a request's headers and raw body at the verifier's clock.
// The header keys need not be in canonical form.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	return verify(v.keys, h, body, v.clock.Now(), v.tolerance)
}

// Middleware checks the headers and the timestamp, then reads the body (up
// to MaxBodyBytes) and checks the signatures, and calls next with the body
// restored, or answers without calling next (a request refused on its
// headers before its body is read):
//
//	400 Bad Request            missing headers, a malformed timestamp, more than
//	                           MaxSignatures signature entries or an unreadable body
//	401 Unauthorized           timestamp outside the tolerance, or no matching signature
//	413 Content Too Large      body over MaxBodyBytes, or over an outer http.MaxBytesReader
//	                           the server put around r.Body
//
// The hookrelay sender treats each of these as permanent (401 as
// auth_rejected), so a misconfigured secret stops retries rather than
// spending them.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The headers first: a request they refuse is answered without
		// reading its body (up to MaxBodyBytes of an unsigned or stale
		// request), and told what is wrong with it rather than that its
		// body is too large.
		signed, err := checkHeaders(r.Header, v.clock.Now(), v.tolerance)
		if err != nil {
			refuse(w, err)
			return
		}
		body, ok := readBody(w, r, v.maxBody)
		if !ok {
			return
		}
		if err := signed.match(v.keys, body); err != nil {
			refuse(w, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// refuse answers a request Verify refused: 400 for missing headers, a
// malformed timestamp or too many signature entries, 401 otherwise.
func refuse(w http.ResponseWriter, err error) {
	code := http.StatusUnauthorized
	if errors.Is(err, ErrMissingHeaders) || errors.Is(err, ErrInvalidTimestamp) || errors.Is(err, ErrTooManySignatures) {
		code = http.StatusBadRequest
	}
	http.Error(w, err.Error(), code)
}
