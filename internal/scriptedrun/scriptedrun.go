// Package scriptedrun drives the real core (hookrelay.Client.Process over
// the memory store, a mock clock and a scripted Sender) through fixed
// scenarios, so the observability adapters' tests can assert exact counts,
// latencies and ages. It is for tests only.
package scriptedrun

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// T0 is when each scenario starts, at whole milliseconds.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Run is one scenario's store and clock (set to T0), and its client once
// a scenario ran. Build the observers under test from Store and Clock, then
// run one scenario.
type Run struct {
	Client *hookrelay.Client
	Store  *memory.Store
	Dests  *memory.Destinations
	Clock  *clock.Mock
}

// New returns an empty store and destination set, and a mock clock at T0.
func New() *Run {
	mock := clock.NewMock()
	mock.Set(T0)
	return &Run{Store: memory.NewStore(), Dests: memory.NewDestinations(), Clock: mock}
}

// GuardedStats is the store's stats with the destinations' guard states
// (hookrelay.StatsWithGuard): what an observer's Stats reads for Guards.
func (r *Run) GuardedStats() hookrelay.LedgerStats { return hookrelay.StatsWithGuard(r.Store, r.Dests) }

// half is a jitter source fixed at 0.5: with the scripted policy (1 s base)
// every first retry waits 500 ms.
type half struct{}

func (half) Float64() float64 { return 0.5 }

// policy allows two attempts, so a second failure dead-letters.
var policy = hookrelay.Policy{Version: "scripted", MaxAttempts: 2, BaseDelay: time.Second, MaxDelay: time.Second}

// WrapSender lets a test put instrumentation (a tracing Sender) around the
// scripted Sender; nil leaves it bare.
type WrapSender func(hookrelay.Sender) hookrelay.Sender

type step struct {
	latency time.Duration
	result  hookrelay.Result
}

func (r *Run) start(t *testing.T, obs hookrelay.Observer, wrap WrapSender, dests []hookrelay.Destination, script func(hookrelay.SendParams) step, opts ...func(*hookrelay.Config)) {
	t.Helper()
	for _, d := range dests {
		if err := r.Dests.Put(context.Background(), d); err != nil {
			t.Fatalf("Put %s: %v", d.ID, err)
		}
	}
	mock := r.Clock
	var sender hookrelay.Sender = hookrelay.SenderFunc(func(_ context.Context, p hookrelay.SendParams) hookrelay.Result {
		s := script(p)
		mock.Add(s.latency) // the send takes exactly this long on the client's clock
		return s.result
	})
	if wrap != nil {
		sender = wrap(sender)
	}
	p := policy
	cfg := hookrelay.Config{
		Queue: r.Store, Ledger: r.Store, Destinations: r.Dests,
		Sender: sender, Policy: &p, Clock: mock, Random: half{}, Observer: obs,
	}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := hookrelay.New(cfg)
	if err != nil {
		t.Fatalf("hookrelay.New: %v", err)
	}
	r.Client = c
}

// Enqueue enqueues one event for each destination, in order.
func (r *Run) Enqueue(t *testing.T, eventID string, payload []byte, dests ...string) {
	t.Helper()
	for _, d := range dests {
		_, err := r.Client.Enqueue(context.Background(), hookrelay.EnqueueParams{
			EventID: eventID, TenantID: "tenant-1", DestinationID: d, EventType: "lease.payment_recorded",
			Scope: map[string]string{"property": "prop-7"}, Payload: payload,
		})
		if err != nil {
			t.Fatalf("Enqueue %s → %s: %v", eventID, d, err)
		}
	}
}

// ProcessDue sets the clock to at, claims every due delivery and processes
// them one after another (the clock moves on by each send's latency).
func (r *Run) ProcessDue(t *testing.T, at time.Time, want int) {
	t.Helper()
	r.Clock.Set(at)
	claims, err := r.Store.Claim(context.Background(), hookrelay.ClaimParams{
		Now: at, Limit: 100, LeaseFor: time.Minute, Holder: "scripted",
	})
	if err != nil {
		t.Fatalf("Claim at %v: %v", at, err)
	}
	if len(claims) != want {
		t.Fatalf("Claim at %v: %d deliveries due, want %d", at, len(claims), want)
	}
	for _, c := range claims {
		if err := r.Client.Process(context.Background(), c); err != nil {
			t.Fatalf("Process %s: %v", c.Delivery.ID, err)
		}
	}
}

