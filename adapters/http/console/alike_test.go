package console_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/http/console"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// The tests in this file hold what a tenant-scoped operator is answered to
// what another tenant stores: the same request by the same operator gets
// the same status and the same page, byte for byte, whether or not
// other_co has data, so no answer tells the operator that it has.

// world says what a fixture stores.
type world int

const (
	// bare stores nothing: no destination, no delivery.
	bare world = iota
	// mine stores prop_mgmt_co's destinations and records (seedTenants
	// without other_co).
	mine
	// busy stores mine plus other_co's: its destination shipping, its dead
	// shipment and a finished redrive of other_co.
	busy
)

// worldEnd is the time every world's clock shows when its pages are read.
var worldEnd = base.Add(24 * time.Hour)

// scene is a world's fixture and what it stores of other_co.
type scene struct {
	*fixture
	payments []string
	// shipment is other_co's dead delivery and theirRedrive its finished
	// redrive (busy only, but the IDs are the same in every world: the
	// delivery ID is derived from the event and destination IDs).
	shipment, theirRedrive string
}

// newWorld builds w with hook as Config.Authorize. Its console draws its
// CSRF key from zeros, so two worlds render one page alike.
func newWorld(t *testing.T, w world, hook func(*http.Request, console.ActionRequest) error) scene {
	t.Helper()
	f := newFixture(t, func(cc *hookrelay.Config, c *console.Config) {
		c.Authorize = hook
		c.Random = bytes.NewReader(make([]byte, 32))
		switch w {
		case bare:
			cc.Destinations = memory.NewDestinations()
		case mine:
			var ds []hookrelay.Destination
			for _, d := range fixtureDestinations() {
				if d.TenantID == "prop_mgmt_co" {
					ds = append(ds, d)
				}
			}
			cc.Destinations = memory.NewDestinations(ds...)
		}
	})
	s := scene{fixture: f, shipment: hookrelay.DeliveryID("shp_1", "shipping"), theirRedrive: "rdv_none"}
	if w != bare {
		s.payments, _, _ = f.seedTenants(w == busy)
	}
	if w == busy {
		s.theirRedrive = f.redriveAll("other_co").ID
		f.step() // shipping fails again: the shipment is dead once more
		require.Equal(t, hookrelay.StateDead, f.get(s.shipment).State)
	}
	f.clock.Set(worldEnd)
	return s
}

// scopedTo is the Authorize hook of an operator of tenant: it refuses a
// request naming another tenant in its Filter or Tenants, and one naming
// none (every tenant's data).
func scopedTo(tenant string) func(*http.Request, console.ActionRequest) error {
	return func(_ *http.Request, req console.ActionRequest) error {
		tenants := append(slices.Clone(req.Filter.TenantIDs), req.Tenants...)
		if len(tenants) == 0 {
			return errors.New("every tenant's data")
		}
		for _, tn := range tenants {
			if tn != tenant {
				return errors.New("another tenant's data")
			}
		}
		return nil
	}
}

// scopedHooks are the two tenant-scoped hooks the tests hold the console
// to: one that refuses a request naming no tenant, one that allows it.
func scopedHooks(tenant string) map[string]func(*http.Request, console.ActionRequest) error {
	return map[string]func(*http.Request, console.ActionRequest) error{
		"strict": scopedTo(tenant), "lenient": onlyTenant(tenant, nil),
	}
}

// alike sends the same request as actor to both worlds and checks that
// both answer it with the same status and the same page; it returns the
// second world's answer.
func alike(t *testing.T, a, b scene, method, target, actor string, form url.Values) *httptest.ResponseRecorder {
	t.Helper()
	wa, wb := a.do(method, target, actor, form), b.do(method, target, actor, form)
	assert.Equal(t, wa.Code, wb.Code, "%s %s as %s: the status tells whether other_co stores something: %s", method, target, actor, wb.Body.String())
	assert.Equal(t, wa.Body.String(), wb.Body.String(), "%s %s as %s: the page tells whether other_co stores something", method, target, actor)
	return wb
}

// The overview, destinations and audit-log pages of a tenant-scoped
// operator answer the same whether or not other tenants have rows: an
// operator none of whose tenants has a row gets the empty page, not a
// refusal, as when nothing is stored at all.
func TestListPagesAnswerAlikeWhateverOtherTenantsStore(t *testing.T) {
	for name, hook := range scopedHooks("new_co") {
		t.Run("an operator of a tenant with no rows/"+name, func(t *testing.T) {
			empty, full := newWorld(t, bare, hook), newWorld(t, busy, hook)
			for _, page := range []string{"/", "/destinations", "/redrives"} {
				w := alike(t, empty, full, "GET", page, "carol", nil)
				assert.Equal(t, http.StatusOK, w.Code, "%s as carol", page)
				for _, other := range []string{"shipping", "other_co", "accounting", "prop_mgmt_co"} {
					assert.NotContains(t, w.Body.String(), other, "%s as carol", page)
				}
			}
		})
	}
	for name, hook := range scopedHooks("prop_mgmt_co") {
		t.Run("an operator of a tenant with rows/"+name, func(t *testing.T) {
			alone, shared := newWorld(t, mine, hook), newWorld(t, busy, hook)
			for _, page := range []string{"/", "/destinations", "/redrives"} {
				w := alike(t, alone, shared, "GET", page, "alice", nil)
				assert.Equal(t, http.StatusOK, w.Code, "%s as alice", page)
				assert.NotContains(t, w.Body.String(), "other_co", "%s as alice", page)
			}
		})
	}
}

