package recipient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/benbjohnson/clock"
)

// State is where an idempotency record stands.
type State int

const (
	// StateStarted: Begin created (or took over) the record; the caller
	// runs the handler and must Complete or Abandon it.
	StateStarted State = iota + 1
	// StateInProgress: another request with the key is running.
	StateInProgress
	// StateCompleted: the key ran before; BeginResult.Response is its
	// stored response.
	StateCompleted
)

// ErrRecordLost is returned by Complete and Abandon when the record is no
// longer held by the caller's token: it was taken over as stale, abandoned
// or completed meanwhile.
var ErrRecordLost = errors.New("recipient: idempotency record no longer held by this request")

// StoredResponse is a handler's response kept for replay.
type StoredResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// IdempotencyStore keeps one record per webhook-id. A SQL implementation is a
// table with a primary key (unique constraint) on the key, a state, a token,
// the start time, the request body's hash and the stored response: Begin is an
// INSERT that does nothing on conflict followed by a SELECT (and an UPDATE …
// WHERE token = old token to take over a stale run); Complete and Abandon are
// an UPDATE and a DELETE guarded by the token. Implementations must be safe for
// concurrent use: of concurrent Begin calls for one key, exactly one may return
// StateStarted.
type IdempotencyStore interface {
	// Begin creates an in-progress record for p.Key holding p.BodyHash and
	// returns StateStarted with a fresh token; or, if a record exists,
	// returns StateCompleted with its response, or StateInProgress, each
	// with the record's BodyHash. An in-progress record started at or
	// before p.Now − p.StaleAfter is presumed abandoned by a crashed
	// process and is taken over (StateStarted, new token, p.BodyHash).
	Begin(ctx context.Context, p BeginParams) (BeginResult, error)
	// Complete stores the response and marks the record completed, if the
	// token still holds it; otherwise it returns ErrRecordLost.
	Complete(ctx context.Context, p CompleteParams) error
	// Abandon deletes the in-progress record if the token still holds it,
	// so that the next request with the key runs the handler; otherwise it
	// returns ErrRecordLost.
	Abandon(ctx context.Context, p AbandonParams) error
}

// BeginParams are the inputs of IdempotencyStore.Begin.
type BeginParams struct {
	Key        string
	Now        time.Time
	StaleAfter time.Duration
	// BodyHash is the SHA-256 of the request body (32 bytes), kept with a
	// record Begin creates or takes over.
	BodyHash []byte
}

// BeginResult is the outcome of IdempotencyStore.Begin.
type BeginResult struct {
	State State
	// Token identifies this run when State is StateStarted.
	Token string
	// Response is the stored response when State is StateCompleted.
	Response StoredResponse
	// BodyHash is the hash kept with an existing record (StateCompleted,
	// StateInProgress): the middleware compares it with the request's.
	// It is empty for a record kept without one (written by an older
	// version), which is then trusted as before.
	BodyHash []byte
}

// CompleteParams are the inputs of IdempotencyStore.Complete.
type CompleteParams struct {
	Key      string
	Token    string
	Response StoredResponse
	Now      time.Time
}

// AbandonParams are the inputs of IdempotencyStore.Abandon.
type AbandonParams struct {
	Key   string
	Token string
}

// MaxWebhookIDBytes is the longest webhook-id the Idempotency middleware
// keys a record by: the SQL store's key limit, and the longest delivery ID
// a hookrelay sender sends.
const MaxWebhookIDBytes = 255

// HeaderReplayed is set on a response replayed from the store.
const HeaderReplayed = "Idempotent-Replayed"

