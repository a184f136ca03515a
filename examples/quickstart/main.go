// Command quickstart runs hookrelay end to end in a few seconds: it starts a
// local recipient that fails the first attempts and then accepts, and a
// second one that rejects permanently, enqueues one payment webhook for each
// and prints the timeline — the same delivery ID on every attempt, the retry
// delays, and the dead-lettered delivery with its reason.
//
// Everything runs on the embedded default: a SQLite file
// (hookrelay-quickstart.db, started afresh on each run; -db names another).
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
	"github.com/hookrelay/hookrelay/adapters/http/recipient"
	hooksql "github.com/hookrelay/hookrelay/adapters/sql"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func main() {
	db := flag.String("db", "hookrelay-quickstart.db", "SQLite file to use (removed first, so each run starts afresh)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *db); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, dbPath string) error {
	// The worker's observer prints from its own goroutines; every write
	// goes through one lock.
	out = &syncWriter{w: out}
	// The accounting recipient verifies signatures, deduplicates by
	// webhook-id, and is down for its first two requests.
	var calls atomic.Int32
	var applied atomic.Int32
	verifier, err := recipient.NewVerifier(recipient.VerifierConfig{Secrets: []string{secret}})
	if err != nil {
		return err
	}
	idem, err := recipient.NewIdempotency(recipient.IdempotencyConfig{Store: recipient.NewMemoryStore()})
	if err != nil {
		return err
	}
	accounting := httptest.NewServer(verifier.Middleware(idem.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			http.Error(w, "ledger service restarting", http.StatusServiceUnavailable)
			return
		}
		applied.Add(1) // the business effect: record the payment once
		w.WriteHeader(http.StatusNoContent)
	}))))
	defer accounting.Close()
	// The CRM recipient rejects the payload: no retry will fix that.
	crm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"unknown field amountCents"}`, http.StatusUnprocessableEntity)
	}))
	defer crm.Close()

	// The embedded default: one SQLite file is the ledger, the queue and
	// the destinations table. A demo starts from an empty file.
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(dbPath + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	store, err := hooksql.OpenSQLite(ctx, dbPath, hooksql.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	for _, d := range []hookrelay.Destination{
		{ID: "accounting", TenantID: "prop_mgmt_co", URL: accounting.URL, Secrets: []string{secret}},
		{ID: "crm", TenantID: "prop_mgmt_co", URL: crm.URL, Secrets: []string{secret}},
	} {
		if err := store.Put(ctx, d); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "ledger and queue: SQLite file %s\n", dbPath)
	sender, err := hookhttp.New(hookhttp.Config{
		Timeout: 2 * time.Second,
		// The SSRF guard refuses loopback by default; these recipients
		// are local on purpose.
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
	})
	if err != nil {
		return err
	}
	defer sender.CloseIdleConnections()

	timeline := newTimeline(out)
	client, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: store, Sender: sender,
		// A short policy so the demo finishes in seconds; the default is
		// 7 attempts, 1 s base, 15 min cap.
		Policy:       &hookrelay.Policy{Version: "quickstart", MaxAttempts: 5, BaseDelay: 200 * time.Millisecond, MaxDelay: 2 * time.Second},
		PollInterval: 50 * time.Millisecond,
		Observer:     timeline,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = client.Stop(ctx) }()

	payload := []byte(`{"leaseId":"lease_881","paymentId":"pay_7319","amountCents":125000}`)
	var ids []string
	for _, dest := range []string{"accounting", "crm"} {
		res, err := client.Enqueue(ctx, hookrelay.EnqueueParams{
			EventID: "pay_7319", TenantID: "prop_mgmt_co", DestinationID: dest,
			EventType: "lease.payment_recorded", Payload: payload,
			Scope: map[string]string{"property": "prop_204", "lease": "lease_881"},
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "enqueued lease.payment_recorded for %-10s delivery %s\n", dest, res.ID)
		ids = append(ids, res.ID)
	}

	deadline := time.After(30 * time.Second)
	for !timeline.done(len(ids)) {
		select {
		case <-deadline:
			return fmt.Errorf("deliveries did not finish within 30s")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := client.Stop(ctx); err != nil {
		return err
	}

	fmt.Fprintln(out, "\nfinal state:")
	for _, id := range ids {
		d, err := store.Get(ctx, id)
		if err != nil {
			return err
		}
		attempts, err := store.Attempts(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  %s  %-10s %-9s attempts=%d last_reason=%q\n", d.ID, d.DestinationID, d.State, len(attempts), d.LastReason)
	}
	fmt.Fprintf(out, "accounting saw %d requests and applied the payment %d time(s)\n", calls.Load(), applied.Load())
	return nil
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// timeline prints each transition as it happens.
type timeline struct {
	mu       sync.Mutex
	out      io.Writer
	start    time.Time
	finished int
}

func newTimeline(out io.Writer) *timeline { return &timeline{out: out, start: time.Now()} }

func (t *timeline) Observe(_ context.Context, e hookrelay.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at := fmt.Sprintf("+%5.2fs", time.Since(t.start).Seconds())
	d := e.Delivery
	switch e.Name {
	case hookrelay.EventAttemptFinished:
		fmt.Fprintf(t.out, "%s %s %-10s attempt %d → %s %s\n", at, d.ID, d.DestinationID, d.Attempt, status(e.Result), e.Result.Reason)
	case hookrelay.EventRetryScheduled:
		fmt.Fprintf(t.out, "%s %s %-10s retry as attempt %d in %v (same delivery ID)\n", at, d.ID, d.DestinationID, d.Attempt, e.Delay.Round(time.Millisecond))
	case hookrelay.EventDelivered:
		fmt.Fprintf(t.out, "%s %s %-10s delivered\n", at, d.ID, d.DestinationID)
		t.finished++
	case hookrelay.EventDeadLettered:
		fmt.Fprintf(t.out, "%s %s %-10s dead-lettered: %s (an operator can inspect and redrive it)\n", at, d.ID, d.DestinationID, e.Reason)
		t.finished++
	case hookrelay.EventWorkerError:
		fmt.Fprintf(t.out, "%s worker error: %v\n", at, e.Err)
	}
}

func (t *timeline) done(n int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.finished >= n
}

func status(r *hookrelay.Result) string {
	if r.StatusCode == 0 {
		return string(r.Outcome)
	}
	return fmt.Sprintf("HTTP %d", r.StatusCode)
}
