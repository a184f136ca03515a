package recipient

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

func newIdem(t *testing.T, cfg IdempotencyConfig) *Idempotency {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = NewMemoryStore()
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger
	}
	m, err := NewIdempotency(cfg)
	require.NoError(t, err)
	return m
}

func serveID(h http.Handler, id string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader("{}"))
	if id != "" {
		req.Header.Set(HeaderWebhookID, id)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestIdempotencyRunsTheHandlerOncePerWebhookID(t *testing.T) {
	var runs atomic.Int32
	h := newIdem(t, IdempotencyConfig{}).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		w.Header().Set("X-Ledger-Entry", "entry-1")
		w.WriteHeader(http.StatusCreated)
		w.Header().Set("X-Too-Late", "ignored")
		_, _ = io.WriteString(w, "applied ")
		_, _ = io.WriteString(w, strings.Repeat("!", int(n)))
	}))

	first := serveID(h, "whd_a")
	second := serveID(h, "whd_a")
	other := serveID(h, "whd_b")

	assert.Equal(t, int32(2), runs.Load(), "once for whd_a, once for whd_b")
	assert.Equal(t, http.StatusCreated, first.Code)
	assert.Equal(t, "applied !", first.Body.String())
	assert.Empty(t, first.Header().Get(HeaderReplayed))
	assert.Equal(t, http.StatusCreated, second.Code, "the stored response is replayed")
	assert.Equal(t, "applied !", second.Body.String())
	assert.Equal(t, "entry-1", second.Header().Get("X-Ledger-Entry"))
	assert.Equal(t, "true", second.Header().Get(HeaderReplayed))
	assert.Empty(t, second.Header().Get("X-Too-Late"), "headers set after WriteHeader are not sent, so not stored")
	assert.Equal(t, "applied !!", other.Body.String())
}

func TestIdempotencyAnswersConflictWhileTheFirstRuns(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	h := newIdem(t, IdempotencyConfig{RetryAfter: 1500 * time.Millisecond}).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		close(entered)
		<-release
		w.WriteHeader(http.StatusOK)
	}))

	var wg sync.WaitGroup
	var first *httptest.ResponseRecorder
	wg.Go(func() { first = serveID(h, "whd_a") })
	<-entered
	dup := serveID(h, "whd_a")
	close(release)
	wg.Wait()

	assert.Equal(t, http.StatusConflict, dup.Code)
	assert.Equal(t, "2", dup.Header().Get("Retry-After"), "rounded up to whole seconds")
	assert.Equal(t, http.StatusOK, first.Code)
	assert.Equal(t, int32(1), runs.Load())
	assert.Equal(t, http.StatusOK, serveID(h, "whd_a").Code, "after completion: the stored response")
	assert.Equal(t, int32(1), runs.Load())
}

func TestIdempotencyDoesNotStoreRetryableResponses(t *testing.T) {
	for _, status := range []int{http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests, 500, 503} {
		var runs atomic.Int32
		h := newIdem(t, IdempotencyConfig{}).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if runs.Add(1) == 1 {
				w.WriteHeader(status)
				return
			}
			w.WriteHeader(http.StatusOK)
		}))
		assert.Equal(t, status, serveID(h, "whd_a").Code)
		assert.Equal(t, http.StatusOK, serveID(h, "whd_a").Code, "the retry runs the handler again after %d", status)
		assert.Equal(t, http.StatusOK, serveID(h, "whd_a").Code)
		assert.Equal(t, int32(2), runs.Load(), "status %d", status)
	}
}

func TestIdempotencyStoresFinalRejections(t *testing.T) {
	var runs atomic.Int32
	h := newIdem(t, IdempotencyConfig{}).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		http.Error(w, "unknown lease", http.StatusUnprocessableEntity)
	}))
	assert.Equal(t, http.StatusUnprocessableEntity, serveID(h, "whd_a").Code)
	assert.Equal(t, http.StatusUnprocessableEntity, serveID(h, "whd_a").Code)
	assert.Equal(t, int32(1), runs.Load())
}

