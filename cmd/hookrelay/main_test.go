package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay"
	hooksql "github.com/hookrelay/hookrelay/adapters/sql"
)

// binary is the hookrelay command built once for the tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hookrelay-cli")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "hookrelay")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// database is one backend for the CLI: its --dsn, a fresh table prefix, and
// a store the test uses to set up and check data.
type database struct {
	dsn, prefix string
	store       *hooksql.Store
}

func randomPrefix() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "cli" + hex.EncodeToString(b[:]) + "_"
}

// forEachDatabase runs f on SQLite (always) and PostgreSQL (when
// HOOKRELAY_TEST_POSTGRES_DSN is set), each on fresh tables.
func forEachDatabase(t *testing.T, f func(t *testing.T, db database)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "hookrelay.db")
		f(t, database{dsn: path, prefix: "hookrelay_"})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("HOOKRELAY_TEST_POSTGRES_DSN")
		if dsn == "" {
			t.Skip("HOOKRELAY_TEST_POSTGRES_DSN is not set; set it to run the CLI against PostgreSQL")
		}
		prefix := randomPrefix()
		t.Cleanup(func() {
			s, err := hooksql.Open(context.Background(), hooksql.Postgres, dsn, hooksql.Options{TablePrefix: prefix})
			require.NoError(t, err)
			defer s.Close()
			assert.NoError(t, s.DropTables(context.Background()))
		})
		f(t, database{dsn: dsn, prefix: prefix})
	})
}

type result struct {
	code           int
	stdout, stderr string
}

// cli runs the binary against db with args.
func (db database) cli(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"--dsn", db.dsn, "--table-prefix", db.prefix}, args...)...)
	cmd.Env = append(os.Environ(), "USER=tester")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// open connects the test's own store to the database the CLI uses.
func (db *database) open(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var err error
	if strings.HasPrefix(db.dsn, "postgres") {
		db.store, err = hooksql.Open(ctx, hooksql.Postgres, db.dsn, hooksql.Options{TablePrefix: db.prefix})
	} else {
		db.store, err = hooksql.OpenSQLite(ctx, db.dsn, hooksql.Options{TablePrefix: db.prefix})
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.store.Close() })
}

// seed dead-letters deliveries: n payment webhooks for tenant_a's
// accounting destination (rejected 422) and one for tenant_b's CRM
// (attempts exhausted). It returns tenant_a's delivery IDs.
func (db *database) seed(t *testing.T, n int) []string {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, db.store.Put(ctx, hookrelay.Destination{ID: "acct", TenantID: "tenant_a", URL: "https://accounting.example/hooks"}))
	require.NoError(t, db.store.Put(ctx, hookrelay.Destination{ID: "crm", TenantID: "tenant_b", URL: "https://crm.example/hooks"}))
	mock := clock.NewMock()
	mock.Set(time.Now().Add(-time.Hour).Truncate(time.Second))
	policy := hookrelay.Policy{Version: "cli-test", MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second}
	c, err := hookrelay.New(hookrelay.Config{
		Queue: db.store, Ledger: db.store, Destinations: db.store, Clock: mock, Policy: &policy,
		Sender: hookrelay.SenderFunc(func(_ context.Context, p hookrelay.SendParams) hookrelay.Result {
			if p.Destination.ID == "acct" {
				return hookrelay.Permanent(hookrelay.ReasonUnprocessable).WithStatus(422).WithDetail("amount_cents must be positive")
			}
			return hookrelay.Retryable(hookrelay.ReasonServiceUnavailable).WithStatus(503)
		}),
	})
	require.NoError(t, err)
	var ids []string
	for i := range n {
		res, err := c.Enqueue(ctx, hookrelay.EnqueueParams{
			EventID: fmt.Sprintf("pay_%d", 7300+i), TenantID: "tenant_a", DestinationID: "acct",
			EventType: "lease.payment_recorded", Payload: []byte(fmt.Sprintf(`{"payment_id":"pay_%d"}`, 7300+i)),
			Scope: map[string]string{"property": "prop_204"},
		})
		require.NoError(t, err)
		ids = append(ids, res.ID)
	}
	_, err = c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "contact_1", TenantID: "tenant_b", DestinationID: "crm", EventType: "contact.updated", Payload: []byte(`{}`)})
	require.NoError(t, err)
	claims, err := db.store.Claim(ctx, hookrelay.ClaimParams{Now: mock.Now(), Limit: 100, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, claims, n+1)
	for _, cl := range claims {
		mock.Add(time.Second) // distinct dead-letter times
		require.NoError(t, c.Process(ctx, cl))
	}
	return ids
}

