package console_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/http/console"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// An operator scoped to one tenant cannot stop or resume another tenant's
// redrive by putting its ID in the URL: the Authorize hook is told the
// redrive's selection and tenants, as it is for starting one.
func TestStopAndResumeShowTheHookTheRedrivesTenants(t *testing.T) {
	tenantOf := map[string]string{"alice": "prop_mgmt_co", "bob": "other_co", "carol": "prop_mgmt_co"}
	var asked []console.ActionRequest
	f := newFixture(t, func(_ *hookrelay.Config, c *console.Config) {
		c.Authorize = func(_ *http.Request, req console.ActionRequest) error {
			asked = append(asked, req)
			switch req.Action {
			case console.ActionRedrive, console.ActionStopRedrive, console.ActionResumeRedrive:
				if slices.Contains(req.Filter.DestinationIDs, "accounting") && tenantOf[req.Actor] != "prop_mgmt_co" {
					return errors.New("accounting belongs to another tenant")
				}
				for _, tn := range req.Tenants {
					if tn != tenantOf[req.Actor] {
						return errors.New("the redrive spans another tenant")
					}
				}
			}
			return nil
		}
	})
	payments, _, _ := f.seed()
	tok := f.token("alice", "/redrive?destination=accounting")
	w := f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {tok}, "destination": {"accounting"}, "why": {"r"}, "rate": {"1"}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	loc := w.Header().Get("Location")
	id := strings.TrimPrefix(loc, "/redrives/")
	require.Eventually(t, func() bool { return f.get(payments[0]).State == hookrelay.StatePending }, 10*time.Second, time.Millisecond)

	bob := f.token("bob", "/redrives")
	w = f.do("POST", loc+"/stop", "bob", url.Values{"csrf_token": {bob}})
	assert.Equal(t, http.StatusForbidden, w.Code, "bob stops alice's redrive: %s", w.Body.String())
	a, err := f.client.RedriveStatus(context.Background(), id)
	require.NoError(t, err)
	assert.False(t, a.StopRequested)
	last := lastOf(t, asked, console.ActionStopRedrive)
	assert.Equal(t, []string{"prop_mgmt_co"}, last.Tenants, "the hook is told the redrive's tenants")

	w = f.do("POST", loc+"/stop", "alice", url.Values{"csrf_token": {tok}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	f.clock.Add(time.Second)
	require.Eventually(t, func() bool {
		a, err = f.client.RedriveStatus(context.Background(), id)
		require.NoError(t, err)
		return a.State == hookrelay.RedriveStopped
	}, 10*time.Second, time.Millisecond)

	w = f.do("POST", loc+"/resume", "bob", url.Values{"csrf_token": {bob}})
	assert.Equal(t, http.StatusForbidden, w.Code, "bob resumes alice's redrive: %s", w.Body.String())
	a, err = f.client.RedriveStatus(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, hookrelay.RedriveStopped, a.State)
	assert.Equal(t, hookrelay.StateDead, f.get(payments[2]).State)

	// Another operator of the same tenant resumes it: the audit says who.
	carol := f.token("carol", loc)
	w = f.do("POST", loc+"/resume", "carol", url.Values{"csrf_token": {carol}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	require.Eventually(t, func() bool {
		f.clock.Add(time.Second)
		a, err = f.client.RedriveStatus(context.Background(), id)
		require.NoError(t, err)
		return a.State == hookrelay.RedriveFinished
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, "carol", a.ResumedBy)
	assert.Equal(t, "alice", a.Actor)
	assert.Contains(t, f.do("GET", loc, "carol", nil).Body.String(), `<dd id="redrive-resumed-by">carol</dd>`)

	w = f.do("POST", "/redrives/rdv_nope/stop", "bob", url.Values{"csrf_token": {bob}})
	assert.Equal(t, http.StatusNotFound, w.Code, "an unknown redrive is not found")
}

// A crafted link cannot put words on the page: the notice after a change
// names a destination only when it is one.
func TestNoticeNamesOnlyARealDestination(t *testing.T) {
	f := newFixture(t)
	f.seed()
	w := f.do("GET", "/destinations?"+url.Values{"notice": {"pause"}, "destination": {"Session expired: call 555-0100 to sign in"}}.Encode(), "alice", nil)
	require.Equal(t, http.StatusOK, w.Code)
	assert.NotContains(t, w.Body.String(), "555-0100")
	w = f.do("GET", "/destinations?notice=pause&destination=accounting", "alice", nil)
	assert.Contains(t, w.Body.String(), "Destination accounting paused")
}

// An operator scoped to one tenant cannot read another tenant's dead
// letters, redrive plan, delivery (its payload) or redrive by editing the
// URL: the hook is asked with the selection, delivery or redrive the page
// is about to show, before anything of it is rendered.
func TestPagesOfOneTenantsDataAskTheHookWithTheirTenants(t *testing.T) {
	tenantOf := map[string]string{"alice": "prop_mgmt_co", "bob": "other_co"}
	scoped := func(actor string, tenants []string) error {
		if len(tenants) == 0 {
			return errors.New("every tenant's data")
		}
		for _, tn := range tenants {
			if tn != tenantOf[actor] {
				return errors.New("another tenant's data")
			}
		}
		return nil
	}
	f := newFixture(t, func(_ *hookrelay.Config, c *console.Config) {
		c.Authorize = func(_ *http.Request, req console.ActionRequest) error {
			if req.Action != console.ActionView {
				return scoped(req.Actor, req.Filter.TenantIDs)
			}
			switch req.Page {
			case "dead", "redrive":
				return scoped(req.Actor, req.Filter.TenantIDs)
			case "delivery", "redrive_status":
				return scoped(req.Actor, req.Tenants)
			}
			return nil
		}
	})
	payments, shipment, _ := f.seed()
	for _, c := range []struct {
		target, actor string
		want          int
		secret        string // what must not be on a refused page
	}{
		{"/dead?tenant=prop_mgmt_co", "alice", http.StatusOK, ""},
		{"/dead?tenant=other_co", "alice", http.StatusForbidden, "shp_1"},
		{"/dead", "alice", http.StatusOK, "shp_1"}, // her tenant's only
		{"/redrive?tenant=other_co", "alice", http.StatusForbidden, "shipping"},
		{"/redrive?tenant=prop_mgmt_co", "alice", http.StatusOK, ""},
		{"/deliveries/" + url.PathEscape(payments[0]), "alice", http.StatusOK, ""},
		// A refused record is answered as a missing one (404).
		{"/deliveries/" + url.PathEscape(shipment), "alice", http.StatusNotFound, `"shipment":"shp_1"`},
		{"/deliveries/" + url.PathEscape(payments[0]), "bob", http.StatusNotFound, "pay_7319"},
	} {
		w := f.do("GET", c.target, c.actor, nil)
		assert.Equal(t, c.want, w.Code, "%s as %s: %s", c.target, c.actor, w.Body.String())
		if c.secret != "" {
			assert.NotContains(t, w.Body.String(), c.secret, "%s as %s", c.target, c.actor)
			assert.NotContains(t, w.Body.String(), strings.ReplaceAll(c.secret, `"`, "&#34;"), "%s as %s", c.target, c.actor)
		}
	}

	tok := f.token("alice", "/redrive?tenant=prop_mgmt_co")
	w := f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {tok}, "tenant": {"prop_mgmt_co"}, "why": {"r"}, "rate": {"1"}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	loc := w.Header().Get("Location")
	assert.Equal(t, http.StatusOK, f.do("GET", loc, "alice", nil).Code)
	w = f.do("GET", loc, "bob", nil)
	assert.Equal(t, http.StatusNotFound, w.Code, "bob reads alice's redrive, refused as if it did not exist: %s", w.Body.String())
	assert.NotContains(t, w.Body.String(), "prop_mgmt_co")
	assert.Equal(t, http.StatusNotFound, f.do("GET", "/deliveries/whd_nope", "bob", nil).Code, "an unknown delivery is not found")
}

// The overview, destinations and audit-log pages list every tenant's
// destinations, numbers and redrives. An operator whose hook allows only
// their own tenant sees only their tenant's rows there (no other tenant's
// destination, count or redrive); an unscoped operator still sees all, and
// one whose hook refuses every row (here: refuses the page by name) gets
// the page empty, as when nothing is stored: a refusal would tell them
// that rows exist.
func TestListPagesShowOnlyTheTenantsTheHookAllows(t *testing.T) {
	var asked []console.ActionRequest
	f := newFixture(t, func(_ *hookrelay.Config, c *console.Config) {
		c.Authorize = func(_ *http.Request, req console.ActionRequest) error {
			asked = append(asked, req)
			switch req.Actor {
			case "root":
				return nil
			case "viewer":
				if req.Page == "overview" || req.Page == "redrives" || req.Page == "destinations" {
					return errors.New("not for viewers")
				}
				return nil
			}
			// alice: prop_mgmt_co only, whatever the request names.
			for _, tn := range append(slices.Clone(req.Filter.TenantIDs), req.Tenants...) {
				if tn != "prop_mgmt_co" {
					return errors.New("another tenant's data")
				}
			}
			return nil
		}
	})
	f.seed()
	for _, tn := range []string{"other_co", "prop_mgmt_co"} {
		f.redriveAll(tn)
	}
	f.step() // shipping and accounting fail again: dead once more

	for _, page := range []string{"/", "/destinations", "/redrives"} {
		w := f.do("GET", page, "alice", nil)
		require.Equal(t, http.StatusOK, w.Code, "%s as alice: %s", page, w.Body.String())
		body := w.Body.String()
		for _, other := range []string{"shipping", "other_co"} {
			assert.NotContains(t, body, other, "%s as alice shows another tenant's data", page)
		}
		mine := map[string]string{"/": `id="dest-accounting"`, "/destinations": `id="dest-accounting"`, "/redrives": "redrive of prop_mgmt_co"}[page]
		assert.Contains(t, body, mine, "%s as alice shows her own tenant's rows", page)

		w = f.do("GET", page, "root", nil)
		require.Equal(t, http.StatusOK, w.Code, "%s as root: %s", page, w.Body.String())
		for _, all := range []string{"other_co", "prop_mgmt_co"} {
			assert.Contains(t, w.Body.String(), all, "%s as root shows every tenant", page)
		}
		last := asked[len(asked)-1]
		assert.Equal(t, []string{"other_co", "prop_mgmt_co"}, last.Tenants, "%s: the hook is told the tenants the page shows", page)

		w = f.do("GET", page, "viewer", nil)
		assert.Equal(t, http.StatusOK, w.Code, "%s as viewer", page)
		for _, tn := range []string{"other_co", "prop_mgmt_co"} {
			assert.NotContains(t, w.Body.String(), tn, "%s as viewer shows a row", page)
		}
	}
}

// A tenant-scoped operator cannot pause, resume or re-enable another
// tenant's destination by naming it in the URL: the hook is told the
// destination's tenant. Nor does the destinations page's notice name
// another tenant's destination.
func TestDestinationActionsShowTheHookTheDestinationsTenant(t *testing.T) {
	var asked []console.ActionRequest
	f := newFixture(t, func(_ *hookrelay.Config, c *console.Config) {
		c.Authorize = onlyTenant("prop_mgmt_co", &asked)
	})
	f.seed()
	ctx := context.Background()
	tok := f.token("alice", "/destinations")
	for _, op := range []string{"pause", "enable"} {
		// She may not see shipping either: answered as a missing ID.
		w := f.do("POST", "/destinations/shipping/"+op, "alice", url.Values{"csrf_token": {tok}})
		assert.Equal(t, http.StatusNotFound, w.Code, "alice %ss shipping: %s", op, w.Body.String())
	}
	st, err := f.client.DestinationStatus(ctx, "shipping")
	require.NoError(t, err)
	assert.False(t, st.Paused, "alice paused another tenant's destination")
	last := lastOf(t, asked, console.ActionEnableDestination)
	assert.Equal(t, []string{"other_co"}, last.Tenants, "the hook is told the destination's tenant")

	w := f.do("POST", "/destinations/accounting/pause", "alice", url.Values{"csrf_token": {tok}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	st, err = f.client.DestinationStatus(ctx, "accounting")
	require.NoError(t, err)
	assert.True(t, st.Paused)
	assert.Equal(t, http.StatusNotFound, f.do("POST", "/destinations/nope/pause", "alice", url.Values{"csrf_token": {tok}}).Code)

	require.NoError(t, f.client.PauseDestination(ctx, "shipping"))
	w = f.do("GET", "/destinations?notice=pause&destination=shipping", "alice", nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.NotContains(t, w.Body.String(), "shipping", "the notice names another tenant's destination")
	assert.Contains(t, f.do("GET", "/destinations?notice=pause&destination=accounting", "alice", nil).Body.String(), "Destination accounting paused")
}

// syncBuffer is a log sink safe for the handler's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A tenant-scoped operator cannot clear another tenant's destination's
// guard by naming it in the URL: the hook is told the destination's
// tenant, and the hold and open circuit stay. Their own destination's is
// cleared, from the button its held row shows, and the change is logged
// with its actor.
func TestClearGuardShowsTheHookTheDestinationsTenant(t *testing.T) {
	var asked []console.ActionRequest
	var log syncBuffer
	f := newFixture(t, func(hc *hookrelay.Config, c *console.Config) {
		c.Authorize = onlyTenant("prop_mgmt_co", &asked)
		c.Stats = hookrelay.StatsWithGuard(c.Stats, hc.Destinations.(hookrelay.DestinationGuard))
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	f.seed()
	ctx := context.Background()
	held := func(g hookrelay.GuardState) hookrelay.GuardState {
		g.HeldUntil, g.ConsecutiveFailures = base.Add(time.Hour), 3
		g.Circuit, g.OpenUntil = hookrelay.CircuitOpen, base.Add(time.Minute)
		return g
	}
	for _, id := range []string{"shipping", "accounting"} {
		_, err := f.dests.UpdateGuard(ctx, hookrelay.UpdateGuardParams{DestinationID: id, Update: held})
		require.NoError(t, err)
	}
	guardOf := func(id string) hookrelay.GuardState {
		gs, err := f.dests.GuardStates(ctx, hookrelay.GuardStatesParams{IDs: []string{id}})
		require.NoError(t, err)
		require.Len(t, gs, 1)
		return gs[0]
	}

	tok := f.token("alice", "/destinations")
	w := f.do("POST", "/destinations/shipping/clear-guard", "alice", url.Values{"csrf_token": {tok}})
	assert.Equal(t, http.StatusNotFound, w.Code, "alice clears shipping's guard (a destination she may not see): %s", w.Body.String())
	last := lastOf(t, asked, console.ActionClearDestinationGuard)
	assert.Equal(t, "shipping", last.DestinationID)
	assert.Equal(t, []string{"other_co"}, last.Tenants, "the hook is told the destination's tenant")
	g := guardOf("shipping")
	assert.True(t, g.HeldUntil.Equal(base.Add(time.Hour)), "another tenant's hold stays: %+v", g)
	assert.True(t, g.IsOpen(), "another tenant's circuit stays open")
	assert.Equal(t, 3, g.ConsecutiveFailures)

	page := f.do("GET", "/destinations", "alice", nil)
	require.Equal(t, http.StatusOK, page.Code, page.Body.String())
	assert.Contains(t, page.Body.String(), `id="clear-guard-accounting"`, "a held destination shows the button")
	assert.NotContains(t, page.Body.String(), `id="clear-guard-orders"`, "a destination its guard holds nothing of shows none")

	w = f.do("POST", "/destinations/accounting/clear-guard", "alice", url.Values{"csrf_token": {tok}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	g = guardOf("accounting")
	assert.Zero(t, g.HeldUntil)
	assert.False(t, g.IsOpen())
	assert.Zero(t, g.ConsecutiveFailures)
	assert.Contains(t, f.do("GET", w.Header().Get("Location"), "alice", nil).Body.String(), "Destination accounting guard cleared")
	assert.Contains(t, log.String(), "destination_id=accounting operation=clear-guard actor=alice", "the change is logged with its actor")
	assert.NotContains(t, log.String(), "destination_id=shipping operation=clear-guard", "a refused clear changed nothing")
	assert.Equal(t, http.StatusNotFound, f.do("POST", "/destinations/nope/clear-guard", "alice", url.Values{"csrf_token": {tok}}).Code)
}

// A selection that names no tenant is told to the hook with the tenants
// it spans: an operator whose hook allows only their tenant cannot plan or
// redrive another tenant's dead letters by selecting its destination. The
// plan shows her nothing of them: the empty plan of a selection matching
// nothing she may see.
func TestRedriveOfABlankTenantSelectionShowsTheHookItsTenants(t *testing.T) {
	var asked []console.ActionRequest
	f := newFixture(t, func(_ *hookrelay.Config, c *console.Config) {
		c.Authorize = onlyTenant("prop_mgmt_co", &asked)
	})
	payments, shipment, _ := f.seed()
	asked = nil
	w := f.do("GET", "/redrive?destination=shipping", "alice", nil)
	assert.Equal(t, http.StatusOK, w.Code, "alice plans shipping's redrive: %s", w.Body.String())
	assert.Contains(t, w.Body.String(), `<span id="plan-total">0</span>`)
	assert.NotContains(t, w.Body.String(), "other_co")
	require.NotEmpty(t, asked)
	assert.Equal(t, []string{"other_co"}, asked[0].Tenants, "the hook is told the tenants the selection spans")
	assert.Equal(t, []string{"other_co"}, asked[0].Filter.TenantIDs, "and the selection narrowed to them")

	// Redriving it, the hook is asked about the tenants the selection
	// spans at the start, each refused one is left out, and what is left
	// (nothing) is a redrive of a selection matching nothing.
	tok := f.token("alice", "/redrive?destination=accounting")
	asked = nil
	w = f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {tok}, "destination": {"shipping"}, "why": {"r"}, "rate": {"1"}})
	require.Equal(t, http.StatusSeeOther, w.Code, "alice redrives shipping: %s", w.Body.String())
	require.NotEmpty(t, asked)
	assert.Equal(t, console.ActionRedrive, asked[0].Action)
	assert.Equal(t, []string{"other_co"}, asked[0].Tenants, "the hook is told the tenants the selection spans")
	last := asked[len(asked)-1]
	assert.Equal(t, console.ActionRedrive, last.Action)
	assert.Empty(t, last.Tenants, "the redrive is authorized for the tenants allowed: none")
	a, err := f.client.RedriveStatus(context.Background(), strings.TrimPrefix(w.Header().Get("Location"), "/redrives/"))
	require.NoError(t, err)
	assert.Empty(t, a.Tenants)
	assert.Zero(t, a.Matched)
	assert.Equal(t, hookrelay.StateDead, f.get(shipment).State, "another tenant's dead letter was redriven")

	w = f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {tok}, "destination": {"accounting"}, "why": {"r"}, "rate": {"1"}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	require.Eventually(t, func() bool {
		f.clock.Add(time.Second)
		return f.get(payments[2]).State == hookrelay.StatePending
	}, 10*time.Second, time.Millisecond)
}

// The dead-letter list of a selection that names no tenant tells the hook
// the tenants the selection spans and lists only those it allows: another
// tenant's dead letters are not shown, and the page is the empty list, as
// when nothing matches, not a refusal.
func TestDeadLettersOfABlankTenantSelectionShowTheHookTheirTenants(t *testing.T) {
	f := newFixture(t, func(_ *hookrelay.Config, c *console.Config) {
		c.Authorize = onlyTenant("prop_mgmt_co", nil)
	})
	f.seed()
	w := f.do("GET", "/dead?destination=shipping", "alice", nil)
	assert.Equal(t, http.StatusOK, w.Code, "alice lists shipping's dead letters: %s", w.Body.String())
	assert.NotContains(t, w.Body.String(), "shp_1")
	assert.Contains(t, w.Body.String(), `id="none"`)
	w = f.do("GET", "/dead?destination=shipping,accounting", "alice", nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.NotContains(t, w.Body.String(), "shp_1")
	assert.Contains(t, w.Body.String(), "lease.payment_recorded")
	w = f.do("GET", "/dead?destination=accounting", "alice", nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "lease.payment_recorded")
}

// onlyTenant is an Authorize hook for an operator scoped to tenant: it
// refuses a request naming any other tenant in its Filter or Tenants, and
// records each request in asked when asked is not nil.
// lastOf is the last request asked about action.
func lastOf(t *testing.T, asked []console.ActionRequest, action console.Action) console.ActionRequest {
	t.Helper()
	for i := len(asked) - 1; i >= 0; i-- {
		if asked[i].Action == action {
			return asked[i]
		}
	}
	t.Fatalf("the hook was never asked about %s", action)
	return console.ActionRequest{}
}

func onlyTenant(tenant string, asked *[]console.ActionRequest) func(*http.Request, console.ActionRequest) error {
	return func(_ *http.Request, req console.ActionRequest) error {
		if asked != nil {
			*asked = append(*asked, req)
		}
		for _, tn := range append(slices.Clone(req.Filter.TenantIDs), req.Tenants...) {
			if tn != tenant {
				return errors.New("another tenant's data") // shown on the page: names no tenant
			}
		}
		return nil
	}
}

// A page with nothing to show (no destination, dead letter or redrive)
// shows nothing of any tenant: an operator whose hook is tenant-scoped,
// and so refuses a request naming no tenant (every tenant's data), gets
// the empty page, not a refusal. A page whose selection names a tenant the
// operator may not see is still refused, also when nothing matches.
func TestEmptyPagesShowToATenantScopedOperator(t *testing.T) {
	var asked []console.ActionRequest
	f := newFixture(t, func(cc *hookrelay.Config, c *console.Config) {
		cc.Destinations = memory.NewDestinations()
		c.Authorize = func(_ *http.Request, req console.ActionRequest) error {
			asked = append(asked, req)
			tenants := append(slices.Clone(req.Filter.TenantIDs), req.Tenants...)
			if len(tenants) == 0 {
				return errors.New("every tenant's data")
			}
			for _, tn := range tenants {
				if tn != "prop_mgmt_co" {
					return errors.New("another tenant's data")
				}
			}
			return nil
		}
	})
	for _, c := range []struct {
		target string
		want   int
	}{
		{"/", http.StatusOK},
		{"/destinations", http.StatusOK},
		{"/redrives", http.StatusOK},
		{"/dead", http.StatusOK},
		{"/dead?destination=accounting", http.StatusOK},
		{"/dead?tenant=prop_mgmt_co", http.StatusOK},
		{"/dead?tenant=other_co", http.StatusForbidden},
		{"/dead?tenant=prop_mgmt_co,other_co", http.StatusForbidden},
		{"/redrive?tenant=prop_mgmt_co", http.StatusOK},
		{"/redrive?tenant=other_co", http.StatusForbidden},
	} {
		asked = nil
		w := f.do("GET", c.target, "alice", nil)
		assert.Equal(t, c.want, w.Code, "%s as alice: %s", c.target, w.Body.String())
		assert.NotEmpty(t, asked, "%s: the hook was asked", c.target)
		if c.want == http.StatusForbidden {
			assert.NotContains(t, w.Body.String(), "other_co", c.target)
		}
	}
	// A selection naming the tenant is told to the hook as Tenants too,
	// though none of its dead letters is shown.
	asked = nil
	f.do("GET", "/dead?tenant=prop_mgmt_co", "alice", nil)
	require.Len(t, asked, 1)
	assert.Equal(t, []string{"prop_mgmt_co"}, asked[0].Tenants)

	// Once there are rows, an operator allowed none of their tenants gets
	// the lists and the plan of every dead letter empty too, not a refusal
	// that would tell them rows exist.
	f2 := newFixture(t, func(_ *hookrelay.Config, c *console.Config) { c.Authorize = onlyTenant("nobody_co", nil) })
	f2.seed()
	for _, page := range []string{"/", "/destinations", "/dead", "/redrive"} {
		w := f2.do("GET", page, "alice", nil)
		assert.Equal(t, http.StatusOK, w.Code, page)
		assert.NotContains(t, w.Body.String(), "prop_mgmt_co", page)
	}
}
