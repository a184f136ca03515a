package hookhttp

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/http/internal/signature"
	"github.com/hookrelay/hookrelay/internal/reqheader"
	"github.com/hookrelay/hookrelay/internal/urlcred"
)

// version is this library's version as the User-Agent names it.
const version = "0.1.0"

// DefaultUserAgent is the User-Agent header sent unless Config.UserAgent
// says otherwise.
const DefaultUserAgent = "hookrelay/" + version

// Header names the sender sets on every request.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
	HeaderIdempotencyKey   = "Idempotency-Key"
)

// Reasons the HTTP sender decides before or instead of a response (the
// classification table's reasons are the core's: hookrelay.ReasonTimeout,
// hookrelay.ReasonRateLimited, …).
const (
	// ReasonInvalidURL: the destination URL does not parse as an absolute
	// URL, has a port outside 1–65535, or names its host by a number in a
	// spelling that is not dialled.
	ReasonInvalidURL = "invalid_url"
	// ReasonUnsupportedScheme: the destination URL is neither http nor
	// https.
	ReasonUnsupportedScheme = "unsupported_scheme"
	// ReasonDestinationBlocked: the destination resolves to an address the
	// SSRF guard refuses (private, loopback, link-local, … unless allowed).
	ReasonDestinationBlocked = "destination_blocked"
	// ReasonConflictInProgress: the recipient answered 409 with Retry-After:
	// another attempt of the same delivery is still being applied.
	ReasonConflictInProgress = "conflict_in_progress"
)

// ReasonInvalidSecret is the permanent reason for a destination whose
// signing secret is not a valid "whsec_" base64 key; the Detail names the
// secret's position and what is wrong with it, never the secret. Fix the
// secret, then redrive.
const ReasonInvalidSecret = "invalid_signing_secret"

// ReasonInvalidHeader is the permanent reason for a destination header
// that cannot be sent (a bad name, or a control character other than tab,
// such as CR, LF or NUL, in the value).
const ReasonInvalidHeader = "invalid_destination_header"

// Config configures a Sender. Zero fields take the documented defaults.
type Config struct {
	// Timeout bounds one whole request (connect, write, response headers
	// and the read of the response snippet) for destinations whose Timeout
	// is zero. It is a real network deadline, not read from the client's
	// clock. Defaults to 10s.
	Timeout time.Duration
	// MaxIdleConnsPerHost is how many kept-alive connections to one host
	// stay open between requests. Every send beyond it to a busy host opens
	// a new connection (a TCP, and often a TLS, handshake), so it should be
	// at least the worker's Concurrency when many destinations share a
	// host. Defaults to 1024: a connection is only there to be kept because
	// that many sends to the host were in flight at once, which the
	// worker's Concurrency bounds, and it is closed after 90 seconds idle.
	// Idle connections to all hosts together are capped at the larger of
	// this and 1024 (the oldest closed first), so a worker that reaches
	// many hosts keeps a bounded number of sockets open.
	MaxIdleConnsPerHost int
	// MaxPayloadBytes refuses larger payloads before anything is sent, as
	// permanent payload_too_large. Defaults to 1 MiB.
	MaxPayloadBytes int
	// MaxSnippetBytes is how much of a response body is kept (redacted and
	// truncated) as Result.Detail. Up to 64 KiB more is read and discarded
	// so the connection can be reused; beyond that the connection is
	// closed. Defaults to 512.
	MaxSnippetBytes int
	// ContentType is the Content-Type of every request unless the
	// destination's Headers set one. Defaults to "application/json".
	ContentType string
	// UserAgent defaults to DefaultUserAgent ("hookrelay/<version>").
	UserAgent string
	// Classify maps a response to a Result; wrap DefaultClassify to
	// override the table for some destinations. Defaults to DefaultClassify.
	Classify ClassifyFunc
	// AllowNetworks opens exceptions in the SSRF guard: addresses inside
	// these prefixes may be dialled even if loopback, private, link-local
	// and so on. Tests allow 127.0.0.0/8 and ::1/128 for httptest servers;
	// a deployment that delivers into its own network lists that network.
	// The guard itself cannot be turned off; allowing 0.0.0.0/0 and ::/0
	// has that effect, deliberately visibly. An IPv4 network may be
	// written in its IPv4-mapped form (::ffff:10.0.0.0/104 is 10.0.0.0/8).
	AllowNetworks []netip.Prefix
	// Dialer is the base dialer (timeouts, resolver, keep-alive). The SSRF
	// guard wraps its Control (or ControlContext) function and decides
	// first.
	// Defaults to a net.Dialer with a 30s keep-alive.
	Dialer *net.Dialer
	// TLSClientConfig configures TLS for https destinations, e.g. RootCAs
	// for a private CA. Defaults to the system roots.
	TLSClientConfig *tls.Config
	// OnRequest, if set, is called with each request just before it is
	// sent, after every header (signatures included) is set; ctx is the
	// request's context. It may add headers that are not signed, e.g. the
	// OpenTelemetry adapter injects traceparent. It must not read or replace
	// the body, and must not log the request's secret-bearing headers.
	OnRequest func(ctx context.Context, req *http.Request)
}

