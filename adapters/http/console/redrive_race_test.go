package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/http/console"
)

// A redrive started from the page moves only the tenants the Authorize
// hook allowed: a dead letter of another tenant that matches the
// selection but is committed after the hook answered stays dead, even
// when the client's Authorizer permits cross-tenant redrives, and the
// audit's Tenants and Matched say what the hook was told.
func TestRedriveStartMovesOnlyTheTenantsTheHookAllowed(t *testing.T) {
	var asked []console.ActionRequest
	var f *fixture
	var late string
	f = newFixture(t, func(cc *hookrelay.Config, c *console.Config) {
		cc.Authorizer = hookrelay.AuthorizerFunc(func(context.Context, hookrelay.RedriveAuthorization) error {
			return nil // cross-tenant redrives are the console's to decide
		})
		scoped := onlyTenant("prop_mgmt_co", &asked)
		c.Authorize = func(r *http.Request, req console.ActionRequest) error {
			if err := scoped(r, req); err != nil {
				return err
			}
			if req.Action == console.ActionRedrive && late == "" {
				// Another tenant's delivery of the selected event type
				// dies right after the hook allowed the redrive.
				late = f.enqueue("shp_late", "other_co", "shipping", "lease.payment_recorded", `{"late":true}`)
				require.Equal(t, hookrelay.StateDead, f.get(late).State)
			}
			return nil
		}
	})
	payments, _, _ := f.seed()
	tok := f.token("alice", "/redrive?event_type=lease.payment_recorded")
	w := f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {tok}, "event_type": {"lease.payment_recorded"}, "why": {"r"}, "rate": {"1000"}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	require.NotEmpty(t, late, "the hook was asked to start the redrive")
	id := strings.TrimPrefix(w.Header().Get("Location"), "/redrives/")
	var a hookrelay.RedriveAudit
	require.Eventually(t, func() bool {
		f.clock.Add(time.Second)
		var err error
		a, err = f.client.RedriveStatus(context.Background(), id)
		require.NoError(t, err)
		return a.State == hookrelay.RedriveFinished
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, hookrelay.StateDead, f.get(late).State, "another tenant's dead letter was moved: the hook never allowed other_co")
	for _, p := range payments {
		assert.Equal(t, hookrelay.StatePending, f.get(p).State)
	}
	assert.Equal(t, []string{"prop_mgmt_co"}, a.Tenants, "the audit names the tenants the hook allowed")
	assert.EqualValues(t, 3, a.Matched, "the count is of what the hook allowed")
	assert.EqualValues(t, 3, a.Redriven)
	last := asked[len(asked)-1]
	assert.Equal(t, console.ActionRedrive, last.Action)
	assert.Equal(t, []string{"prop_mgmt_co"}, last.Tenants)
}
