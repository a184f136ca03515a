package hookhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
	"github.com/hookrelay/hookrelay/adapters/http/recipient"
)

// A sender and a recipient built with the recipient kit: the recipient
// verifies the signature and applies the effect once per webhook-id, so a
// second attempt with the same delivery ID gets the stored response.
func Example() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

	// Recipient side.
	verifier, _ := recipient.NewVerifier(recipient.VerifierConfig{Secrets: []string{secret}})
	idem, _ := recipient.NewIdempotency(recipient.IdempotencyConfig{Store: recipient.NewMemoryStore()})
	effects := 0
	srv := httptest.NewServer(verifier.Middleware(idem.Middleware(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			effects++
			_, _ = io.WriteString(w, "payment booked")
		}))))
	defer srv.Close()

	// Sender side. The SSRF guard refuses loopback unless allowed.
	sender, err := hookhttp.New(hookhttp.Config{
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	if err != nil {
		panic(err)
	}
	defer sender.CloseIdleConnections()

	params := hookrelay.SendParams{
		Delivery: hookrelay.Delivery{
			ID:      hookrelay.DeliveryID("evt_42", "accounting"),
			Payload: []byte(`{"payment_id":"pay_7319"}`),
		},
		Destination: hookrelay.Destination{ID: "accounting", URL: srv.URL, Secrets: []string{secret}},
		Now:         time.Now(), // the client passes its clock's time
	}
	for attempt := 1; attempt <= 2; attempt++ {
		res := sender.Send(context.Background(), params)
		fmt.Printf("attempt %d: %s %d %q\n", attempt, res.Kind, res.StatusCode, res.Detail)
	}
	fmt.Println("effects:", effects)
	// Output:
	// attempt 1: delivered 200 "payment booked"
	// attempt 2: delivered 200 "payment booked"
	// effects: 1
}
