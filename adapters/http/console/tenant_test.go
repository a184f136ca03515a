package console_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/http/console"
)

// An operator scoped to one tenant cannot stop or resume another tenant's
// redrive by putting its ID in the URL: the Authorize hook is told the
// redrive's selection and tenants, as it is for starting one.
func TestStopAndResumeShowTheHookTheRedrivesTenants(t *testing.T) {
	tenantOf := map[string]string{"alice": "prop_mgmt_co", "bob": "other_co"}
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
	last := asked[len(asked)-1]
	assert.Equal(t, console.ActionStopRedrive, last.Action)
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
