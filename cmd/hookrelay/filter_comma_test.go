package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// deadAt dead-letters one delivery to each destination ID, all of
// tenant_a.
func (db *database) deadAt(t *testing.T, destIDs ...string) {
	t.Helper()
	ctx := context.Background()
	policy := hookrelay.Policy{Version: "cli-test", MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second}
	c, err := hookrelay.New(hookrelay.Config{
		Queue: db.store, Ledger: db.store, Destinations: db.store, Policy: &policy,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			return hookrelay.Permanent(hookrelay.ReasonUnprocessable).WithStatus(422)
		}),
	})
	require.NoError(t, err)
	var ps []hookrelay.EnqueueParams
	for i, id := range destIDs {
		require.NoError(t, db.store.Put(ctx, hookrelay.Destination{ID: id, TenantID: "tenant_a", URL: "https://accounting.example/hooks"}))
		ps = append(ps, hookrelay.EnqueueParams{EventID: fmt.Sprintf("evt_%d", i), TenantID: "tenant_a", DestinationID: id, EventType: "t", Payload: []byte(`{}`)})
	}
	db.attemptOnce(t, c, ps)
}

// A destination (or tenant, event type, reason) whose ID holds a comma
// is selected exactly when written in double quotes, as in CSV; a comma
// outside quotes still separates values, and the flags still repeat.
func TestFilterValuesWithACommaAreSelectedExactly(t *testing.T) {
	db := database{dsn: filepath.Join(t.TempDir(), "hookrelay.db"), prefix: "hookrelay_"}
	require.Zero(t, db.cli(t, "migrate").code)
	db.open(t)
	db.deadAt(t, "acct", "eu", "acct,eu", `say "hi"`)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--destination", `"acct,eu"`}, []string{"acct,eu"}},
		{[]string{"--destination", "acct,eu"}, []string{"acct", "eu"}},
		{[]string{"--destination", "eu", "--destination", ` "acct,eu" `}, []string{"acct,eu", "eu"}},
		{[]string{"--destination", `"say ""hi"""`}, []string{`say "hi"`}},
		{[]string{"--destination", `say "hi"`}, []string{`say "hi"`}},
	} {
		r := db.cli(t, append([]string{"--json", "redrive", "plan"}, c.args...)...)
		require.Zero(t, r.code, "%q: %s", c.args, r)
		var plan struct {
			Rows []struct {
				DestinationID string `json:"destination_id"`
			} `json:"rows"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &plan), r.stdout)
		var got []string
		for _, row := range plan.Rows {
			got = append(got, row.DestinationID)
		}
		slices.Sort(got)
		assert.Equal(t, c.want, got, "%q", c.args)
	}
	r := db.cli(t, "redrive", "plan", "--destination", `"acct,eu`)
	assert.Equal(t, exitUsage, r.code, "an unclosed quote is refused, not read as some other value: %s", r)
	assert.Contains(t, r.stderr, "-destination", r.String())
}