// Sender delivers over HTTP(S) and implements hookrelay.Sender. Each Send
// is one POST of the stored payload bytes, unchanged, signed per Standard
// Webhooks; see the package documentation for headers and classification.
// Redirects are never followed and no proxy from the environment is used
// (the SSRF guard checks the address actually dialled). A Sender is safe
// for concurrent use and reuses connections; call CloseIdleConnections when
// done with it. It keeps the decoded keys of the signing secrets it has
// used (up to 4096 of at most 1 KiB each, by secret value, so a rotated
// secret signs from the next send on; a longer secret is decoded at each
// send).
type Sender struct {
	cfg Config
	tr  *http.Transport
	// rt makes the round trip: tr, or a test's stand-in. The sender calls
	// it directly rather than through an http.Client: a client never
	// follows a redirect here, has no cookie jar and no timeout of its own
	// (the context has it), and its Do cloned every request's headers for
	// the redirects it would not follow. What it did that matters, sending
	// URL user info as Basic authorization, Send does itself.
	rt   http.RoundTripper
	keys keyCache
}

var (
	_ hookrelay.Sender        = (*Sender)(nil)
	_ hookrelay.SendTimeouter = (*Sender)(nil)
)

// defaultMaxIdleConns is Config.MaxIdleConnsPerHost's default and the
// least cap on idle connections to all hosts together.
const defaultMaxIdleConns = 1024