func TestIdempotencyAbandonsTheRecordWhenTheHandlerPanics(t *testing.T) {
	var runs atomic.Int32
	h := newIdem(t, IdempotencyConfig{}).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			panic("database went away")
		}
		w.WriteHeader(http.StatusOK)
	}))
	assert.PanicsWithValue(t, "database went away", func() { serveID(h, "whd_a") })
	assert.Equal(t, http.StatusOK, serveID(h, "whd_a").Code, "not stuck in progress")
	assert.Equal(t, int32(2), runs.Load())
}

func TestIdempotencyTakesOverAStaleRun(t *testing.T) {
	mock := clock.NewMock()
	store := NewMemoryStore()
	// A process crashed after Begin: its record stays in progress.
	_, err := store.Begin(context.Background(), BeginParams{Key: "whd_a", Now: mock.Now(), StaleAfter: time.Minute})
	require.NoError(t, err)
	var runs atomic.Int32
	h := newIdem(t, IdempotencyConfig{Store: store, Clock: mock, StaleAfter: time.Minute}).Middleware(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs.Add(1) }))

	mock.Add(59 * time.Second)
	assert.Equal(t, http.StatusConflict, serveID(h, "whd_a").Code)
	mock.Add(time.Second)
	assert.Equal(t, http.StatusOK, serveID(h, "whd_a").Code)
	assert.Equal(t, int32(1), runs.Load())
}

type failingStore struct {
	IdempotencyStore
	beginErr, completeErr error
}

func (s failingStore) Begin(ctx context.Context, p BeginParams) (BeginResult, error) {
	if s.beginErr != nil {
		return BeginResult{}, s.beginErr
	}
	return s.IdempotencyStore.Begin(ctx, p)
}

func (s failingStore) Complete(ctx context.Context, p CompleteParams) error {
	if s.completeErr != nil {
		return s.completeErr
	}
	return s.IdempotencyStore.Complete(ctx, p)
}

func TestIdempotencyStoreFailures(t *testing.T) {
	var runs atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs.Add(1); w.WriteHeader(http.StatusAccepted) })

	down := newIdem(t, IdempotencyConfig{Store: failingStore{NewMemoryStore(), errors.New("connection refused"), nil}}).Middleware(handler)
	rec := serveID(down, "whd_a")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "the sender retries later")
	assert.Equal(t, "5", rec.Header().Get("Retry-After"))
	assert.Zero(t, runs.Load())

	lost := newIdem(t, IdempotencyConfig{Store: failingStore{NewMemoryStore(), nil, errors.New("disk full")}}).Middleware(handler)
	assert.Equal(t, http.StatusAccepted, serveID(lost, "whd_a").Code, "the handler ran: its answer stands")
	assert.Equal(t, int32(1), runs.Load())
}

func TestIdempotencyRequiresAWebhookID(t *testing.T) {
	var runs atomic.Int32
	h := newIdem(t, IdempotencyConfig{}).Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runs.Add(1) }))
	assert.Equal(t, http.StatusBadRequest, serveID(h, "").Code)
	assert.Zero(t, runs.Load())
	_, err := NewIdempotency(IdempotencyConfig{})
	assert.Error(t, err)
}

