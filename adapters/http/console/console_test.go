package console_test

import (
	"context"
	"errors"
	"html"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/http/console"
)

func TestOverviewShowsTheLedgerStatsPerDestination(t *testing.T) {
	f := newFixture(t)
	f.seed()
	w := f.do("GET", "/", "alice", nil)
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	stats, err := f.store.Stats(context.Background(), hookrelay.StatsParams{Now: f.clock.Now()})
	require.NoError(t, err)
	require.NotEmpty(t, stats)
	for _, s := range stats {
		row := regexp.MustCompile(`(?s)<tr id="dest-` + s.DestinationID + `">.*?</tr>`).FindString(body)
		require.NotEmpty(t, row, "a row for %s", s.DestinationID)
		cells := regexp.MustCompile(`<td class="n[^"]*">([^<]*)</td>`).FindAllStringSubmatch(row, -1)
		require.Len(t, cells, 5)
		assert.Equal(t, []string{itoa(s.Pending), itoa(s.EligibleNow), itoa(s.Dead)},
			[]string{cells[0][1], cells[1][1], cells[3][1]}, "the page shows what LedgerStats says for %s", s.DestinationID)
	}
	assert.Contains(t, body, `<tr id="dest-accounting">`)
	assert.Regexp(t, `(?s)id="dest-accounting">.*?1h3m0s</td>`, body, "the oldest dead age: dead at 09:00, page at 10:03")
	assert.Regexp(t, `(?s)id="dest-orders">.*?active`, body, "a destination with no backlog is listed, with its status")
	assert.Contains(t, body, `signed in as <b id="actor">alice</b>`)
	assert.Contains(t, body, "attempts, last 15m0s")
	assert.Regexp(t, `(?s)id="dest-accounting">.*?<td class="recent">—</td>`, body, "its attempts are an hour old")

	f.enqueue("ord_9", "prop_mgmt_co", "orders", "order.created", `{}`)
	body = f.do("GET", "/", "alice", nil).Body.String()
	assert.Regexp(t, `(?s)id="dest-orders">.*?<td class="recent"><span class="tag delivered">1 delivered</span>`, body, "the attempt just made")
}