func (db database) state(t *testing.T, id string) hookrelay.State {
	t.Helper()
	d, err := db.store.Get(context.Background(), id)
	require.NoError(t, err)
	return d.State
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"--dsn", "x.db", "dead"},
		{"--dsn", "x.db", "dead", "show"},
		{"--dsn", "x.db", "--no-such-flag", "stats"},
		{"--dsn", "x.db", "redrive", "start", "--actor", "a", "--reason", "r"},
		{"--dsn", "x.db", "redrive", "start", "--rate", "1", "--reason", "r"},
		{"--dsn", "x.db", "redrive", "plan", "--since", "yesterday"},
		{"--dsn", "ftp://example.com/db", "stats"},
		{"stats"},
	} {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), "HOOKRELAY_DSN=")
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "%q: %v\n%s", args, err, out)
		assert.Equal(t, exitUsage, ee.ExitCode(), "%q:\n%s", args, out)
		assert.NotEmpty(t, strings.TrimSpace(string(out)), "%q explains itself", args)
	}
}

func TestHelpPrintsUsageAndSucceeds(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"--dsn", "x.db", "redrive", "start", "--help"}} {
		out, err := exec.Command(binary, args...).Output()
		require.NoError(t, err, "%q exits 0", args)
		assert.Contains(t, string(out), "usage: hookrelay", "%q prints the usage on stdout", args)
	}
}

func TestUnreachableDatabaseExitsThree(t *testing.T) {
	cases := map[string][]string{
		"postgres nobody listens on": {"--dsn", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", "stats"},
		"sqlite in a missing dir":    {"--dsn", filepath.Join(t.TempDir(), "missing", "dir", "x.db"), "stats"},
		"sqlite never migrated":      {"--dsn", filepath.Join(t.TempDir(), "empty.db"), "dead", "list"},
	}
	for name, args := range cases {
		out, err := exec.Command(binary, args...).CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "%s: %v\n%s", name, err, out)
		assert.Equal(t, exitDatabase, ee.ExitCode(), "%s:\n%s", name, out)
		assert.Contains(t, string(out), "hookrelay:", name)
	}
	out, _ := exec.Command(binary, "--dsn", filepath.Join(t.TempDir(), "empty.db"), "stats").CombinedOutput()
	assert.Contains(t, string(out), "run hookrelay migrate", "the message says what to do")
}

// A DSN that cannot be read is bad input, exit 2 like any other, not 3
// (which says the database is down, and would send an operator to check
// the server): nothing is dialed. A well-formed DSN whose server does not
// answer stays 3 (TestUnreachableDatabaseExitsThree).
func TestMalformedDSNExitsTwo(t *testing.T) {
	for _, dsn := range []string{
		"postgres://%zz",
		"postgres://u@127.0.0.1:99999/x",
		"postgres://127.0.0.1:1/x?sslmode=bogus",
		"host=127.0.0.1 port=abc",
		"mysql:///::",
		"mysql://u@127.0.0.1:1/db?parseTime=maybe",
		"user@tcp(127.0.0.1:1/db",
		"foo://x",
		":memory:",
		"sqlite::memory:",
	} {
		assertUsageError(t, "--dsn", "--dsn", dsn, "stats")
	}
}

// assertUsageError runs the CLI with args (and no $HOOKRELAY_DSN) and
// checks it exits 2, bad usage, with a message naming flag.
func assertUsageError(t *testing.T, flag string, args ...string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "HOOKRELAY_DSN=")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, "%q: %v\n%s", args, err, out)
	assert.Equal(t, exitUsage, ee.ExitCode(), "%q:\n%s", args, out)
	assert.Contains(t, string(out), flag, "%q: the message names the flag", args)
}