// IdempotencyConfig configures an Idempotency middleware.
type IdempotencyConfig struct {
	// Store is required.
	Store IdempotencyStore
	// Clock defaults to the wall clock.
	Clock clock.Clock
	// RetryAfter is sent (in whole seconds, at least 1) with the 409 for a
	// duplicate that arrives while the first request is still running.
	// Defaults to 5s.
	RetryAfter time.Duration
	// StaleAfter is how long an in-progress record may stand before a new
	// request with the key presumes the first one died and runs the handler
	// again. It must exceed the handler's longest run. Defaults to 5m.
	StaleAfter time.Duration
	// Logger receives store errors that cannot change the response (a
	// failed Complete after the handler ran). Defaults to slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes refuses larger bodies with 413, as the Verifier does,
	// for when no Verifier reads the body first. Defaults to 1 MiB.
	MaxBodyBytes int64
}

// Idempotency deduplicates requests by webhook-id. It is safe for
// concurrent use.
type Idempotency struct {
	cfg IdempotencyConfig
}

// NewIdempotency validates cfg and applies its defaults.
func NewIdempotency(cfg IdempotencyConfig) (*Idempotency, error) {
	if cfg.Store == nil {
		return nil, errors.New("recipient: IdempotencyConfig.Store is required")
	}
	if cfg.RetryAfter < 0 || cfg.StaleAfter < 0 {
		return nil, errors.New("recipient: RetryAfter and StaleAfter must not be negative")
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("recipient: IdempotencyConfig.MaxBodyBytes is %d; it must not be negative (zero means 1 MiB)", cfg.MaxBodyBytes)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = 5 * time.Second
	}
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = defaultMaxBodyBytes
	}
	return &Idempotency{cfg: cfg}, nil
}

// retryable reports whether a status asks the sender to try again; such
// responses are not stored, so the retry runs the handler again.
func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooEarly ||
		status == http.StatusTooManyRequests || status >= 500
}