func TestOverviewCountsTheOutcomesOfItsWindow(t *testing.T) {
	f := newFixture(t, func(_ *hookrelay.Config, c *console.Config) { c.RecentWindow = 2 * time.Hour })
	f.seed()
	body := f.do("GET", "/", "alice", nil).Body.String()
	assert.Contains(t, body, "attempts, last 2h0m0s")
	assert.Regexp(t, `(?s)id="dest-accounting">.*?<span class="tag permanent">3 permanent auth_rejected</span>`, body)
	assert.Regexp(t, `(?s)id="dest-shipping">.*?<span class="tag permanent">1 permanent bad_request</span>`, body)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestDeadLettersFilterAndPage(t *testing.T) {
	f := newFixture(t, func(_ *hookrelay.Config, c *console.Config) { c.PageSize = 2 })
	payments, shipment, delivered := f.seed()

	w := f.do("GET", "/dead", "alice", nil)
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	assert.Contains(t, body, payments[0])
	assert.Contains(t, body, payments[1])
	assert.NotContains(t, body, payments[2], "two per page")
	next := regexp.MustCompile(`id="next" href="([^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, next)
	w = f.do("GET", strings.ReplaceAll(next[1], "&amp;", "&"), "alice", nil)
	assert.Contains(t, w.Body.String(), payments[2])
	assert.Contains(t, w.Body.String(), shipment)

	w = f.do("GET", "/dead?tenant=other_co", "alice", nil)
	assert.Contains(t, w.Body.String(), shipment)
	assert.NotContains(t, w.Body.String(), payments[0])
	w = f.do("GET", "/dead?reason=auth_rejected&event_type=lease.payment_recorded&destination=accounting", "alice", nil)
	assert.Contains(t, w.Body.String(), payments[0])
	assert.NotContains(t, w.Body.String(), shipment)
	w = f.do("GET", "/dead?since=61m", "alice", nil) // dead since 09:02: the last payment and the shipment
	assert.NotContains(t, w.Body.String(), payments[1])
	assert.Contains(t, w.Body.String(), payments[2])
	assert.NotContains(t, w.Body.String(), delivered, "a delivered delivery is no dead letter")

	w = f.do("GET", "/dead?since=yesterday-ish", "alice", nil)
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), "since")
}

func TestDeliveryPageShowsHistoryAndCapsThePayload(t *testing.T) {
	f := newFixture(t, func(_ *hookrelay.Config, c *console.Config) { c.PayloadLimit = 16 })
	payments, _, _ := f.seed()
	w := f.do("GET", "/deliveries/"+payments[0], "alice", nil)
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	assert.Contains(t, body, `id="state">dead</span>`)
	assert.Contains(t, body, "auth_rejected")
	assert.Contains(t, body, `<td class="n">401</td>`)
	assert.Contains(t, body, `{&#34;payment_id&#3`, "the first 16 bytes, escaped")
	assert.NotContains(t, body, "amount", "nothing past the cap")
	assert.Contains(t, body, "showing the first 16")
	assert.Contains(t, body, "prop_204")

	w = f.do("GET", "/deliveries/whd_missing", "alice", nil)
	assert.Equal(t, http.StatusNotFound, w.Code)
}

func TestNoSecretIsEverRendered(t *testing.T) {
	f := newFixture(t)
	payments, _, _ := f.seed()
	f.gone = true
	f.enqueue("ord_2", "prop_mgmt_co", "orders", "order.created", `{}`) // disables orders
	require.NoError(t, f.client.PauseDestination(context.Background(), "accounting"))
	token := f.token("alice", "/redrive")
	w := f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {token}, "destination": {"accounting"}, "why": {"secret rotated"}, "rate": {"1000"}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	pages := []string{"/", "/dead", "/destinations", "/redrive", "/redrives", "/deliveries/" + payments[0], w.Header().Get("Location"),
		"/deliveries/whd_missing", "/dead?since=nonsense"}
	for _, p := range pages {
		w := f.do("GET", p, "alice", nil)
		body := w.Body.String()
		require.NotEmpty(t, body, p)
		for _, s := range plantedSecrets {
			assert.NotContains(t, body, s, "page %s shows a planted secret", p)
		}
		assert.NotContains(t, body, "whsec_UExB", "page %s shows part of a signing secret", p)
	}
	// The leaky sender's detail is masked on the delivery page.
	w = f.do("GET", "/deliveries/"+payments[0], "alice", nil)
	assert.Contains(t, w.Body.String(), "[REDACTED]")
}

func TestOutputIsEscaped(t *testing.T) {
	f := newFixture(t)
	const evil = `<script>alert("x")</script>`
	id := f.enqueue("evt_<b>1</b>", "prop_mgmt_co", "accounting", "lease.payment_recorded", evil)
	for _, p := range []string{"/dead", "/dead?event_type=" + url.QueryEscape(evil), "/deliveries/" + id, "/redrive?tenant=" + url.QueryEscape(evil)} {
		w := f.do("GET", p, "alice", nil)
		require.Equal(t, http.StatusOK, w.Code, p)
		assert.NotContains(t, w.Body.String(), "<script>", p)
		assert.NotContains(t, w.Body.String(), "<b>1</b>", p)
	}
	w := f.do("GET", "/deliveries/"+id, "alice", nil)
	assert.Contains(t, w.Body.String(), "&lt;script&gt;")
	w = f.do("GET", "/", `<img src=x>`, nil)
	assert.NotContains(t, w.Body.String(), "<img src=x>", "even the actor's name is escaped")
}

func TestChangesNeedPOSTAndACSRFToken(t *testing.T) {
	f := newFixture(t)
	f.seed()
	tok := f.token("alice", "/destinations")

	w := f.do("GET", "/destinations/accounting/pause", "alice", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code, "a GET changes nothing")

	w = f.do("POST", "/destinations/accounting/pause", "alice", url.Values{})
	assert.Equal(t, http.StatusForbidden, w.Code, "no token")
	assert.Contains(t, w.Body.String(), "CSRF")
	w = f.do("POST", "/destinations/accounting/pause", "mallory", url.Values{"csrf_token": {tok}})
	assert.Equal(t, http.StatusForbidden, w.Code, "another operator's token")
	w = f.do("POST", "/destinations/accounting/pause", "alice", url.Values{"csrf_token": {tok}},
		"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")
	assert.Equal(t, http.StatusForbidden, w.Code, "a cross-origin form post")
	assert.Contains(t, w.Body.String(), "cross-origin")
	st, err := f.client.DestinationStatus(context.Background(), "accounting")
	require.NoError(t, err)
	assert.False(t, st.Paused, "no refused request changed anything")

	w = f.do("POST", "/destinations/accounting/pause", "alice", url.Values{"csrf_token": {tok}}, "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	assert.Equal(t, "/destinations?destination=accounting&notice=pause", w.Header().Get("Location"))
	st, err = f.client.DestinationStatus(context.Background(), "accounting")
	require.NoError(t, err)
	assert.True(t, st.Paused)
}

func TestActorIsRequired(t *testing.T) {
	f := newFixture(t)
	w := f.do("GET", "/", "", nil)
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Contains(t, w.Body.String(), "sign in first")
}

func TestAuthorizationHookRefusesPerAction(t *testing.T) {
	var asked []console.ActionRequest
	f := newFixture(t, func(_ *hookrelay.Config, c *console.Config) {
		c.Authorize = func(_ *http.Request, req console.ActionRequest) error {
			asked = append(asked, req)
			if req.Actor == "viewer" && req.Action != console.ActionView {
				return errors.New("viewers may only look")
			}
			return nil
		}
	})
	f.seed()
	tok := f.token("viewer", "/destinations")
	w := f.do("POST", "/destinations/accounting/pause", "viewer", url.Values{"csrf_token": {tok}})
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Contains(t, w.Body.String(), "viewers may only look")
	w = f.do("POST", "/redrive", "viewer", url.Values{"csrf_token": {tok}, "destination": {"accounting"}, "why": {"x"}, "rate": {"1"}})
	assert.Equal(t, http.StatusForbidden, w.Code)
	st, _ := f.client.DestinationStatus(context.Background(), "accounting")
	assert.False(t, st.Paused)
	audits, err := f.client.RedriveAudits(context.Background(), 10)
	require.NoError(t, err)
	assert.Empty(t, audits, "a refused redrive writes nothing")
	last := asked[len(asked)-1]
	assert.Equal(t, console.ActionRedrive, last.Action)
	assert.Equal(t, []string{"accounting"}, last.Filter.DestinationIDs, "the hook sees the selection")
}

func TestCrossTenantRedriveNeedsTheClientsAuthorizer(t *testing.T) {
	f := newFixture(t)
	payments, shipment, _ := f.seed()
	w := f.do("GET", "/redrive", "alice", nil)
	assert.Contains(t, w.Body.String(), "spans 2 tenants")
	tok := f.token("alice", "/redrive")
	w = f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {tok}, "why": {"all of it"}, "rate": {"100"}})
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Contains(t, w.Body.String(), "other_co, prop_mgmt_co", "the refusal names the tenants")
	assert.Equal(t, hookrelay.StateDead, f.get(payments[0]).State)
	assert.Equal(t, hookrelay.StateDead, f.get(shipment).State)
}

func TestRedriveFromThePlanThenStop(t *testing.T) {
	f := newFixture(t)
	payments, shipment, _ := f.seed()
	w := f.do("GET", "/redrive?destination=accounting", "alice", nil)
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	assert.Contains(t, body, `<span id="plan-total">3</span>`)
	assert.Regexp(t, `<td>prop_mgmt_co</td><td>accounting</td><td>auth_rejected</td><td class="n">3</td>`, body)
	tok := csrfField.FindStringSubmatch(body)[1]

	w = f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {tok}, "destination": {"accounting"}, "why": {""}, "rate": {"1"}})
	assert.Equal(t, http.StatusBadRequest, w.Code, "a reason is required")
	assert.Contains(t, w.Body.String(), "why is required")
	w = f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {tok}, "destination": {"accounting"}, "why": {"r"}, "rate": {"0"}})
	assert.Equal(t, http.StatusBadRequest, w.Code, "a positive rate is required")
	w = f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {tok}, "destination": {"accounting"}, "why": {"r"}, "rate": {"2e6"}})
	assert.Equal(t, http.StatusBadRequest, w.Code, "a rate over MaxRedriveRate is refused")
	assert.Contains(t, w.Body.String(), "rate must be a positive number", "the form field is named, not the library's")

	// At 1/s on the mock clock, the first delivery moves at once and the
	// second waits for a second that has not passed.
	w = f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {tok}, "destination": {"accounting"}, "why": {"secret rotated"}, "rate": {"1"}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	loc := w.Header().Get("Location")
	require.True(t, strings.HasPrefix(loc, "/redrives/rdv_"), loc)
	id := strings.TrimPrefix(loc, "/redrives/")
	require.Eventually(t, func() bool { return f.get(payments[0]).State == hookrelay.StatePending }, 10*time.Second, time.Millisecond)

	w = f.do("GET", loc, "alice", nil)
	body = w.Body.String()
	assert.Contains(t, body, `id="redrive-state">running</span>`)
	assert.Contains(t, body, `<meta http-equiv="refresh" content="2">`, "the progress page reloads itself")
	assert.Contains(t, body, `id="redrive-reason">secret rotated</dd>`)
	assert.Contains(t, body, `id="matched">3</span>`)

	w = f.do("POST", loc+"/stop", "alice", url.Values{"csrf_token": {csrfField.FindStringSubmatch(body)[1]}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	f.clock.Add(time.Second) // the redrive wakes for its next slot and sees the stop
	var a hookrelay.RedriveAudit
	require.Eventually(t, func() bool {
		var err error
		a, err = f.client.RedriveStatus(context.Background(), id)
		require.NoError(t, err)
		return a.State == hookrelay.RedriveStopped
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, "alice", a.StopRequestedBy)
	assert.Equal(t, "alice", a.Actor)
	assert.EqualValues(t, 1, a.Redriven, "stopped after the first delivery")
	assert.Equal(t, hookrelay.StateDead, f.get(payments[2]).State)
	assert.Equal(t, hookrelay.StateDead, f.get(shipment).State, "outside the selection")

	w = f.do("GET", "/redrives", "alice", nil)
	assert.Contains(t, w.Body.String(), id)
	assert.Contains(t, w.Body.String(), `<span class="state stopped">stopped</span>`)
}

func TestCloseStopsRunningRedrivesResumably(t *testing.T) {
	f := newFixture(t)
	payments, _, _ := f.seed()
	tok := f.token("alice", "/redrive?destination=accounting")
	w := f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {tok}, "destination": {"accounting"}, "why": {"r"}, "rate": {"0.5"}})
	require.Equal(t, http.StatusSeeOther, w.Code)
	id := strings.TrimPrefix(w.Header().Get("Location"), "/redrives/")
	require.NoError(t, f.console.Close(context.Background()))
	a, err := f.client.RedriveStatus(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, hookrelay.RedriveStopped, a.State)
	assert.Contains(t, a.Error, "interrupted")
	assert.Equal(t, hookrelay.StateDead, f.get(payments[2]).State)
	w = f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {tok}, "destination": {"accounting"}, "why": {"r"}, "rate": {"1"}})
	assert.Equal(t, http.StatusInternalServerError, w.Code, "a closed console starts no redrive")
}

