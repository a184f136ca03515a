// Command recovery rehearses operator recovery end to end on a SQLite file:
// three payment webhooks go to an accounting recipient whose signing secret
// was rotated, are rejected (401, permanent) and dead-lettered; the
// operator inspects them, counts what a redrive would move, corrects the
// destination's secret and redrives at two per second; each payment is then
// booked exactly once, under its original delivery ID.
//
//	go run ./examples/recovery
//	go run ./examples/recovery -db /tmp/recovery.db   # keep the file, then:
//	go run ./cmd/hookrelay --dsn /tmp/recovery.db dead list
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
	"github.com/hookrelay/hookrelay/adapters/http/recipient"
	hooksql "github.com/hookrelay/hookrelay/adapters/sql"
)

const (
	oldSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	newSecret = "whsec_cm90YXRlZC1zZWNyZXQtMDEyMzQ1Njc4OWFi"
)

func main() {
	db := flag.String("db", "", "SQLite file to use (default: a temporary file, removed afterwards)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *db); err != nil {
		fmt.Fprintln(os.Stderr, "recovery:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, path string) error {
	if path == "" {
		dir, err := os.MkdirTemp("", "hookrelay-recovery")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "recovery.db")
	}
	store, err := hooksql.OpenSQLite(ctx, path, hooksql.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		return err
	}

	// The accounting recipient already uses the rotated secret and books
	// each payment once per webhook-id.
	var booked atomic.Int32
	verifier, err := recipient.NewVerifier(recipient.VerifierConfig{Secrets: []string{newSecret}})
	if err != nil {
		return err
	}
	idem, err := recipient.NewIdempotency(recipient.IdempotencyConfig{Store: recipient.NewMemoryStore()})
	if err != nil {
		return err
	}
	accounting := httptest.NewServer(verifier.Middleware(idem.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		booked.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))))
	defer accounting.Close()
	if err := store.Put(ctx, hookrelay.Destination{ID: "accounting", TenantID: "prop_mgmt_co", URL: accounting.URL, Secrets: []string{oldSecret}}); err != nil {
		return err
	}

	sender, err := hookhttp.New(hookhttp.Config{
		Timeout:       2 * time.Second,
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
	})
	if err != nil {
		return err
	}
	defer sender.CloseIdleConnections()
	client, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: store, Sender: sender,
		PollInterval: 50 * time.Millisecond, PausedRecheck: 100 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = client.Stop(ctx) }()

	var ids []string
	for i, amount := range []int{125000, 98000, 143500} {
		res, err := client.Enqueue(ctx, hookrelay.EnqueueParams{
			EventID: fmt.Sprintf("pay_%d", 7319+i), TenantID: "prop_mgmt_co", DestinationID: "accounting",
			EventType: "lease.payment_recorded", Scope: map[string]string{"property": "prop_204"},
			Payload: []byte(fmt.Sprintf(`{"paymentId":"pay_%d","amountCents":%d}`, 7319+i, amount)),
		})
		if err != nil {
			return err
		}
		ids = append(ids, res.ID)
	}
	if err := waitFor(ctx, store, ids, hookrelay.StateDead); err != nil {
		return err
	}

	fmt.Fprintln(out, "1. dead-lettered (the destination still signs with the old secret):")
	sel := hookrelay.DeadLetterFilter{DestinationIDs: []string{"accounting"}}
	page, err := client.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: sel})
	if err != nil {
		return err
	}
	for _, d := range page.Deliveries {
		fmt.Fprintf(out, "   %s  %s  %s\n", d.ID, d.EventID, d.LastReason)
	}
	detail, err := client.Delivery(ctx, ids[0])
	if err != nil {
		return err
	}
	a := detail.Attempts[0]
	fmt.Fprintf(out, "   attempt %d of %s: %s, HTTP %d, %s\n", a.Number, ids[0], a.Kind, a.StatusCode, a.Reason)

	plan, err := client.PlanRedrive(ctx, sel)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "2. dry run:")
	for _, r := range plan.Rows {
		fmt.Fprintf(out, "   tenant %s  destination %s  reason %s: %d\n", r.TenantID, r.DestinationID, r.Reason, r.Count)
	}

	fmt.Fprintln(out, "3. correct the destination's signing secret")
	if err := store.Put(ctx, hookrelay.Destination{ID: "accounting", TenantID: "prop_mgmt_co", URL: accounting.URL, Secrets: []string{newSecret}}); err != nil {
		return err
	}

	fmt.Fprintln(out, "4. redrive at 2 per second:")
	start := time.Now()
	audit, err := client.Redrive(ctx, hookrelay.RedriveParams{
		Filter: sel, Actor: "ops@example", Reason: "accounting rotated its signing secret", RatePerSecond: 2,
		Progress: func(a hookrelay.RedriveAudit) {
			fmt.Fprintf(out, "   +%.1fs %s: %d/%d re-enqueued\n", time.Since(start).Seconds(), a.ID, a.Redriven, a.Matched)
		},
		BatchSize: 1,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "   audit %s: %s by %s, %d matched, %d re-enqueued\n", audit.ID, audit.State, audit.Actor, audit.Matched, audit.Redriven)
	if err := waitFor(ctx, store, ids, hookrelay.StateDelivered); err != nil {
		return err
	}

	fmt.Fprintln(out, "5. delivered, each under its original ID:")
	for _, id := range ids {
		det, err := client.Delivery(ctx, id)
		if err != nil {
			return err
		}
		last := det.Attempts[len(det.Attempts)-1]
		fmt.Fprintf(out, "   %s  %s  attempts=%d (last: #%d HTTP %d)\n", id, det.Delivery.State, len(det.Attempts), last.Number, last.StatusCode)
	}
	fmt.Fprintf(out, "accounting booked %d payment(s)\n", booked.Load())
	if booked.Load() != int32(len(ids)) {
		return fmt.Errorf("accounting booked %d payments, want %d", booked.Load(), len(ids))
	}
	return nil
}

// waitFor polls until every delivery is in state, for at most 30 s.
func waitFor(ctx context.Context, store *hooksql.Store, ids []string, state hookrelay.State) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		done := true
		for _, id := range ids {
			d, err := store.Get(ctx, id)
			if err != nil {
				return err
			}
			done = done && d.State == state
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("deliveries did not reach %s within 30s", state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