// Middleware runs next at most once per webhook-id:
//
//   - no webhook-id (looked for, as by the Verifier, under a header key
//     in any spelling), one no store can key a record by (over
//     MaxWebhookIDBytes, not UTF-8, with a NUL byte), or a body that
//     cannot be read: 400; nothing is stored.
//   - a body over MaxBodyBytes, or over an outer http.MaxBytesReader the
//     server put around r.Body: 413 Content Too Large; next does not run
//     and nothing is stored.
//   - first request: next runs with a buffered response writer; a response
//     with a final status is stored and then written. A retryable status
//     (408, 425, 429, 5xx) or a panic abandons the record, so the sender's
//     retry runs next again.
//   - repeat after completion: the stored status, headers and body,
//     with Idempotent-Replayed: true; next does not run.
//   - repeat while the first still runs: 409 Conflict with Retry-After. The
//     hookrelay sender classifies a 409 with Retry-After as retryable
//     (conflict_in_progress) and comes back later with the same ID.
//   - the webhook-id reused with a different body (the SHA-256 of the body
//     differs from the one kept with the record): 422 Unprocessable
//     Content, and next does not run; another request's stored response is
//     never replayed for it. A sender reusing IDs is broken; retrying the
//     same body is not, and replays as above.
//   - store unavailable at the start: 503 with Retry-After.
//
// Put it after signature verification, so a forged request cannot claim
// an ID. The handler's response is buffered: next cannot stream, flush or
// hijack, and its 1xx informational responses are not sent (its final
// status is the one answered and stored).
func (m *Idempotency) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Found as the Verifier finds it, under a key in any spelling.
		key := headerValue(r.Header, HeaderWebhookID)
		if key == "" {
			http.Error(w, "recipient: missing webhook-id header", http.StatusBadRequest)
			return
		}
		if problem := webhookIDProblem(key); problem != "" {
			// No store can key a record by it: refused for good, before
			// the store (which would fail, answered as "retry later").
			http.Error(w, "recipient: webhook-id "+problem, http.StatusBadRequest)
			return
		}
		ctx := r.Context()
		body, ok := readBody(w, r, m.cfg.MaxBodyBytes)
		if !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sum := sha256.Sum256(body)
		begun, err := m.cfg.Store.Begin(ctx, BeginParams{Key: key, Now: m.cfg.Clock.Now(), StaleAfter: m.cfg.StaleAfter, BodyHash: sum[:]})
		if err != nil {
			m.cfg.Logger.ErrorContext(ctx, "recipient: idempotency store begin failed", "webhook_id", key, "error", err)
			m.retryLater(w, http.StatusServiceUnavailable, "recipient: idempotency store unavailable")
			return
		}
		if begun.State != StateStarted && len(begun.BodyHash) > 0 && !bytes.Equal(begun.BodyHash, sum[:]) {
			http.Error(w, "recipient: this webhook-id was already used with a different body", http.StatusUnprocessableEntity)
			return
		}
		switch begun.State {
		case StateStarted:
		case StateCompleted:
			writeStored(w, begun.Response, true)
			return
		case StateInProgress:
			m.retryLater(w, http.StatusConflict, "recipient: a request with this webhook-id is in progress")
			return
		default:
			m.cfg.Logger.ErrorContext(ctx, "recipient: idempotency store returned an invalid state", "webhook_id", key, "state", int(begun.State))
			m.retryLater(w, http.StatusServiceUnavailable, "recipient: idempotency store unavailable")
			return
		}

		rec := &recorder{header: http.Header{}}
		done := false
		defer func() {
			if !done { // next panicked: let the retry run it again
				if err := m.cfg.Store.Abandon(context.WithoutCancel(ctx), AbandonParams{Key: key, Token: begun.Token}); err != nil {
					m.cfg.Logger.ErrorContext(ctx, "recipient: idempotency store abandon failed", "webhook_id", key, "error", err)
				}
			}
		}()
		next.ServeHTTP(rec, r)
		done = true
		resp := rec.response()
		// The handler's effect is done: store even if the client went away.
		storeCtx := context.WithoutCancel(ctx)
		if retryable(resp.Status) {
			err = m.cfg.Store.Abandon(storeCtx, AbandonParams{Key: key, Token: begun.Token})
		} else {
			err = m.cfg.Store.Complete(storeCtx, CompleteParams{Key: key, Token: begun.Token, Response: resp, Now: m.cfg.Clock.Now()})
		}
		if err != nil {
			// The handler ran; its answer is still the truth for this request.
			m.cfg.Logger.ErrorContext(ctx, "recipient: idempotency store write failed", "webhook_id", key, "error", err)
		}
		writeStored(w, resp, false)
	})
}

// webhookIDProblem says why no record can be keyed by id, or "".
func webhookIDProblem(id string) string {
	switch {
	case len(id) > MaxWebhookIDBytes:
		return fmt.Sprintf("is %d bytes, over the %d-byte limit", len(id), MaxWebhookIDBytes)
	case !utf8.ValidString(id):
		return "is not valid UTF-8"
	case strings.IndexByte(id, 0) >= 0:
		return "contains a NUL byte"
	}
	return ""
}

func (m *Idempotency) retryLater(w http.ResponseWriter, status int, msg string) {
	secs := int64((m.cfg.RetryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	http.Error(w, msg, status)
}

func writeStored(w http.ResponseWriter, resp StoredResponse, replayed bool) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = append([]string(nil), v...)
	}
	if replayed {
		h.Set(HeaderReplayed, "true")
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// recorder buffers a handler's response. Like a real ResponseWriter, it
// takes the header as it stood when the final status was written; 1xx
// informational statuses (103 Early Hints) are not final, and as the
// response is buffered they are not sent.
type recorder struct {
	header  http.Header
	status  int
	written http.Header
	body    bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if status >= 100 && status <= 199 && status != http.StatusSwitchingProtocols {
		return
	}
	if r.status == 0 {
		r.status, r.written = status, r.header.Clone()
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

func (r *recorder) response() StoredResponse {
	r.WriteHeader(http.StatusOK)
	return StoredResponse{Status: r.status, Header: r.written, Body: bytes.Clone(r.body.Bytes())}
}