func TestReEnableADestinationItsRecipientDisabled(t *testing.T) {
	f := newFixture(t)
	f.gone = true
	first := f.enqueue("ord_1", "prop_mgmt_co", "orders", "order.created", `{}`)
	assert.Equal(t, hookrelay.ReasonDestinationGone, f.get(first).LastReason)
	waiting := f.enqueue("ord_2", "prop_mgmt_co", "orders", "order.created", `{}`)
	w := f.do("GET", "/destinations", "alice", nil)
	body := w.Body.String()
	assert.Regexp(t, `(?s)id="dest-orders">.*disabled \(destination_gone\)`, body)
	assert.Contains(t, body, `id="enable-orders"`)
	tok := csrfField.FindStringSubmatch(body)[1]

	f.gone = false
	w = f.do("POST", "/destinations/orders/enable", "alice", url.Values{"csrf_token": {tok}})
	require.Equal(t, http.StatusSeeOther, w.Code)
	w = f.do("GET", w.Header().Get("Location"), "alice", nil)
	assert.Contains(t, w.Body.String(), "Destination orders re-enabled.")
	assert.NotContains(t, w.Body.String(), `id="enable-orders"`)
	f.clock.Add(time.Minute)
	f.step()
	assert.Equal(t, hookrelay.StateDelivered, f.get(waiting).State, "its waiting delivery went out")

	w = f.do("POST", "/destinations/nowhere/enable", "alice", url.Values{"csrf_token": {tok}})
	assert.Equal(t, http.StatusNotFound, w.Code)
	w = f.do("POST", "/destinations/orders/delete", "alice", url.Values{"csrf_token": {tok}})
	assert.Equal(t, http.StatusNotFound, w.Code)
}