func TestMemoryStorePurgesCompletedRecords(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewMemoryStore()
	r, err := s.Begin(ctx, BeginParams{Key: "done", Now: t0, StaleAfter: time.Minute})
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, CompleteParams{Key: "done", Token: r.Token, Response: StoredResponse{Status: 200}, Now: t0}))
	_, err = s.Begin(ctx, BeginParams{Key: "running", Now: t0, StaleAfter: time.Minute})
	require.NoError(t, err)

	assert.Equal(t, 0, s.Purge(t0))
	assert.Equal(t, 1, s.Purge(t0.Add(time.Nanosecond)), "only the completed record")
	r, err = s.Begin(ctx, BeginParams{Key: "done", Now: t0, StaleAfter: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, StateStarted, r.State, "purged: a new run")
	r, err = s.Begin(ctx, BeginParams{Key: "running", Now: t0, StaleAfter: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, StateInProgress, r.State)
}

func serveBody(h http.Handler, id, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(body))
	req.Header.Set(HeaderWebhookID, id)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestIdempotencyRefusesAReusedIDWithADifferentBody(t *testing.T) {
	var runs atomic.Int32
	var seen []string
	entered, release := make(chan struct{}), make(chan struct{})
	h := newIdem(t, IdempotencyConfig{}).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, string(b))
		if string(b) == `{"slow":true}` {
			close(entered)
			<-release
		}
		_, _ = io.WriteString(w, "booked "+string(b))
	}))

	first := serveBody(h, "whd_a", `{"amount":1}`)
	reused := serveBody(h, "whd_a", `{"amount":1000}`)
	again := serveBody(h, "whd_a", `{"amount":1}`)

	assert.Equal(t, http.StatusOK, first.Code)
	assert.Equal(t, http.StatusUnprocessableEntity, reused.Code, "a different body is refused distinctly")
	assert.NotContains(t, reused.Body.String(), "booked", "another request's stored response is never replayed")
	assert.Empty(t, reused.Header().Get(HeaderReplayed))
	assert.Equal(t, "true", again.Header().Get(HeaderReplayed), "the same body still replays")
	assert.Equal(t, `booked {"amount":1}`, again.Body.String())
	assert.Equal(t, []string{`{"amount":1}`}, seen, "the handler ran once, with the first body intact")

	// While the first request with an ID still runs.
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveBody(h, "whd_b", `{"slow":true}`)
	}()
	<-entered
	assert.Equal(t, http.StatusUnprocessableEntity, serveBody(h, "whd_b", `{"other":true}`).Code)
	assert.Equal(t, http.StatusConflict, serveBody(h, "whd_b", `{"slow":true}`).Code)
	close(release)
	<-done
	assert.Equal(t, int32(2), runs.Load())
}

func TestIdempotencyTrustsRecordsKeptWithoutAHash(t *testing.T) {
	store := NewMemoryStore()
	// A record completed by an older version, which kept no body hash.
	r, err := store.Begin(context.Background(), BeginParams{Key: "whd_old", Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), StaleAfter: time.Minute})
	require.NoError(t, err)
	require.NoError(t, store.Complete(context.Background(), CompleteParams{Key: "whd_old", Token: r.Token, Response: StoredResponse{Status: 201, Body: []byte("old")}}))
	h := newIdem(t, IdempotencyConfig{Store: store}).Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("the handler must not run again")
	}))
	rec := serveBody(h, "whd_old", `{"any":"body"}`)
	assert.Equal(t, 201, rec.Code)
	assert.Equal(t, "old", rec.Body.String())
}

// TestIdempotencyInformationalStatusIsNotTheResponse: a handler may send
// 1xx informational responses (103 Early Hints) before its final status,
// as a real ResponseWriter allows; the final status is what is answered,
// stored, and decides whether the record is kept.
func TestIdempotencyInformationalStatusIsNotTheResponse(t *testing.T) {
	var runs atomic.Int32
	h := newIdem(t, IdempotencyConfig{}).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		if runs.Add(1) == 1 {
			http.Error(w, "ledger unavailable", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "booked")
	}))
	first := serveID(h, "whd_a")
	assert.Equal(t, http.StatusServiceUnavailable, first.Code)
	second := serveID(h, "whd_a")
	assert.Equal(t, http.StatusCreated, second.Code, "the 503 was not stored: the retry runs the handler again")
	assert.Equal(t, "booked", second.Body.String())
	replay := serveID(h, "whd_a")
	assert.Equal(t, http.StatusCreated, replay.Code)
	assert.Equal(t, "booked", replay.Body.String())
	assert.Equal(t, "true", replay.Header().Get(HeaderReplayed))
	assert.Equal(t, int32(2), runs.Load())
}

// TestIdempotencyRefusesAnOversizedBody: without a verifier in front, the
// middleware still reads at most MaxBodyBytes (or what an outer
// http.MaxBytesReader allows): a larger body gets 413, the handler does not
// run and nothing is stored, so the ID is still free for a proper request.
func TestIdempotencyRefusesAnOversizedBody(t *testing.T) {
	var runs atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	})
	h := newIdem(t, IdempotencyConfig{MaxBodyBytes: 16}).Middleware(handler)

	big := serveBody(h, "whd_a", strings.Repeat("x", 17))
	assert.Equal(t, http.StatusRequestEntityTooLarge, big.Code)
	assert.Equal(t, http.StatusCreated, serveBody(h, "whd_a", `{"amount":1}`).Code, "the refused request left no record")
	assert.Equal(t, int32(1), runs.Load())

	defaulted := newIdem(t, IdempotencyConfig{}).Middleware(handler)
	assert.Equal(t, http.StatusRequestEntityTooLarge, serveBody(defaulted, "whd_b", strings.Repeat("x", 1<<20+1)).Code, "the default limit is 1 MiB")
	assert.Equal(t, http.StatusCreated, serveBody(defaulted, "whd_c", strings.Repeat("x", 1<<20)).Code)

	req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(`{"amount":1}`))
	req.Header.Set(HeaderWebhookID, "whd_d")
	rec := httptest.NewRecorder()
	req.Body = http.MaxBytesReader(rec, req.Body, 4)
	defaulted.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, "an outer http.MaxBytesReader tripped")
	assert.Equal(t, int32(2), runs.Load())

	_, err := NewIdempotency(IdempotencyConfig{Store: NewMemoryStore(), MaxBodyBytes: -1})
	assert.ErrorContains(t, err, "MaxBodyBytes")
}