func TestBadTablePrefixExitsTwo(t *testing.T) {
	// Checked before the database is reached: the flag, not the server, is
	// what is wrong, whichever command and database.
	dsn := filepath.Join(t.TempDir(), "hr.db")
	for _, args := range [][]string{
		{"--table-prefix", "Bad-Prefix", "migrate"},
		{"--table-prefix", "x;drop", "stats"},
		{"--table-prefix", strings.Repeat("p", 41), "purge", "--dry-run"},
	} {
		assertUsageError(t, "--table-prefix", append([]string{"--dsn", dsn}, args...)...)
	}
	_, err := os.Stat(dsn)
	assert.ErrorIs(t, err, fs.ErrNotExist, "migrate with a bad prefix created no database file")
}

func TestOperatorRecoveryThroughTheCLI(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db database) {
		r := db.cli(t, "migrate")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, fmt.Sprintf("to %d", hooksql.SchemaVersion))
		r = db.cli(t, "migrate")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "already at version", "migrate is idempotent")

		db.open(t)
		ids := db.seed(t, 3)

		// Inspect.
		r = db.cli(t, "dead", "list")
		require.Equal(t, 0, r.code, r)
		for _, h := range []string{"DELIVERY ID", "TENANT", "DESTINATION", "REASON"} {
			assert.Contains(t, r.stdout, h)
		}
		for _, id := range ids {
			assert.Contains(t, r.stdout, id)
		}
		assert.Contains(t, r.stdout, "contact.updated")

		var page struct {
			Deliveries []struct {
				ID         string         `json:"id"`
				LastReason string         `json:"last_reason"`
				Payload    map[string]any `json:"payload"`
			} `json:"deliveries"`
			Next string `json:"next"`
		}
		r = db.cli(t, "dead", "list", "--json", "--tenant", "tenant_a", "--failure", hookrelay.ReasonUnprocessable, "--limit", "2")
		require.Equal(t, 0, r.code, r)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &page), r)
		require.Len(t, page.Deliveries, 2)
		assert.Equal(t, ids[0], page.Deliveries[0].ID, "oldest first")
		assert.Equal(t, "pay_7300", page.Deliveries[0].Payload["payment_id"])
		require.NotEmpty(t, page.Next)
		r = db.cli(t, "dead", "list", "--json", "--tenant", "tenant_a", "--limit", "2", "--cursor", page.Next)
		require.Equal(t, 0, r.code, r)
		page.Next = ""
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
		require.Len(t, page.Deliveries, 1)
		assert.Equal(t, ids[2], page.Deliveries[0].ID)
		assert.Empty(t, page.Next)

		r = db.cli(t, "dead", "show", ids[0])
		require.Equal(t, 0, r.code, r)
		for _, want := range []string{ids[0], "pay_7300", "prop_204", hookrelay.ReasonUnprocessable, "422", "amount_cents must be positive", "permanent"} {
			assert.Contains(t, r.stdout, want)
		}
		var shown struct {
			Delivery struct{ State string } `json:"delivery"`
			Attempts []struct {
				Number     int `json:"number"`
				StatusCode int `json:"status_code"`
			} `json:"attempts"`
		}
		r = db.cli(t, "dead", "show", "--json", ids[0])
		require.Equal(t, 0, r.code, r)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &shown))
		assert.Equal(t, "dead", shown.Delivery.State)
		require.Len(t, shown.Attempts, 1)
		assert.Equal(t, 422, shown.Attempts[0].StatusCode)
		r = db.cli(t, "dead", "show", "whd_no-such-delivery")
		assert.Equal(t, exitNotFound, r.code, r)

		// Plan: a dry count that changes nothing.
		r = db.cli(t, "redrive", "plan")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "total 4 across 2 tenant(s): tenant_a, tenant_b")
		assert.Contains(t, r.stdout, "--cross-tenant")
		var plan struct {
			Total int64 `json:"total"`
			Rows  []struct {
				DestinationID string `json:"destination_id"`
				Reason        string `json:"reason"`
				Count         int64  `json:"count"`
			} `json:"rows"`
		}
		r = db.cli(t, "redrive", "plan", "--json", "--destination", "acct")
		require.Equal(t, 0, r.code, r)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &plan))
		assert.EqualValues(t, 3, plan.Total)
		require.Len(t, plan.Rows, 1)
		assert.Equal(t, hookrelay.ReasonUnprocessable, plan.Rows[0].Reason)
		assert.Equal(t, hookrelay.StateDead, db.state(t, ids[0]))

		// A mixed-tenant redrive is refused, naming the tenants.
		r = db.cli(t, "redrive", "start", "--rate", "50", "--actor", "ops", "--reason", "everything")
		assert.Equal(t, exitRefused, r.code, r)
		assert.Contains(t, r.stderr, "tenant_a")
		assert.Contains(t, r.stderr, "tenant_b")
		assert.Equal(t, hookrelay.StateDead, db.state(t, ids[0]), "nothing moved")

		// A single-tenant redrive runs, with progress and an audit entry.
		r = db.cli(t, "redrive", "start", "--tenant", "tenant_a", "--rate", "50", "--actor", "ops@example", "--reason", "recipient fixed its validation")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stderr, "re-enqueued", "a progress line")
		assert.Contains(t, r.stdout, "finished")
		var auditID string
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "redrive" {
				auditID = f[1]
			}
		}
		require.True(t, strings.HasPrefix(auditID, "rdv_"), r)
		for _, id := range ids {
			assert.Equal(t, hookrelay.StatePending, db.state(t, id), "back to pending with the same ID")
		}

		var audit struct {
			ID       string   `json:"id"`
			State    string   `json:"state"`
			Actor    string   `json:"actor"`
			Reason   string   `json:"reason"`
			Matched  int64    `json:"matched"`
			Redriven int64    `json:"redriven"`
			Tenants  []string `json:"tenants"`
		}
		r = db.cli(t, "redrive", "status", "--json", auditID)
		require.Equal(t, 0, r.code, r)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &audit))
		assert.Equal(t, "finished", audit.State)
		assert.Equal(t, "ops@example", audit.Actor)
		assert.Equal(t, "recipient fixed its validation", audit.Reason)
		assert.EqualValues(t, 3, audit.Matched)
		assert.EqualValues(t, 3, audit.Redriven)
		assert.Equal(t, []string{"tenant_a"}, audit.Tenants)
		r = db.cli(t, "redrive", "stop", auditID)
		assert.Equal(t, exitFailed, r.code, "a finished redrive cannot be stopped: %s", r)
		r = db.cli(t, "redrive", "status", "rdv_unknown")
		assert.Equal(t, exitNotFound, r.code, r)

		// An explicit cross-tenant redrive.
		r = db.cli(t, "redrive", "start", "--json", "--cross-tenant", "--rate", "50", "--actor", "sre-lead", "--reason", "incident 42")
		require.Equal(t, 0, r.code, r)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &audit))
		assert.EqualValues(t, 1, audit.Redriven, "only tenant_b's delivery was still dead")

		// Pause and resume a destination; stats shows the pending work.
		r = db.cli(t, "destination", "pause", "acct")
		require.Equal(t, 0, r.code, r)
		dest, err := db.store.Destination(context.Background(), "acct")
		require.NoError(t, err)
		assert.True(t, dest.Paused)
		r = db.cli(t, "destination", "resume", "acct")
		require.Equal(t, 0, r.code, r)
		dest, err = db.store.Destination(context.Background(), "acct")
		require.NoError(t, err)
		assert.False(t, dest.Paused)
		r = db.cli(t, "destination", "pause", "nope")
		assert.Equal(t, exitNotFound, r.code, r)

		r = db.cli(t, "stats")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "PENDING")
		assert.Contains(t, r.stdout, "acct")
		var stats []struct {
			DestinationID string `json:"destination_id"`
			Pending       int64  `json:"pending"`
			Dead          int64  `json:"dead"`
		}
		r = db.cli(t, "stats", "--json")
		require.Equal(t, 0, r.code, r)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &stats))
		require.Len(t, stats, 2)
		assert.Equal(t, "acct", stats[0].DestinationID)
		assert.EqualValues(t, 3, stats[0].Pending)
		assert.EqualValues(t, 0, stats[0].Dead)
	})
}