func TestSecurityHeadersAndNoScript(t *testing.T) {
	f := newFixture(t)
	f.seed()
	for _, p := range []string{"/", "/dead", "/redrive", "/redrives", "/destinations"} {
		w := f.do("GET", p, "alice", nil)
		assert.Contains(t, w.Header().Get("Content-Security-Policy"), "default-src 'none'", p)
		assert.Equal(t, "DENY", w.Header().Get("X-Frame-Options"), p)
		assert.NotContains(t, w.Body.String(), "<script", p)
	}
	w := f.do("GET", "/static/style.css", "", nil)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Header().Get("Content-Type"), "text/css")
}

func TestNewValidatesItsConfig(t *testing.T) {
	f := newFixture(t)
	actor := func(*http.Request) (string, error) { return "a", nil }
	for field, cfg := range map[string]console.Config{
		"Client": {Stats: f.store, Actor: actor},
		"Stats":  {Client: f.client, Actor: actor},
		"Actor":  {Client: f.client, Stats: f.store},
		"Prefix": {Client: f.client, Stats: f.store, Actor: actor, Prefix: "ops/"},
	} {
		_, err := console.New(cfg)
		require.Error(t, err, field)
		assert.Contains(t, err.Error(), "Config."+field)
	}
}

func TestPrefixIsUsedInLinksAndRedirects(t *testing.T) {
	f := newFixture(t, func(_ *hookrelay.Config, c *console.Config) { c.Prefix = "/ops/hookrelay" })
	f.seed()
	mux := http.NewServeMux()
	mux.Handle("/ops/hookrelay/", http.StripPrefix("/ops/hookrelay", f.console))
	r := httptest.NewRequest("GET", "/ops/hookrelay/dead", nil)
	r.Header.Set("X-Operator", "alice")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code)
	resp := w.Body.String()
	assert.Contains(t, resp, `href="/ops/hookrelay/deliveries/whd_`)
	assert.Contains(t, resp, `href="/ops/hookrelay/static/style.css"`)
}