// The dead-letter list and the redrive plan of a selection that names no
// tenant show a tenant-scoped operator the dead letters of the tenants
// they are allowed, and nothing else, whether or not other tenants' dead
// letters match too: never a refusal because of those. A selection that
// names tenants is refused when the hook refuses them, whether or not
// anything of theirs is stored.
func TestSelectionPagesAnswerAlikeWhateverOtherTenantsStore(t *testing.T) {
	for name, hook := range scopedHooks("new_co") {
		t.Run("an operator of a tenant with no dead letters/"+name, func(t *testing.T) {
			empty, full := newWorld(t, bare, hook), newWorld(t, busy, hook)
			for _, c := range []struct {
				target string
				want   int
			}{
				{"/dead", http.StatusOK},
				{"/dead?destination=shipping", http.StatusOK},
				{"/dead?tenant=new_co", http.StatusOK},
				{"/dead?tenant=new_co,other_co", http.StatusForbidden},
				{"/redrive", http.StatusOK},
				{"/redrive?destination=shipping", http.StatusOK},
				{"/redrive?tenant=other_co", http.StatusForbidden},
			} {
				w := alike(t, empty, full, "GET", c.target, "carol", nil)
				assert.Equal(t, c.want, w.Code, "%s as carol", c.target)
				for _, other := range []string{"shp_1", "other_co", "prop_mgmt_co"} {
					assert.NotContains(t, w.Body.String(), other, "%s as carol", c.target)
				}
			}
		})
	}
	for name, hook := range scopedHooks("prop_mgmt_co") {
		t.Run("an operator of a tenant with dead letters/"+name, func(t *testing.T) {
			alone, shared := newWorld(t, mine, hook), newWorld(t, busy, hook)
			for _, c := range []struct {
				target string
				want   int
				shows  string
			}{
				{"/dead", http.StatusOK, "lease.payment_recorded"},
				{"/dead?destination=shipping", http.StatusOK, `id="none"`},
				{"/dead?destination=accounting,shipping", http.StatusOK, "lease.payment_recorded"},
				{"/dead?tenant=prop_mgmt_co,other_co", http.StatusForbidden, ""},
				{"/redrive", http.StatusOK, `<span id="plan-total">3</span>`},
				{"/redrive?destination=shipping", http.StatusOK, `<span id="plan-total">0</span>`},
				{"/redrive?tenant=prop_mgmt_co,other_co", http.StatusForbidden, ""},
			} {
				w := alike(t, alone, shared, "GET", c.target, "alice", nil)
				assert.Equal(t, c.want, w.Code, "%s as alice", c.target)
				assert.Contains(t, w.Body.String(), c.shows, "%s as alice", c.target)
				for _, other := range []string{"shp_1", "other_co", "shipment.delivered"} {
					assert.NotContains(t, w.Body.String(), other, "%s as alice", c.target)
				}
			}
		})
	}
}

// A redrive started from the page of a selection naming no tenant moves
// the dead letters of the tenants the hook allows, and is answered the
// same whether or not other tenants' dead letters match too: it is not
// refused because of them, and never moves them.
func TestRedriveStartAnswersAlikeWhateverOtherTenantsStore(t *testing.T) {
	for name, hook := range scopedHooks("prop_mgmt_co") {
		t.Run(name, func(t *testing.T) {
			alone, shared := newWorld(t, mine, hook), newWorld(t, busy, hook)
			tok := alone.token("alice", "/redrive?destination=accounting")
			require.Equal(t, tok, shared.token("alice", "/redrive?destination=accounting"))
			started := func(w *httptest.ResponseRecorder, s scene) hookrelay.RedriveAudit {
				t.Helper()
				id, ok := strings.CutPrefix(w.Header().Get("Location"), "/redrives/")
				require.True(t, ok, w.Header().Get("Location"))
				a, err := s.client.RedriveStatus(context.Background(), id)
				require.NoError(t, err)
				return a
			}

			// Only other_co's dead letters match: as when nothing matches.
			form := url.Values{"csrf_token": {tok}, "destination": {"shipping"}, "why": {"r"}, "rate": {"1000"}}
			wa, wb := alone.do("POST", "/redrive", "alice", form), shared.do("POST", "/redrive", "alice", form)
			require.Equal(t, wa.Code, wb.Code, "the status tells whether other_co has dead letters: %s", wb.Body.String())
			// The strict hook refuses a redrive spanning no tenant (as it
			// refuses every request naming none); the lenient one starts
			// a redrive of nothing.
			want := map[string]int{"strict": http.StatusForbidden, "lenient": http.StatusSeeOther}[name]
			require.Equal(t, want, wa.Code, wa.Body.String())
			if wa.Code == http.StatusSeeOther {
				for _, w := range []struct {
					w *httptest.ResponseRecorder
					s scene
				}{{wa, alone}, {wb, shared}} {
					a := started(w.w, w.s)
					assert.Empty(t, a.Tenants)
					assert.Zero(t, a.Matched)
				}
			} else {
				assert.Equal(t, wa.Body.String(), wb.Body.String())
			}

			// Both tenants' dead letters match: hers are moved, and only hers.
			form.Set("destination", "accounting,shipping")
			wa, wb = alone.do("POST", "/redrive", "alice", form), shared.do("POST", "/redrive", "alice", form)
			require.Equal(t, http.StatusSeeOther, wa.Code, wa.Body.String())
			require.Equal(t, http.StatusSeeOther, wb.Code, "refused for other_co's dead letters: %s", wb.Body.String())
			for _, w := range []struct {
				w *httptest.ResponseRecorder
				s scene
			}{{wa, alone}, {wb, shared}} {
				a := started(w.w, w.s)
				assert.Equal(t, []string{"prop_mgmt_co"}, a.Tenants)
				assert.EqualValues(t, 3, a.Matched)
				require.Eventually(t, func() bool {
					w.s.clock.Add(time.Second)
					a, err := w.s.client.RedriveStatus(context.Background(), a.ID)
					require.NoError(t, err)
					return a.State == hookrelay.RedriveFinished
				}, 10*time.Second, time.Millisecond)
				for _, p := range w.s.payments {
					assert.Equal(t, hookrelay.StatePending, w.s.get(p).State)
				}
			}
			assert.Equal(t, hookrelay.StateDead, shared.get(shared.shipment).State, "other_co's dead letter was moved")
		})
	}
}