// New returns a Sender. It returns an error wrapping
// hookrelay.ErrInvalidConfig for negative sizes or durations.
func New(cfg Config) (*Sender, error) {
	bad := func(field, problem string) error {
		return &hookrelay.ValidationError{Err: hookrelay.ErrInvalidConfig, Field: field, Problem: problem}
	}
	switch {
	case cfg.Timeout < 0:
		return nil, bad("Timeout", "must not be negative")
	case cfg.MaxPayloadBytes < 0:
		return nil, bad("MaxPayloadBytes", "must not be negative")
	case cfg.MaxSnippetBytes < 0:
		return nil, bad("MaxSnippetBytes", "must not be negative")
	case cfg.MaxIdleConnsPerHost < 0:
		return nil, bad("MaxIdleConnsPerHost", "must not be negative")
	}
	if cfg.MaxIdleConnsPerHost == 0 {
		cfg.MaxIdleConnsPerHost = defaultMaxIdleConns
	}
	for i, p := range cfg.AllowNetworks {
		if !p.IsValid() {
			return nil, bad(fmt.Sprintf("AllowNetworks[%d]", i), "is not a valid prefix")
		}
	}
	if slices.ContainsFunc(cfg.AllowNetworks, isMappedPrefix) {
		// The guard decides an IPv4-mapped address as the IPv4 address
		// it is: an IPv4 network written as ::ffff:a.b.c.d/n is that one.
		cfg.AllowNetworks = slices.Clone(cfg.AllowNetworks)
		for i, p := range cfg.AllowNetworks {
			if isMappedPrefix(p) {
				cfg.AllowNetworks[i] = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
		}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxPayloadBytes == 0 {
		cfg.MaxPayloadBytes = 1 << 20
	}
	if cfg.MaxSnippetBytes == 0 {
		cfg.MaxSnippetBytes = 512
	}
	if cfg.ContentType == "" {
		cfg.ContentType = "application/json"
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	if cfg.Classify == nil {
		cfg.Classify = DefaultClassify
	}
	var d net.Dialer
	if cfg.Dialer != nil {
		d = *cfg.Dialer
	} else {
		d.KeepAlive = 30 * time.Second
	}
	// The guard runs as ControlContext (net.Dialer ignores Control when
	// ControlContext is set), before the dialer's own of either kind.
	check, inner, innerCtx := guardControl(cfg.AllowNetworks), d.Control, d.ControlContext
	d.Control = nil
	d.ControlContext = func(ctx context.Context, network, address string, c syscall.RawConn) error {
		if err := check(network, address, c); err != nil {
			return err
		}
		if passed, ok := ctx.Value(guardPassedKey{}).(*atomic.Bool); ok {
			passed.Store(true)
		}
		switch {
		case innerCtx != nil:
			return innerCtx(ctx, network, address, c)
		case inner != nil:
			return inner(network, address, c)
		}
		return nil
	}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would make the guard check the proxy, not the destination
		DialContext:           guardedDial(d.DialContext),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          max(defaultMaxIdleConns, cfg.MaxIdleConnsPerHost),
		MaxIdleConnsPerHost:   cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if cfg.TLSClientConfig != nil {
		tr.TLSClientConfig = cfg.TLSClientConfig.Clone()
	}
	return &Sender{cfg: cfg, tr: tr, rt: tr}, nil
}

// SignatureHeader returns the webhook-signature header value for a message:
// one "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per secret,
// space-separated. Secrets are in the "whsec_<base64 key>" form. The error
// (for a secret that does not decode) never contains the secret.
func SignatureHeader(secrets []string, id string, timestamp time.Time, body []byte) (string, error) {
	keys, err := decodeKeys(secrets)
	if err != nil {
		return "", fmt.Errorf("hookhttp: %w", err)
	}
	return signature.Header(keys, id, timestamp.Unix(), body), nil
}

// decodeKeys decodes "whsec_" secrets; the error names the secret's
// position, never its value.
func decodeKeys(secrets []string) ([][]byte, error) {
	keys := make([][]byte, len(secrets))
	for i, sec := range secrets {
		k, err := signature.DecodeSecret(sec)
		if err != nil {
			return nil, fmt.Errorf("signing secret %d of %d: %w", i+1, len(secrets), err)
		}
		keys[i] = k
	}
	return keys, nil
}

// validHeader reports whether a destination header can be sent as is;
// the transport would otherwise refuse it at send time, every time.
func validHeader(name, value string) bool {
	if name == "" || badNameByte(name) >= 0 {
		return false
	}
	// As the transport checks a value: no control character but tab.
	for _, c := range []byte(value) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// badNameByte is the index of the first byte of a header name that is not
// an HTTP token character, or -1.
func badNameByte(name string) int {
	for i, c := range []byte(name) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return i
		}
	}
	return -1
}

// invalidHeaderDetail describes why a destination header validHeader
// refused cannot be sent. A bad name is quoted only up to its first bad
// byte: a name that is a whole header line ("Authorization: Bearer …")
// holds the credential after it.
func invalidHeaderDetail(name string) string {
	if name == "" {
		return "a destination header has an empty name"
	}
	if i := badNameByte(name); i >= 0 {
		return fmt.Sprintf("destination header name %q is followed by %q (byte %d), which a header name cannot contain", name[:i], name[i], i)
	}
	return fmt.Sprintf("destination header %q has a control character in its value", name)
}

// SendTimeout implements hookrelay.SendTimeouter: the destination's
// Timeout, or Config.Timeout when it has none. The client refuses to
// enqueue for a destination whose timeout is not below its LeaseFor.
func (s *Sender) SendTimeout(dest hookrelay.Destination) time.Duration {
	if dest.Timeout > 0 {
		return dest.Timeout
	}
	return s.cfg.Timeout
}

// CloseIdleConnections closes kept-alive connections that carry no request.
func (s *Sender) CloseIdleConnections() { s.tr.CloseIdleConnections() }

// drainBytes is how much of a response beyond the snippet is read so the
// connection can be reused.
const drainBytes = 64 << 10

// Send makes one attempt. It never returns an error: bad input, a blocked
// address and network failures are all Results (see the package
// documentation for the table). Result.Detail never contains the
// destination's URL credentials, headers or signing secrets.
func (s *Sender) Send(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
	dest, d := p.Destination, p.Delivery
	// The strings to redact are worked out only when a Detail that may
	// hold one is written: most sends write none.
	secrets := lazySecrets{dest: &dest}

	ctx, cancel := context.WithTimeout(ctx, s.SendTimeout(dest))
	defer cancel()
	var written atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				written.Store(true)
			}
		},
	})

	// The request parses the URL; the checks below read what it parsed
	// (parsing it first, then again from its String, cost a send twice).
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dest.URL, nil)
	if err != nil || req.URL.Host == "" || req.URL.Opaque != "" {
		// url.Parse errors quote the URL, credentials included: not kept.
		return hookrelay.Permanent(ReasonInvalidURL).WithDetail("destination URL does not parse as an absolute URL")
	}
	u := req.URL
	if u.Scheme != "http" && u.Scheme != "https" {
		return hookrelay.Permanent(ReasonUnsupportedScheme).
			WithDetail(redact(fmt.Sprintf("scheme %q is not http or https", u.Scheme), secrets.get()))
	}
	if port := u.Port(); port != "" {
		// url.Parse takes any digits; the dialer refuses a port out of
		// range at every send, as a network error.
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return hookrelay.Permanent(ReasonInvalidURL).
				WithDetail("destination URL port is not in the range 1-65535")
		}
	}
	if a, numeric, ok := numericHost(u.Hostname()); numeric {
		// The resolver would fail on these (a retried dns_failure) while
		// other software reads them as addresses: refused at once.
		if ok && !addrAllowed(a, s.cfg.AllowNetworks) {
			return hookrelay.Permanent(ReasonDestinationBlocked).
				WithDetail(fmt.Sprintf("host is a numeric spelling of %s, which is not allowed (SSRF guard; see Config.AllowNetworks)", a))
		}
		return hookrelay.Permanent(ReasonInvalidURL).
			WithDetail("host is a numeric address in a form other than a dotted quad; write it as a.b.c.d")
	}
	if len(d.Payload) > s.cfg.MaxPayloadBytes {
		return hookrelay.Permanent(hookrelay.ReasonPayloadTooLarge).
			WithDetail(fmt.Sprintf("payload is %d bytes, over the sender's %d-byte limit", len(d.Payload), s.cfg.MaxPayloadBytes))
	}
	var keyBuf [2]*signature.Key // two cover a rotation without allocating
	keys, err := s.keys.keys(keyBuf[:0], dest.Secrets)
	if err != nil {
		return hookrelay.Permanent(ReasonInvalidSecret).WithDetail(err.Error())
	}
	for name, value := range dest.Headers {
		if reqheader.Unsendable(name, value) != "" {
			continue // not sent (setHeaders), so it cannot fail the send
		}
		if !validHeader(name, value) {
			return hookrelay.Permanent(ReasonInvalidHeader).
				WithDetail(redact(invalidHeaderDetail(name), secrets.get()))
		}
	}

	// The body is set here, so the request has no GetBody: without it the
	// transport cannot replay a written request on a reused connection by
	// itself. Each attempt is one request; only the core decides about
	// retries.
	req.Body, req.ContentLength = payloadBody(d.Payload), int64(len(d.Payload))
	ts := p.Now.Unix()
	var sig string
	if len(keys) > 0 {
		sig = signature.HeaderOf(keys, d.ID, ts, d.Payload)
	}
	s.setHeaders(req.Header, dest.Headers, d.ID, strconv.FormatInt(ts, 10), sig)
	if s.cfg.OnRequest != nil {
		s.cfg.OnRequest(ctx, req)
	}
	if u.User != nil && req.Header.Get("Authorization") == "" {
		// As http.Client sends URL user info: Basic, unless a header
		// (the destination's, or OnRequest's) already authorizes.
		pw, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), pw)
	}

	resp, err := s.rt.RoundTrip(req)
	if err != nil {
		return classifyError(err, written.Load()).WithDetail(redact(errorDetail(err), secrets.get()))
	}
	var snippet string
	if resp.Body != http.NoBody {
		// The transport answers http.NoBody for a response without one (a
		// 204, a Content-Length of 0): there is nothing to read or redact.
		snippet = readSnippet(resp.Body, s.cfg.MaxSnippetBytes, secrets.get())
	}
	_ = resp.Body.Close()

	cp := ClassifyParams{DestinationID: dest.ID, StatusCode: resp.StatusCode, Header: resp.Header}
	if v := resp.Header.Get("Retry-After"); v != "" {
		cp.RetryAfter, cp.HasRetryAfter = ParseRetryAfter(v, p.Now)
	}
	res := s.cfg.Classify(cp)
	res.StatusCode = resp.StatusCode
	if res.Detail == "" {
		res.Detail = snippet
	} else {
		res.Detail = redact(res.Detail, secrets.get())
	}
	return res
}