// A redrive running in one process is stopped from another, and resumed.
func TestStopARunningRedriveFromAnotherProcess(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db database) {
		require.Equal(t, 0, db.cli(t, "migrate").code)
		db.open(t)
		ids := db.seed(t, 4)

		// One delivery every two seconds: the first moves at once.
		cmd := exec.Command(binary, "--dsn", db.dsn, "--table-prefix", db.prefix, "redrive", "start",
			"--tenant", "tenant_a", "--rate", "0.5", "--actor", "ops", "--reason", "slow and careful")
		var out bytes.Buffer
		cmd.Stdout = &out
		stderr, err := cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(stderr)
		require.True(t, lines.Scan(), "a progress line names the redrive")
		first := strings.Fields(lines.Text())
		require.GreaterOrEqual(t, len(first), 2, lines.Text())
		auditID := strings.TrimSuffix(first[1], ":")
		require.True(t, strings.HasPrefix(auditID, "rdv_"), lines.Text())

		r := db.cli(t, "redrive", "stop", auditID, "--actor", "oncall")
		require.Equal(t, 0, r.code, r)
		for lines.Scan() {
		}
		err = cmd.Wait()
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "the stopped redrive exits non-zero: %v\n%s", err, out.String())
		assert.Equal(t, exitFailed, ee.ExitCode())

		var audit struct {
			State           string `json:"state"`
			Redriven        int64  `json:"redriven"`
			Matched         int64  `json:"matched"`
			StopRequestedBy string `json:"stop_requested_by"`
			ResumedBy       string `json:"resumed_by"`
		}
		r = db.cli(t, "redrive", "status", "--json", auditID)
		require.Equal(t, 0, r.code, r)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &audit))
		assert.Equal(t, "stopped", audit.State)
		assert.Equal(t, "oncall", audit.StopRequestedBy)
		assert.EqualValues(t, 4, audit.Matched)
		assert.Less(t, audit.Redriven, int64(4), "it stopped before the end")
		assert.GreaterOrEqual(t, audit.Redriven, int64(1))

		r = db.cli(t, "redrive", "resume", "--json", "--actor", "   ", auditID)
		assert.Equal(t, exitUsage, r.code, "a blank actor is refused: %s", r)
		r = db.cli(t, "redrive", "resume", "--json", "--actor", "dayshift", auditID)
		require.Equal(t, 0, r.code, r)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &audit))
		assert.Equal(t, "finished", audit.State)
		assert.Equal(t, "dayshift", audit.ResumedBy, "the audit records who resumed it")
		assert.EqualValues(t, 4, audit.Redriven)
		for _, id := range ids {
			assert.Equal(t, hookrelay.StatePending, db.state(t, id))
		}
	})
}