// A delivered record whose attempts a retention pass compacted shows their
// summary, not "No attempt was made".
func TestDeliveryPageShowsCompactedAttempts(t *testing.T) {
	f := newFixture(t)
	id := f.enqueue("evt_compacted", "prop_mgmt_co", "orders", "order.created", `{}`)
	require.Equal(t, hookrelay.StateDelivered, f.get(id).State)
	res, err := f.store.CleanHistory(context.Background(), hookrelay.CleanHistoryParams{
		Now: f.clock.Now().Add(48 * time.Hour), Limit: 10,
		Policy: hookrelay.RetentionPolicy{Delivered: 30 * 24 * time.Hour, AttemptDetails: 24 * time.Hour},
	})
	require.NoError(t, err)
	require.NotEmpty(t, res.Counts, "the pass compacted the delivery's attempts")
	w := f.do("GET", "/deliveries/"+id, "alice", nil)
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	assert.Contains(t, body, `id="compacted"`)
	assert.Contains(t, body, "1 earlier attempt compacted by retention")
	assert.Contains(t, body, "accepted 204")
	assert.Contains(t, body, "No attempt is kept in full.")
	assert.NotContains(t, body, "No attempt was made.")
}

// The overview shows each destination's guard — an open circuit, its
// failures in a row, a Retry-After hold and how long it has been failing —
// as LedgerStats reports it, and nothing for a healthy destination.
func TestOverviewShowsTheDestinationGuard(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.clock.Now()
	set := func(id string, g func(hookrelay.GuardState) hookrelay.GuardState) {
		_, err := f.dests.UpdateGuard(ctx, hookrelay.UpdateGuardParams{DestinationID: id, Update: g})
		require.NoError(t, err)
	}
	set("accounting", func(g hookrelay.GuardState) hookrelay.GuardState {
		g.Circuit, g.OpenUntil, g.ConsecutiveFailures = hookrelay.CircuitOpen, now.Add(30*time.Second), 5
		g.FailingSince = now.Add(-2 * time.Hour)
		return g
	})
	set("shipping", func(g hookrelay.GuardState) hookrelay.GuardState {
		g.HeldUntil = now.Add(90 * time.Second)
		return g
	})
	// The memory stores are separate values: StatsWithGuard joins them, as
	// the SQL store's own Stats does.
	kcfg := console.Config{
		Client: f.client, Stats: hookrelay.StatsWithGuard(f.store, f.dests),
		Actor: func(*http.Request) (string, error) { return "alice", nil },
	}
	h, err := console.New(kcfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Close(ctx)) })
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	row := func(id string) string {
		return regexp.MustCompile(`(?s)<tr id="dest-` + id + `">.*?</tr>`).FindString(body)
	}
	assert.Contains(t, row("accounting"), `<span class="tag bad">circuit open</span>`)
	assert.Contains(t, row("accounting"), `5 failed in a row`)
	stamp := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }
	assert.Contains(t, row("accounting"), "failing since "+stamp(now.Add(-2*time.Hour)))
	assert.Contains(t, row("shipping"), "held until "+stamp(now.Add(90*time.Second)))
	assert.Contains(t, row("orders"), `<td class="guard">—</td>`, "a healthy destination shows no guard")
}

