package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/http/console"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Secrets planted in the destinations: no page may ever show them.
var plantedSecrets = []string{
	"whsec_UExBTlRFRC1TSUdOSU5HLVNFQ1JFVA==", // signing secret
	"Bearer planted-auth-header-value",       // Authorization header
	"planted-url-password",                   // URL credentials
	"planted-url-user",
	"planted-host.example",
	"X-Planted-Header",
}

var base = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// fixture is a memory store with dead letters, a client on a mock clock
// and a console whose actor comes from the X-Operator header.
type fixture struct {
	t       *testing.T
	clock   *clock.Mock
	store   *memory.Store
	dests   *memory.Destinations
	client  *hookrelay.Client
	console *console.Handler
	// gone makes the recipient of dest "orders" answer 410.
	gone bool
}

type fixtureOption func(*hookrelay.Config, *console.Config)

func newFixture(t *testing.T, opts ...fixtureOption) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{t: t, clock: clock.NewMock(), store: memory.NewStore()}
	f.clock.Set(base)
	f.dests = memory.NewDestinations(fixtureDestinations()...)
	sender := hookrelay.SenderFunc(func(_ context.Context, p hookrelay.SendParams) hookrelay.Result {
		switch {
		case p.Delivery.DestinationID == "orders" && f.gone:
			return hookrelay.ClassifyStatus(410, 0)
		case p.Delivery.DestinationID == "accounting" && p.Delivery.EventType == "lease.payment_recorded":
			// A leaky sender: its detail quotes the secrets it should not.
			return hookrelay.ClassifyStatus(401, 0).WithDetail("refused: Authorization: " + plantedSecrets[1] + " " + plantedSecrets[0])
		case p.Delivery.DestinationID == "shipping":
			return hookrelay.ClassifyStatus(400, 0)
		}
		return hookrelay.Delivered(204)
	})
	ccfg := hookrelay.Config{Queue: f.store, Ledger: f.store, Destinations: f.dests, Sender: sender, Clock: f.clock, Random: fixedRandom(0.5)}
	kcfg := console.Config{
		Stats: f.store,
		Actor: func(r *http.Request) (string, error) {
			if a := r.Header.Get("X-Operator"); a != "" {
				return a, nil
			}
			return "", errors.New("sign in first")
		},
	}
	for _, o := range opts {
		o(&ccfg, &kcfg)
	}
	var err error
	f.client, err = hookrelay.New(ccfg)
	require.NoError(t, err)
	kcfg.Client = f.client
	f.console, err = console.New(kcfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.console.Close(ctx)) })
	return f
}

// fixtureDestinations are the fixture's destinations: accounting and
// orders of prop_mgmt_co, shipping of other_co.
func fixtureDestinations() []hookrelay.Destination {
	return []hookrelay.Destination{
		{
			ID: "accounting", TenantID: "prop_mgmt_co",
			URL:     "https://planted-url-user:planted-url-password@planted-host.example/hooks",
			Secrets: []string{plantedSecrets[0]},
			Headers: map[string]string{"Authorization": plantedSecrets[1], "X-Planted-Header": "v"},
		},
		{ID: "orders", TenantID: "prop_mgmt_co", URL: "https://planted-host.example/orders", Secrets: []string{plantedSecrets[0]}},
		{ID: "shipping", TenantID: "other_co", URL: "https://planted-host.example/ship"},
	}
}

type fixedRandom float64

func (r fixedRandom) Float64() float64 { return float64(r) }

// enqueue adds a delivery with the given payload and processes it once.
func (f *fixture) enqueue(eventID, tenant, dest, eventType, payload string) string {
	f.t.Helper()
	ctx := context.Background()
	res, err := f.client.Enqueue(ctx, hookrelay.EnqueueParams{
		EventID: eventID, TenantID: tenant, DestinationID: dest, EventType: eventType,
		Payload: []byte(payload), Scope: map[string]string{"property": "prop_204"},
	})
	require.NoError(f.t, err)
	f.step()
	return res.ID
}

// step claims what is due and processes it.
// redriveAll runs a redrive of tenant's dead letters by "root" to its
// end, moving the mock clock its pace runs on, and returns its audit.
func (f *fixture) redriveAll(tenant string) hookrelay.RedriveAudit {
	f.t.Helper()
	type result struct {
		a   hookrelay.RedriveAudit
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := f.client.Redrive(context.Background(), hookrelay.RedriveParams{
			Filter: hookrelay.DeadLetterFilter{TenantIDs: []string{tenant}}, Actor: "root", Reason: "redrive of " + tenant, RatePerSecond: 1000,
		})
		done <- result{a, err}
	}()
	var r result
	require.Eventually(f.t, func() bool {
		f.clock.Add(time.Second) // the redrive's pace runs on the mock clock
		select {
		case r = <-done:
			return true
		default:
			return false
		}
	}, 10*time.Second, time.Millisecond)
	require.NoError(f.t, r.err)
	return r.a
}

func (f *fixture) step() {
	f.t.Helper()
	cs, err := f.store.Claim(context.Background(), hookrelay.ClaimParams{Now: f.clock.Now(), Limit: 100, LeaseFor: time.Minute, Holder: "test"})
	require.NoError(f.t, err)
	for _, c := range cs {
		require.NoError(f.t, f.client.Process(context.Background(), c))
	}
}

func (f *fixture) get(id string) hookrelay.Delivery {
	f.t.Helper()
	d, err := f.store.Get(context.Background(), id)
	require.NoError(f.t, err)
	return d
}

// seed makes the standard dead letters: three payments to accounting
// (auth_rejected, with secrets in their attempt detail), one shipment
// (bad_request, other tenant), one delivered order.
func (f *fixture) seed() (payments []string, shipment, delivered string) {
	return f.seedTenants(true)
}

// seedTenants is seed, leaving other_co's shipment out (shipment "")
// unless other: the same records of prop_mgmt_co at the same times.
func (f *fixture) seedTenants(other bool) (payments []string, shipment, delivered string) {
	for i := range 3 {
		payments = append(payments, f.enqueue(fmt.Sprintf("pay_%d", 7319+i), "prop_mgmt_co", "accounting", "lease.payment_recorded",
			fmt.Sprintf(`{"payment_id":"pay_%d","amount":1250}`, 7319+i)))
		f.clock.Add(time.Minute)
	}
	if other {
		shipment = f.enqueue("shp_1", "other_co", "shipping", "shipment.delivered", `{"shipment":"shp_1"}`)
	}
	delivered = f.enqueue("ord_1", "prop_mgmt_co", "orders", "order.created", `{"order":"ord_1"}`)
	f.clock.Add(time.Hour)
	return payments, shipment, delivered
}

// do sends a request as actor ("" for none) through the console.
func (f *fixture) do(method, target, actor string, form url.Values, hdr ...string) *httptest.ResponseRecorder {
	f.t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(method, target, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if actor != "" {
		r.Header.Set("X-Operator", actor)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	f.console.ServeHTTP(w, r)
	return w
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// token reads the CSRF token from a page the actor loaded.
func (f *fixture) token(actor, page string) string {
	f.t.Helper()
	w := f.do("GET", page, actor, nil)
	require.Equal(f.t, http.StatusOK, w.Code, w.Body.String())
	m := csrfField.FindStringSubmatch(w.Body.String())
	require.NotNil(f.t, m, "the page %s has a form with a CSRF token", page)
	return m[1]
}