// payloadBody is the request body sending payload. The request is made
// without a body and given this one after: given a *bytes.Reader,
// NewRequestWithContext also makes a GetBody closure for replays, which
// the sender turns off (Send). The body stays an io.NopCloser around a
// *bytes.Reader, a reader the transport knows is in memory, so that it
// writes headers and payload in one write rather than flushing the
// headers first (a body type of our own cost a syscall per send). Empty
// is http.NoBody: the transport then sends a Content-Length of 0.
func payloadBody(payload []byte) io.ReadCloser {
	if len(payload) == 0 {
		return http.NoBody
	}
	return io.NopCloser(bytes.NewReader(payload))
}

// The canonical forms of the header names the sender sets, as Header.Set
// would store them.
const (
	canonicalContentType      = "Content-Type"
	canonicalUserAgent        = "User-Agent"
	canonicalWebhookID        = "Webhook-Id"
	canonicalWebhookTimestamp = "Webhook-Timestamp"
	canonicalWebhookSignature = "Webhook-Signature"
	canonicalIdempotencyKey   = "Idempotency-Key"
)

// setHeaders sets a request's headers as these Header.Set calls would, in
// this order (so a later one wins): Content-Type and User-Agent from the
// Config, each destination header but those reqheader.Unsendable refuses
// (stores refuse them on Put; one stored before that is dropped, not
// sent), then webhook-id, webhook-timestamp, webhook-signature (only if
// sig is not empty) and Idempotency-Key. It stores canonical keys directly
// and takes every one-value slice from one array instead of a slice and,
// for the webhook-* names, a canonicalized key per call.
func (s *Sender) setHeaders(h http.Header, destHeaders map[string]string, id, ts, sig string) {
	vals := make([]string, 0, 6+len(destHeaders))
	set := func(key, v string) {
		vals = append(vals, v)
		// Capacity 1: an Add (e.g. by OnRequest) copies the slice instead
		// of writing into the next header's value.
		h[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set(canonicalContentType, s.cfg.ContentType)
	set(canonicalUserAgent, s.cfg.UserAgent)
	for k, v := range destHeaders {
		if reqheader.Unsendable(k, v) == "" {
			set(http.CanonicalHeaderKey(k), v)
		}
	}
	set(canonicalWebhookID, id)
	set(canonicalWebhookTimestamp, ts)
	if sig != "" {
		set(canonicalWebhookSignature, sig)
	}
	set(canonicalIdempotencyKey, id)
}

// readSnippet reads the start of a response body for diagnostics, redacts
// secrets in it and truncates it to n bytes of valid UTF-8, then reads and
// discards up to drainBytes more so the connection can be reused. A read
// error (e.g. a reset after the headers) ends the snippet; the status code
// already decides the result.
//
// Redaction must hold wherever a secret falls. A margin as long as the
// longest secret is read beyond n, so a secret straddling byte n is seen
// whole; and a trailing start of a secret (cut by the read limit, or by the
// recipient) is dropped before redaction, because masks are shorter than
// the secrets they replace and would otherwise pull that partial secret
// back inside the first n bytes.
func readSnippet(body io.Reader, n int, secrets []string) string {
	margin := 0
	for _, s := range secrets {
		margin = max(margin, len(s))
	}
	limit := n + margin
	buf, _ := io.ReadAll(io.LimitReader(body, int64(limit)))
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainBytes))
	return truncate(redact(dropPartialSecret(string(buf), secrets), secrets), n)
}