// A destination ID is free text: one with a slash, a '#', a '?' or a '%'
// gets working Pause and Resume buttons, each changing that destination.
func TestDestinationButtonsWorkForAnyDestinationID(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, id := range []string{"acme/billing", "eu#2", "why?", "50%off", "a b"} {
		require.NoError(t, f.dests.Put(ctx, hookrelay.Destination{ID: id, TenantID: "prop_mgmt_co", URL: "https://planted-host.example/x"}))
	}
	for _, id := range []string{"acme/billing", "eu#2", "why?", "50%off", "a b"} {
		for _, op := range []string{"pause", "resume"} {
			body := f.do("GET", "/destinations", "alice", nil).Body.String()
			form := regexp.MustCompile(`<form class="inline" method="post" action="([^"]+)"><input type="hidden" name="csrf_token" value="([^"]+)"><button id="` +
				regexp.QuoteMeta(template.HTMLEscapeString(op+"-"+id)) + `">`).FindStringSubmatch(body)
			require.NotNil(t, form, "a %s button for %q", op, id)
			action := html.UnescapeString(form[1])
			w := f.do("POST", action, "alice", url.Values{"csrf_token": {form[2]}})
			require.Equal(t, http.StatusSeeOther, w.Code, "%s %q via %s: %s", op, id, action, w.Body.String())
			st, err := f.client.DestinationStatus(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, op == "pause", st.Paused, "%s %q", op, id)
		}
	}
}

// A UTF-8 payload whose cap falls inside a character is shown as text up
// to that character, not as hex; a binary one is still shown as hex.
func TestDeliveryPageCutsAUTF8PayloadOnACharacter(t *testing.T) {
	f := newFixture(t, func(_ *hookrelay.Config, c *console.Config) { c.PayloadLimit = 16 })
	// "é" is 2 bytes, "€" 3: the 16th byte is inside the last character.
	for _, payload := range []string{`{"name":"Renée"}`, `{"price":"12€"}`, `{"n":"ab€€€"}`} {
		id := f.enqueue("evt_"+payload, "prop_mgmt_co", "orders", "order.created", payload)
		body := f.do("GET", "/deliveries/"+id, "alice", nil).Body.String()
		assert.NotContains(t, body, "not UTF-8", "%s is text", payload)
		assert.Contains(t, body, `<pre id="payload">{&#34;`, "%s is shown as text", payload)
	}
	id := f.enqueue("evt_bin", "prop_mgmt_co", "orders", "order.created", "\xff\xfe{\"a\":1}\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9")
	body := f.do("GET", "/deliveries/"+id, "alice", nil).Body.String()
	assert.Contains(t, body, "not UTF-8: shown as hex")
	assert.Contains(t, body, "showing the first 16")
}