// Outcomes runs one delivery to each of four destinations, observed by obs:
//
//	acme      200 after 100 ms                               → delivered
//	globex    503 after 200 ms, retry 500 ms later;
//	          204 after 200 ms                               → retried, then delivered
//	initech   401 after 50 ms                                → permanently rejected (auth_rejected)
//	umbrella  500 after 400 ms, twice                        → dead-lettered (attempts_exhausted)
//
// Timeline (T0 plus): claim all at 0; acme 0–100 ms; globex 100–300 ms,
// retry due 800 ms; initech 300–350 ms, dead at 350 ms; umbrella
// 350–750 ms, retry due 1250 ms. At 2 s: globex 2.0–2.2 s delivered;
// umbrella 2.2–2.6 s, dead at 2.6 s. At 2.6 s one more event is enqueued
// for globex and left pending. The clock ends at T0+10s, where Stats says:
//
//	globex    pending 1, eligible 1, oldest eligible age 7.4 s
//	initech   dead 1, oldest dead age 9.65 s
//	umbrella  dead 1, oldest dead age 7.4 s
func (r *Run) Outcomes(t *testing.T, obs hookrelay.Observer, wrap WrapSender) {
	t.Helper()
	var dests []hookrelay.Destination
	for _, id := range []string{"acme", "globex", "initech", "umbrella"} {
		dests = append(dests, hookrelay.Destination{ID: id, URL: "https://" + id + ".example/hooks"})
	}
	r.start(t, obs, wrap, dests, func(p hookrelay.SendParams) step {
		switch p.Destination.ID {
		case "acme":
			return step{100 * time.Millisecond, hookrelay.ClassifyStatus(200, 0)}
		case "globex":
			if p.Delivery.Attempt == 1 {
				return step{200 * time.Millisecond, hookrelay.ClassifyStatus(503, 0)}
			}
			return step{200 * time.Millisecond, hookrelay.ClassifyStatus(204, 0)}
		case "initech":
			return step{50 * time.Millisecond, hookrelay.ClassifyStatus(401, 0)}
		default:
			return step{400 * time.Millisecond, hookrelay.ClassifyStatus(500, 0)}
		}
	})
	r.Enqueue(t, "evt-1", []byte(`{"amountCents":1200}`), "acme", "globex", "initech", "umbrella")
	r.ProcessDue(t, T0, 4)
	r.ProcessDue(t, T0.Add(2*time.Second), 2)
	r.Enqueue(t, "evt-2", []byte(`{"amountCents":900}`), "globex")
	r.Clock.Set(T0.Add(10 * time.Second))
}

// Guards runs the guard's scenario, observed by obs, with a circuit that
// opens after 2 failures in a row and cools down for 1 min:
//
//	acme    429 with Retry-After 30 s after 100 ms (its policy's cap is
//	        1 min)                                  → held until T0+30.1s
//	globex  two deliveries, 500 after 200 ms each   → circuit opened
//
// Timeline (T0 plus): acme 0–100 ms, held; at 1 s globex 1.0–1.2 s and
// 1.2–1.4 s, failing since 1.2 s, circuit open until 61.4 s. The clock
// ends at T0+10s, where the guard states say:
//
//	acme    closed, 1 failure (a 429 is a failed attempt), held 20.1 s
//	        more, failing for 9.9 s
//	globex  open, 2 failures, not held, failing for 8.8 s
//
// GuardsRecover continues it.
func (r *Run) Guards(t *testing.T, obs hookrelay.Observer, wrap WrapSender) {
	t.Helper()
	patient := hookrelay.Policy{Version: "acme", MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: time.Minute}
	dests := []hookrelay.Destination{
		{ID: "acme", URL: "https://acme.example/hooks", Policy: &patient},
		{ID: "globex", URL: "https://globex.example/hooks"},
	}
	r.start(t, obs, wrap, dests, func(p hookrelay.SendParams) step {
		switch {
		case p.Destination.ID == "acme" && p.Delivery.Attempt == 1:
			return step{100 * time.Millisecond, hookrelay.ClassifyStatus(429, 30*time.Second)}
		case p.Destination.ID == "globex" && p.Delivery.Attempt == 1:
			return step{200 * time.Millisecond, hookrelay.ClassifyStatus(500, 0)}
		}
		return step{100 * time.Millisecond, hookrelay.ClassifyStatus(204, 0)}
	}, func(c *hookrelay.Config) { c.CircuitFailureThreshold, c.CircuitCoolDown = 2, time.Minute })
	r.Enqueue(t, "evt-1", []byte(`{"amountCents":1200}`), "acme")
	r.ProcessDue(t, T0, 1)
	r.Enqueue(t, "evt-2", []byte(`{"amountCents":900}`), "globex")
	r.Enqueue(t, "evt-3", []byte(`{"amountCents":700}`), "globex")
	r.ProcessDue(t, T0.Add(time.Second), 2)
	r.Clock.Set(T0.Add(10 * time.Second))
}