// A delivery's or a redrive's page that the hook refuses answers exactly
// as for an ID that does not exist (404, the same page), so an operator
// cannot find out by its ID whether another tenant's record exists.
func TestRecordPagesAnswerAlikeWhateverOtherTenantsStore(t *testing.T) {
	for name, hook := range scopedHooks("prop_mgmt_co") {
		t.Run(name, func(t *testing.T) {
			alone, shared := newWorld(t, mine, hook), newWorld(t, busy, hook)
			for _, target := range []string{
				"/deliveries/" + url.PathEscape(shared.shipment),
				"/redrives/" + url.PathEscape(shared.theirRedrive),
			} {
				w := alike(t, alone, shared, "GET", target, "alice", nil)
				assert.Equal(t, http.StatusNotFound, w.Code, "%s as alice", target)
				assert.NotContains(t, w.Body.String(), "other_co", "%s as alice", target)
			}
			w := shared.do("GET", "/deliveries/"+url.PathEscape(shared.payments[0]), "alice", nil)
			assert.Equal(t, http.StatusOK, w.Code, "her own delivery: %s", w.Body.String())
		})
	}
}

// An action on another tenant's destination or redrive (pause, resume,
// enable, clear-guard; stop, resume) is answered exactly as one on an ID
// that does not exist (404, the same page), so an operator cannot find out
// by posting to IDs whether another tenant's record exists. An operator
// who may see the record but not act on it is told the hook's refusal
// (403): there is nothing to hide from them.
func TestActionsAnswerAlikeWhateverOtherTenantsStore(t *testing.T) {
	for name, hook := range scopedHooks("prop_mgmt_co") {
		t.Run(name, func(t *testing.T) {
			alone, shared := newWorld(t, mine, hook), newWorld(t, busy, hook)
			tok := alone.token("alice", "/destinations")
			require.Equal(t, tok, shared.token("alice", "/destinations"))
			form := url.Values{"csrf_token": {tok}}
			for _, target := range []string{
				"/destinations/shipping/pause", "/destinations/shipping/resume",
				"/destinations/shipping/enable", "/destinations/shipping/clear-guard",
				"/redrives/" + url.PathEscape(shared.theirRedrive) + "/stop",
				"/redrives/" + url.PathEscape(shared.theirRedrive) + "/resume",
			} {
				w := alike(t, alone, shared, "POST", target, "alice", form)
				assert.Equal(t, http.StatusNotFound, w.Code, "%s as alice", target)
				assert.NotContains(t, w.Body.String(), "other_co", "%s as alice", target)
			}
			st, err := shared.client.DestinationStatus(context.Background(), "shipping")
			require.NoError(t, err)
			assert.False(t, st.Paused, "alice paused another tenant's destination")
		})
	}

	viewer := func(_ *http.Request, req console.ActionRequest) error {
		if req.Action != console.ActionView {
			return errors.New("viewers do not change anything")
		}
		return nil
	}
	s := newWorld(t, busy, viewer)
	tok := s.token("vic", "/destinations")
	w := s.do("POST", "/destinations/shipping/pause", "vic", url.Values{"csrf_token": {tok}})
	assert.Equal(t, http.StatusForbidden, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "viewers do not change anything")
	w = s.do("POST", "/destinations/nope/pause", "vic", url.Values{"csrf_token": {tok}})
	assert.Equal(t, http.StatusNotFound, w.Code, w.Body.String())
}
