package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// A recipient's response body, a publisher's tenant ID, scope and payload,
// and another operator's redrive reason are all stored text the CLI prints.
// None of their control bytes reaches the operator's terminal raw: an ESC
// from them could retitle the window, clear the screen or hide lines.
func TestTextOutputEscapesControlCharactersFromStoredText(t *testing.T) {
	const esc = "\x1b]0;pwned\x07\x1b[2J\u009b31m"
	tenant := "tenant" + esc
	db, id := oneDeadLetter(t, tenant, "bad"+esc+"\nline", hookrelay.EnqueueParams{
		EventID: "evt_1", TenantID: tenant, EventType: "e",
		Payload: []byte("payload" + esc), Scope: map[string]string{"k": "v" + esc},
	})

	r := db.cli(t, "redrive", "start", "--rate", "1000", "--actor", "ops"+esc, "--reason", "why"+esc)
	require.Zero(t, r.code, r)
	var rdv string
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "redrive" {
			rdv = f[1]
		}
	}
	require.NotEmpty(t, rdv, r)
	for _, args := range [][]string{
		{"dead", "show", id},
		{"dead", "list"},
		{"redrive", "plan"},
		{"redrive", "status", rdv},
		{"redrive", "stop", rdv},
	} {
		r := db.cli(t, args...)
		for _, out := range []string{r.stdout, r.stderr} {
			assert.NotContains(t, out, "\x1b", "%q prints an ESC raw:\n%s", args, r)
			assert.NotContains(t, out, "\x07", "%q prints a BEL raw:\n%s", args, r)
			assert.NotContains(t, out, "\u009b", "%q prints a C1 CSI byte raw:\n%s", args, r)
		}
		assert.NotEmpty(t, r.stdout+r.stderr, "%q", args)
	}
	r = db.cli(t, "redrive", "status", rdv)
	assert.Contains(t, r.stdout, `why\x1b]0;pwned\a`, "the reason shows, its control characters escaped")
}

// The message of a redrive another operator stopped names that operator as
// stored; it reaches stderr escaped.
func TestStoppedRedriveMessageEscapesTheStoppingActor(t *testing.T) {
	var stdout, stderr strings.Builder
	g := &globals{stdout: &stdout, stderr: &stderr}
	err := g.redriveResult(hookrelay.RedriveAudit{ID: "rdv_1", State: hookrelay.RedriveStopped, StopRequestedBy: "mallory\x1b]0;pwned\x07"}, nil)
	require.Error(t, err)
	writeError(&stderr, err)
	assert.NotContains(t, stderr.String(), "\x1b")
	assert.Contains(t, stderr.String(), `stopped by mallory\x1b]0;pwned\a`)
}

// redrive plan's summary line names the tenants the selection spans: they
// are stored text too, and reach the terminal escaped.
func TestRedrivePlanEscapesTheTenantsItNames(t *testing.T) {
	const esc = "\x1b]0;pwned\x07\x1b[2J\u009b31m"
	tenant := "tenant" + esc
	db, _ := oneDeadLetter(t, tenant, "", hookrelay.EnqueueParams{EventID: "evt_1", TenantID: tenant, EventType: "e", Payload: []byte(`{}`)})

	r := db.cli(t, "redrive", "plan")
	require.Zero(t, r.code, r)
	assert.Contains(t, r.stdout, "total 1 across 1 tenant(s)", r)
	for _, out := range []string{r.stdout, r.stderr} {
		assert.NotContains(t, out, "\x1b", "redrive plan prints an ESC raw:\n%s", r)
		assert.NotContains(t, out, "\x07", "redrive plan prints a BEL raw:\n%s", r)
		assert.NotContains(t, out, "\u009b", "redrive plan prints a C1 CSI byte raw:\n%s", r)
	}
}

// oneDeadLetter makes a SQLite database for the CLI holding one dead
// letter: ep's delivery to destination "acct" of tenant, failed for good
// by a 422 with detail. It returns the database and the delivery's ID.
func oneDeadLetter(t *testing.T, tenant, detail string, ep hookrelay.EnqueueParams) (database, string) {
	t.Helper()
	db := database{dsn: filepath.Join(t.TempDir(), "hookrelay.db"), prefix: "hookrelay_"}
	require.Zero(t, db.cli(t, "migrate").code)
	db.open(t)
	ctx := context.Background()
	require.NoError(t, db.store.Put(ctx, hookrelay.Destination{ID: "acct", TenantID: tenant, URL: "https://accounting.example/hooks"}))
	policy := hookrelay.Policy{Version: "cli-test", MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second}
	c, err := hookrelay.New(hookrelay.Config{
		Queue: db.store, Ledger: db.store, Destinations: db.store, Policy: &policy,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			return hookrelay.Permanent(hookrelay.ReasonUnprocessable).WithStatus(422).WithDetail(detail)
		}),
	})
	require.NoError(t, err)
	ep.DestinationID = "acct"
	res, err := c.Enqueue(ctx, ep)
	require.NoError(t, err)
	claims, err := db.store.Claim(ctx, hookrelay.ClaimParams{Now: c.Clock().Now(), Limit: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.NoError(t, c.Process(ctx, claims[0]))
	return db, res.ID
}
