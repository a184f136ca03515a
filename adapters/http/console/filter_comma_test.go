package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	console "github.com/hookrelay/hookrelay/adapters/http/console"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

var destinationField = regexp.MustCompile(`type="hidden" name="destination" value="([^"]*)"`)

// A destination whose ID holds a comma is selected exactly when the
// filter field writes it in double quotes (as CSV does), on the dead
// letter list and through the plan's form into the redrive; a comma
// outside quotes still separates values.
func TestFilterValuesWithACommaAreSelectedExactly(t *testing.T) {
	f := newFixture(t, func(cc *hookrelay.Config, _ *console.Config) {
		cc.Destinations = memory.NewDestinations(
			hookrelay.Destination{ID: "a", TenantID: "prop_mgmt_co", URL: "https://planted-host.example/a"},
			hookrelay.Destination{ID: "b", TenantID: "prop_mgmt_co", URL: "https://planted-host.example/b"},
			hookrelay.Destination{ID: "a,b", TenantID: "prop_mgmt_co", URL: "https://planted-host.example/ab"},
		)
		cc.Sender = hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.ClassifyStatus(400, 0) })
	})
	ids := map[string]string{}
	for _, d := range []string{"a", "b", "a,b"} {
		ids[d] = f.enqueue("evt_"+d, "prop_mgmt_co", d, "t", `{}`)
	}
	w := f.do("GET", "/dead?"+url.Values{"destination": {`"a,b"`}}.Encode(), "alice", nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), ids["a,b"])
	assert.NotContains(t, w.Body.String(), ids["a"])
	assert.NotContains(t, w.Body.String(), ids["b"])

	w = f.do("GET", "/dead?"+url.Values{"destination": {"a,b"}}.Encode(), "alice", nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), ids["a"])
	assert.Contains(t, w.Body.String(), ids["b"])
	assert.NotContains(t, w.Body.String(), ids["a,b"])

	w = f.do("GET", "/dead?"+url.Values{"destination": {`"a,b`}}.Encode(), "alice", nil)
	assert.Equal(t, http.StatusBadRequest, w.Code, "an unclosed quote is refused, not read as some other value")

	plan := f.do("GET", "/redrive?"+url.Values{"destination": {`"a,b"`}}.Encode(), "alice", nil)
	require.Equal(t, http.StatusOK, plan.Code, plan.Body.String())
	m := destinationField.FindStringSubmatch(plan.Body.String())
	require.NotNil(t, m, "the plan's form carries the selection")
	tok := f.token("alice", "/redrive")
	w = f.do("POST", "/redrive", "alice", url.Values{"csrf_token": {tok}, "destination": {html.UnescapeString(m[1])}, "why": {"fixed"}, "rate": {"1000"}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	require.Eventually(t, func() bool { return f.get(ids["a,b"]).State == hookrelay.StatePending }, 10*time.Second, time.Millisecond)
	assert.Equal(t, hookrelay.StateDead, f.get(ids["a"]).State)
	assert.Equal(t, hookrelay.StateDead, f.get(ids["b"]).State)
}