// dropPartialSecret cuts s before any suffix that is a proper prefix of
// one of the secrets: text that may be the start of a secret whose end was
// not read. It repeats until no such suffix is left, since a cut can
// itself leave a whole secret partial.
func dropPartialSecret(s string, secrets []string) string {
	for {
		cut := len(s)
		for _, sec := range secrets {
			for k := min(len(sec)-1, len(s)); k > 0; k-- {
				if s[len(s)-1] == sec[k-1] && strings.HasSuffix(s, sec[:k]) {
					cut = min(cut, len(s)-k)
					break
				}
			}
		}
		if cut == len(s) {
			return s
		}
		s = s[:cut]
	}
}

// truncate makes s valid UTF-8 (U+FFFD for each run of bytes that are
// not), then cuts it to at most n bytes on a rune boundary. Replacing
// first keeps the text after a byte that is not UTF-8 and holds the limit
// though a replacement is longer than the byte it replaces.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// errorDetail describes a round-trip error without the request URL: a
// *url.Error quotes the URL, credentials included, so only its cause is
// kept.
func errorDetail(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var blocked *blockedError
	if errors.As(err, &blocked) {
		return blocked.Error()
	}
	return err.Error()
}

// secretsOf lists the strings of a destination that must never appear in
// a diagnostic: signing secrets (whole, without their prefix, and their
// decoded key bytes in raw, base64 and hex forms), header values
// (Authorization and the like, and the token after an auth scheme), URL
// credentials (decoded, as the URL spells them, escaped, and as the
// "Basic base64(user:password)" value Send builds from them, as Go's
// client does) and URL query values (raw and decoded).
func secretsOf(d hookrelay.Destination) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 4 { // shorter strings would redact ordinary text
			out = append(out, s)
		}
	}
	for _, s := range d.Secrets {
		add(s)
		add(strings.TrimPrefix(s, signature.SecretPrefix))
		if key, err := signature.DecodeSecret(s); err == nil {
			add(string(key))
			add(base64.StdEncoding.EncodeToString(key))
			add(base64.RawStdEncoding.EncodeToString(key))
			add(base64.URLEncoding.EncodeToString(key))
			add(base64.RawURLEncoding.EncodeToString(key))
			add(hex.EncodeToString(key))
		}
	}
	for _, v := range d.Headers {
		add(v)
		if _, tok, ok := strings.Cut(v, " "); ok {
			add(tok) // "Bearer <token>": the token alone
		}
	}
	if u, err := url.Parse(d.URL); err == nil && u.User != nil {
		add(u.User.String())
		name := u.User.Username()
		add(name)
		add(url.QueryEscape(name))
		pw, ok := u.User.Password()
		if ok {
			add(pw)
			add(url.QueryEscape(pw))
		}
		// What net/http sends as Authorization for URL user info.
		basic := base64.StdEncoding.EncodeToString([]byte(name + ":" + pw))
		add(basic)
		add(name + ":" + pw)
	}
	if u, err := url.Parse(d.URL); err == nil {
		// ?token=… is a credential too: as the URL spells it (what a
		// recipient echoing the request URI shows) and decoded. The query
		// is split by hand: url.ParseQuery drops a pair with a ';' or a
		// bad escape, value included.
		for _, seps := range []string{"&", "&;"} {
			for _, pair := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
				_, v, _ := strings.Cut(pair, "=")
				add(v)
				if dv, err := url.QueryUnescape(v); err == nil {
					add(dv)
				}
				if dv, err := url.PathUnescape(v); err == nil {
					add(dv)
				}
			}
		}
	}
	// Userinfo of URLs that do not parse: everything before the last '@'
	// of the authority.
	if _, rest, ok := strings.Cut(d.URL, "://"); ok {
		if i := strings.LastIndex(rest, "@"); i >= 0 {
			add(rest[:i])
		}
		// The user name and password as the URL spells them, escapes
		// as written (Go re-escapes them otherwise: %2f as / or %2F).
		if name, pw, ok := urlcred.Raw(d.URL); ok {
			add(name)
			add(pw)
		}
	}
	return out
}

// lazySecrets computes secretsOf(*dest) on first use and keeps it.
type lazySecrets struct {
	dest *hookrelay.Destination
	list []string
	done bool
}

func (l *lazySecrets) get() []string {
	if !l.done {
		l.list, l.done = secretsOf(*l.dest), true
	}
	return l.list
}

// redact replaces every occurrence of a secret in s, longest first so a
// secret containing another is replaced whole.
func redact(s string, secrets []string) string {
	sorted := slices.Clone(secrets)
	slices.SortFunc(sorted, func(a, b string) int { return len(b) - len(a) })
	for _, sec := range sorted {
		s = strings.ReplaceAll(s, sec, "[REDACTED]")
	}
	return s
}