// A header map without canonical keys (http.Header(event.MultiValueHeaders)
// from a serverless event) passes the Verifier, which finds webhook-id
// under any spelling; the Idempotency middleware behind it must find the
// same ID, not answer 400 (which the sender takes as permanent) to a
// request the Verifier accepted.
func TestIdempotencyFindsTheWebhookIDWhateverItsKeySpelling(t *testing.T) {
	body := []byte(`{"payment_id":"pay_7319"}`)
	signed := signedHeader(t, secretNew, "whd_1", now, body)
	v, mock := verifierAtNow(t)
	var runs atomic.Int32
	h := v.Middleware(newIdem(t, IdempotencyConfig{Clock: mock}).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusAccepted)
	})))
	for i, spell := range []func(string) string{strings.ToLower, strings.ToUpper, strings.ToLower} {
		req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(string(body)))
		req.Header = http.Header{}
		for k, vs := range signed {
			req.Header[spell(k)] = vs
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusAccepted, rec.Code, "request %d: %s", i, rec.Body.String())
		assert.Equal(t, i > 0, rec.Header().Get(HeaderReplayed) == "true", "request %d replayed", i)
	}
	assert.Equal(t, int32(1), runs.Load(), "the handler runs once for the one webhook-id")
}

// keyCheckingStore refuses the keys the SQL store refuses (over 255 bytes,
// not UTF-8, with a NUL), as an error like a database's, and counts Begin.
type keyCheckingStore struct {
	IdempotencyStore
	begins *atomic.Int32
}

func (s keyCheckingStore) Begin(ctx context.Context, p BeginParams) (BeginResult, error) {
	s.begins.Add(1)
	if len(p.Key) > 255 || !utf8.ValidString(p.Key) || strings.IndexByte(p.Key, 0) >= 0 {
		return BeginResult{}, errors.New("hooksql: idempotency key: unusable")
	}
	return s.IdempotencyStore.Begin(ctx, p)
}

// A webhook-id no store can key a record by (over MaxWebhookIDBytes, not
// UTF-8, with a NUL) is refused with 400, before the store: passed on, the
// SQL store refused it and the answer was 503 with Retry-After, so the
// sender retried a request that can never succeed, and the whole ID (as
// long as the server's header limit) went into the error log.
func TestIdempotencyRefusesAnUnusableWebhookID(t *testing.T) {
	var runs, begins atomic.Int32
	h := newIdem(t, IdempotencyConfig{Store: keyCheckingStore{NewMemoryStore(), &begins}}).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusAccepted)
	}))
	for _, id := range []string{strings.Repeat("a", MaxWebhookIDBytes+1), strings.Repeat("x", 1<<20), "whd_\xff", "whd_\x00a"} {
		rec := serveID(h, id)
		assert.Equal(t, http.StatusBadRequest, rec.Code, "%.40q: %s", id, rec.Body.String())
		assert.Empty(t, rec.Header().Get("Retry-After"), "%.40q: not worth retrying", id)
		assert.Less(t, rec.Body.Len(), 200, "%.40q: the answer does not echo the ID", id)
	}
	assert.Zero(t, begins.Load(), "the store is not asked")
	assert.Zero(t, runs.Load())
	longest := strings.Repeat("a", MaxWebhookIDBytes)
	assert.Equal(t, http.StatusAccepted, serveID(h, longest).Code)
	assert.Equal(t, int32(1), runs.Load())
}
