package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
	"github.com/hookrelay/hookrelay/adapters/http/recipient"
)

// fault is what the recipient does with one request.
type fault int

const (
	// faultAccept: verify, deduplicate, apply the effect, answer 204 after
	// up to acceptLatency (so that kills also land between a recipient's
	// answer and the worker's ledger write).
	faultAccept fault = iota
	// faultServerError: a gateway in front answers 503; nothing applied.
	faultServerError
	// faultRateLimited: a gateway answers 429 with Retry-After; nothing
	// applied.
	faultRateLimited
	// faultDropAfterApply: the request runs (effect applied, response
	// stored by the idempotency middleware), then the connection is closed
	// without a response.
	faultDropAfterApply
	// faultHang: the recipient stalls past the sender's timeout, then
	// runs the request (the effect lands after the sender gave up).
	faultHang
	numFaults
)

func (f fault) String() string {
	return [...]string{"accept", "503", "429", "drop_after_apply", "hang"}[f]
}

// acceptLatency bounds the random time an accepted request takes.
const acceptLatency = 20 * time.Millisecond

// faultOdds are the odds of each fault, in fault order.
type faultOdds [numFaults]float64

// defaultOdds: 45 % accepted, 15 % 503, 10 % 429, 15 % applied then
// dropped, 15 % hang.
var defaultOdds = faultOdds{0.45, 0.15, 0.10, 0.15, 0.15}

// request is what the recipient saw of one request.
type request struct {
	fault fault
	// status is the status written back; 0 when the connection was dropped.
	status int
	// replayed: the idempotency middleware answered from its store (the
	// effect was not applied again); conflict: it answered 409 because a
	// request with the ID was still running.
	replayed, conflict bool
}

// soakRecipient is the loopback recipient: a fault-injecting front, the
// recipient kit's signature verification and idempotency middleware, and a
// business handler whose effect is counting.
type soakRecipient struct {
	url     string
	srv     *http.Server
	done    chan struct{}
	hangFor time.Duration

	mu         sync.Mutex
	odds       faultOdds
	rng        *rand.Rand
	requests   map[string][]request // by webhook-id
	applied    map[string]int       // business effects, by webhook-id
	violations []string
}

type payloadBody struct {
	Event       string `json:"event"`
	Destination string `json:"destination"`
}

func startRecipient(secret string, hangFor time.Duration, seed uint64, odds faultOdds) (*soakRecipient, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &soakRecipient{
		url: "http://" + ln.Addr().String(), done: make(chan struct{}), hangFor: hangFor, odds: odds,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		requests: map[string][]request{}, applied: map[string]int{},
	}
	verifier, err := recipient.NewVerifier(recipient.VerifierConfig{Secrets: []string{secret}})
	if err != nil {
		return nil, err
	}
	idem, err := recipient.NewIdempotency(recipient.IdempotencyConfig{
		Store: recipient.NewMemoryStore(), RetryAfter: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	business := verifier.Middleware(idem.Middleware(http.HandlerFunc(r.apply)))
	r.srv = &http.Server{Handler: r.front(business), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln) // ErrServerClosed on close
	}()
	return r, nil
}

func (r *soakRecipient) close() {
	_ = r.srv.Close()
	<-r.done
}

func (r *soakRecipient) violation(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, msg)
}

// pickFault draws a fault and, for faultAccept, its latency.
func (r *soakRecipient) pickFault() (fault, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.rng.Float64()
	for f, w := range r.odds {
		if x < w {
			return fault(f), time.Duration(r.rng.Int64N(int64(acceptLatency)))
		}
		x -= w
	}
	return faultAccept, 0
}

// front applies the fault, checks the ID headers and records the request.
func (r *soakRecipient) front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id := req.Header.Get(hookhttp.HeaderWebhookID)
		if key := req.Header.Get(hookhttp.HeaderIdempotencyKey); key != id {
			r.violation("request with webhook-id " + strconv.Quote(id) + " carried Idempotency-Key " + strconv.Quote(key))
		}
		f, latency := r.pickFault()
		seen := request{fault: f}
		defer func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.requests[id] = append(r.requests[id], seen)
		}()
		switch f {
		case faultServerError:
			seen.status = http.StatusServiceUnavailable
			http.Error(w, "gateway: upstream unavailable", seen.status)
			return
		case faultRateLimited:
			seen.status = http.StatusTooManyRequests
			w.Header().Set("Retry-After", "1")
			http.Error(w, "gateway: slow down", seen.status)
			return
		case faultDropAfterApply:
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, req)
			seen.replayed = rec.Header().Get(recipient.HeaderReplayed) == "true"
			seen.conflict = rec.Code == http.StatusConflict
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		case faultHang:
			time.Sleep(r.hangFor)
		case faultAccept:
			time.Sleep(latency)
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, req)
		seen.status = rec.Code
		seen.replayed = rec.Header().Get(recipient.HeaderReplayed) == "true"
		seen.conflict = rec.Code == http.StatusConflict
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// apply is the business handler: it runs at most once per webhook-id
// (behind the idempotency middleware) and applies the effect.
func (r *soakRecipient) apply(w http.ResponseWriter, req *http.Request) {
	id := req.Header.Get(hookhttp.HeaderWebhookID)
	var p payloadBody
	if err := json.NewDecoder(req.Body).Decode(&p); err != nil {
		http.Error(w, "bad payload", http.StatusBadRequest)
		r.violation("undecodable payload for " + id)
		return
	}
	if want := hookrelay.DeliveryID(p.Event, p.Destination); want != id {
		r.violation("request for event " + p.Event + " to " + p.Destination + " carried webhook-id " + id + ", not " + want)
	}
	r.mu.Lock()
	r.applied[id]++
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// setOdds changes the odds of the faults from the next request on.
func (r *soakRecipient) setOdds(o faultOdds) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.odds = o
}

// snapshot returns copies of what the recipient saw.
func (r *soakRecipient) snapshot() (map[string][]request, map[string]int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs := make(map[string][]request, len(r.requests))
	for k, v := range r.requests {
		reqs[k] = append([]request(nil), v...)
	}
	applied := make(map[string]int, len(r.applied))
	for k, v := range r.applied {
		applied[k] = v
	}
	return reqs, applied, append([]string(nil), r.violations...)
}
