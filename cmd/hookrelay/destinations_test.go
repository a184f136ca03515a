package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

func TestDestinationListShowsWhatAPublishReaches(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db database) {
		require.Equal(t, 0, db.cli(t, "migrate").code)
		db.open(t)
		ctx := context.Background()
		const (
			urlPassword = "url_pw_5ecret"
			pathToken   = "T0KEN_in_path"
			signing     = "whsec_c2lnbmluZy1zZWNyZXQtc2lnbmluZw=="
			authHeader  = "Bearer hdr_5ecret"
		)
		for _, d := range []hookrelay.Destination{
			{ID: "acct", TenantID: "tenant_a", URL: "https://svc:" + urlPassword + "@accounting.example:8443/hooks/" + pathToken + "?key=q_5ecret",
				Secrets: []string{signing}, Headers: map[string]string{"Authorization": authHeader}, EventTypes: []string{"lease.*"}},
			{ID: "crm", TenantID: "tenant_a", URL: "https://crm.example/hooks", EventTypes: []string{"contact.updated"}},
			{ID: "bi", TenantID: "tenant_a", URL: "https://bi.example/in", Paused: true},
			{ID: "old", TenantID: "tenant_a", URL: "https://old.example/in", EventTypes: []string{"*"}, Disabled: true, DisabledReason: "recipient answered 410 Gone"},
			{ID: "other", TenantID: "tenant_b", URL: "https://other.example/in", EventTypes: []string{"lease.payment_recorded"}},
		} {
			require.NoError(t, db.store.Put(ctx, d))
		}
		noSecrets := func(r result) {
			t.Helper()
			for _, s := range []string{urlPassword, pathToken, "q_5ecret", signing, "hdr_5ecret", "/hooks"} {
				assert.NotContains(t, r.stdout+r.stderr, s)
			}
		}

		r := db.cli(t, "destination", "list", "--tenant", "tenant_a", "--event-type", "lease.payment_recorded")
		require.Equal(t, 0, r.code, r)
		noSecrets(r)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 5, r.stdout) // header, acct, bi, old, summary
		assert.Contains(t, lines[0], "PUBLISH lease.payment_recorded")
		assert.Regexp(t, `^acct\s+tenant_a\s+accounting\.example:8443\s+lease\.\*\s+active\s+delivers$`, lines[1])
		assert.Regexp(t, `^bi\s+tenant_a\s+bi\.example\s+\(every type\)\s+paused\s+waits while paused$`, lines[2])
		assert.Regexp(t, `^old\s+.*disabled: recipient answered 410 Gone\s+skipped disabled$`, lines[3])
		assert.Equal(t, "a publish of lease.payment_recorded reaches 2 destination(s)", lines[4])

		var out struct {
			Destinations []destinationView `json:"destinations"`
		}
		r = db.cli(t, "destination", "list", "--json", "--event-type", "lease.payment_recorded")
		require.Equal(t, 0, r.code, r)
		noSecrets(r)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		got := map[string]string{}
		for _, d := range out.Destinations {
			got[d.ID] = d.Publish
		}
		assert.Equal(t, map[string]string{
			"acct": publishDelivers, "bi": publishWaits, "old": publishSkipped, "other": publishDelivers,
		}, got, "every tenant's destinations subscribed to the type; crm is not")

		r = db.cli(t, "destination", "list", "--tenant", "tenant_a", "--json")
		require.Equal(t, 0, r.code, r)
		out.Destinations = nil
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		require.Len(t, out.Destinations, 4)
		assert.Equal(t, destinationView{ID: "crm", TenantID: "tenant_a", Host: "crm.example", EventTypes: []string{"contact.updated"}}, out.Destinations[2])
		assert.Equal(t, []string{}, out.Destinations[1].EventTypes, "bi: every type")

		r = db.cli(t, "destination", "list", "--tenant", "tenant_z")
		require.Equal(t, 0, r.code, r)
		assert.Equal(t, "no destinations match\n", r.stdout)

		r = db.cli(t, "destination", "list", "--event-type", "lease.*")
		assert.Equal(t, exitUsage, r.code, r)
		assert.Contains(t, r.stderr, "not a pattern")
	})
}