// An operator sees a destination's open circuit, its failures and since
// when it fails in `hookrelay stats`, text and JSON, even with nothing
// pending for it.
func TestStatsShowTheDestinationGuard(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db database) {
		db.open(t)
		ctx := context.Background()
		since := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
		require.NoError(t, db.store.Migrate(ctx))
		_, err := db.store.UpdateGuard(ctx, hookrelay.UpdateGuardParams{DestinationID: "acct", Update: func(g hookrelay.GuardState) hookrelay.GuardState {
			g.Circuit, g.ConsecutiveFailures, g.OpenUntil, g.FailingSince = hookrelay.CircuitOpen, 5, since.Add(time.Minute), since
			return g
		}})
		require.NoError(t, err)
		r := db.cli(t, "stats")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "CIRCUIT")
		assert.Regexp(t, `acct\s.*\sopen\s+5\s+-\s+2026-03-04T05:06:07Z`, r.stdout)
		var stats []struct {
			DestinationID       string `json:"destination_id"`
			Circuit             string `json:"circuit"`
			ConsecutiveFailures int    `json:"consecutive_failures"`
			FailingSince        string `json:"failing_since"`
		}
		r = db.cli(t, "stats", "--json")
		require.Equal(t, 0, r.code, r)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &stats))
		require.Len(t, stats, 1)
		assert.Equal(t, "open", stats[0].Circuit)
		assert.Equal(t, 5, stats[0].ConsecutiveFailures)
		assert.Equal(t, "2026-03-04T05:06:07Z", stats[0].FailingSince)
	})
}