// GuardsRecover continues Guards: at T0+70s (after the hold and the
// cool-down) acme's retry and globex's two retries are due and each answer
// 204, the first to globex as the circuit's probe, which closes it. The
// clock ends at T0+80s, every guard state closed with no failures.
func (r *Run) GuardsRecover(t *testing.T) {
	t.Helper()
	r.ProcessDue(t, T0.Add(70*time.Second), 3)
	r.Clock.Set(T0.Add(80 * time.Second))
}

// FailingDisabled runs one delivery to hooli, which answers 500 after
// 200 ms every time, with DisableAfterFailingFor 1 s: it fails at
// T0+0.2s (failing since then), and again at T0+2.2s, which disables it
// (reason destination_failing).
func (r *Run) FailingDisabled(t *testing.T, obs hookrelay.Observer) {
	t.Helper()
	patient := hookrelay.Policy{Version: "hooli", MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: time.Minute}
	r.start(t, obs, nil, []hookrelay.Destination{{ID: "hooli", URL: "https://hooli.example/hooks", Policy: &patient}},
		func(hookrelay.SendParams) step { return step{200 * time.Millisecond, hookrelay.ClassifyStatus(500, 0)} },
		func(c *hookrelay.Config) { c.DisableAfterFailingFor = time.Second })
	r.Enqueue(t, "evt-1", []byte(`{"amountCents":1200}`), "hooli")
	r.ProcessDue(t, T0, 1)
	r.ProcessDue(t, T0.Add(2*time.Second), 1)
}

// Distinctive secrets placed where a careless Sender or port could leak
// them, and the payload marker; none may appear in logs, metrics or spans.
const (
	URLPassword   = "pw-hookrelay-url-5d8e"
	QueryToken    = "qt-hookrelay-query-6c3a" // a ?token= of the destination URL
	AuthToken     = "tok-hookrelay-auth-91b2"
	SigningSecret = "aG9va3JlbGF5LXNpZ25pbmctc2VjcmV0" // the body of a whsec_ key
	PayloadMarker = "payload-hookrelay-card-4242"
)

// Secrets lists every string of the constants above.
var Secrets = []string{URLPassword, QueryToken, AuthToken, SigningSecret, PayloadMarker}

// Leaky runs one delivery to a destination whose URL credential and query
// token, auth header and signing secret are distinctive, with a Sender that breaks its
// contract by putting all three into Result.Detail (an unknown outcome, then
// a permanent auth rejection that dead-letters it), and reports a worker
// error whose text carries the URL credential. It fails the test if the
// leaks did not happen, so a redaction test built on it can fail.
func (r *Run) Leaky(t *testing.T, obs hookrelay.Observer, wrap WrapSender) {
	t.Helper()
	dest := hookrelay.Destination{
		ID:      "leaky",
		URL:     "https://hookuser:" + URLPassword + "@hooks.example.invalid/in?token=" + QueryToken,
		Secrets: []string{"whsec_" + SigningSecret},
		Headers: map[string]string{"Authorization": "Bearer " + AuthToken},
	}
	var details []string
	r.start(t, obs, wrap, []hookrelay.Destination{dest}, func(p hookrelay.SendParams) step {
		d := p.Destination
		var res hookrelay.Result
		if p.Delivery.Attempt == 1 {
			res = hookrelay.Unknown(hookrelay.ReasonTimeout).WithDetail(fmt.Sprintf(
				`Post %q: context deadline exceeded (sent Authorization: %s)`, d.URL, d.Headers["Authorization"]))
		} else {
			res = hookrelay.Permanent(hookrelay.ReasonAuthRejected).WithStatus(401).WithDetail(fmt.Sprintf(
				`{"error":"bad signature","key":"%s","auth":"%s","url":"%s"}`, d.Secrets[0], d.Headers["Authorization"], d.URL))
		}
		details = append(details, res.Detail)
		return step{30 * time.Millisecond, res}
	})
	r.Enqueue(t, "evt-secret", []byte(`{"card":"`+PayloadMarker+`"}`), "leaky")
	r.ProcessDue(t, T0, 1)
	r.ProcessDue(t, T0.Add(2*time.Second), 1)
	obs.Observe(context.Background(), hookrelay.Event{
		Name: hookrelay.EventWorkerError, Time: r.Clock.Now(),
		Err: &hookrelay.OpError{Op: "destinations.get", Err: fmt.Errorf("get %s: connection refused", dest.URL)},
	})
	all := strings.Join(details, "\n")
	for _, s := range []string{URLPassword, QueryToken, AuthToken, SigningSecret} {
		if !strings.Contains(all, s) {
			t.Fatalf("scripted leak missing %q: the redaction test would prove nothing", s)
		}
	}
}
