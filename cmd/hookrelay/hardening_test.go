package main

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
)

func TestCommandsOnAMissingSQLiteFileCreateNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new.db")
	for _, args := range [][]string{
		{"dead", "list"},
		{"dead", "show", "whd_x"},
		{"redrive", "plan"},
		{"redrive", "status", "rdv_x"},
		{"stats"},
		{"redrive", "stop", "rdv_x", "--actor", "ops"},
		{"destination", "pause", "acct"},
		{"redrive", "start", "--rate", "1", "--actor", "ops", "--reason", "moved"},
	} {
		out, err := exec.Command(binary, append([]string{"--dsn", path}, args...)...).CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "%q: %v\n%s", args, err, out)
		assert.Equal(t, exitDatabase, ee.ExitCode(), "%q:\n%s", args, out)
		assert.Contains(t, string(out), "no database here", "%q", args)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries, "%q created a file", args)
	}
}

// TestReadCommandsWorkOnAMigratedFile also on file names a file: URI
// would misread: "%41" decoded to "A", a path starting "//" taken for a
// host. The read-only open must open the file the path names.
func TestReadCommandsWorkOnAMigratedFile(t *testing.T) {
	for name, path := range map[string]func(dir string) string{
		"Plain":         func(dir string) string { return filepath.Join(dir, "hookrelay.db") },
		"PercentInName": func(dir string) string { return filepath.Join(dir, "pay%41.db") },
		"DoubleSlash":   func(dir string) string { return "/" + filepath.Join(dir, "hookrelay.db") },
	} {
		t.Run(name, func(t *testing.T) {
			db := database{dsn: path(t.TempDir()), prefix: "hookrelay_"}
			require.Zero(t, db.cli(t, "migrate").code)
			db.open(t)
			ids := db.seed(t, 2)
			r := db.cli(t, "--json", "dead", "show", ids[0])
			require.Zero(t, r.code, r)
			assert.Contains(t, r.stdout, ids[0])
			r = db.cli(t, "dead", "list")
			require.Zero(t, r.code, r)
			assert.Contains(t, r.stdout, ids[1])
		})
	}
}

func TestBlankRedriveActorOrReasonIsRefused(t *testing.T) {
	db := database{dsn: filepath.Join(t.TempDir(), "hookrelay.db"), prefix: "hookrelay_"}
	require.Zero(t, db.cli(t, "migrate").code)
	db.open(t)
	db.seed(t, 1)
	for _, args := range [][]string{
		{"redrive", "start", "--rate", "1", "--actor", "  ", "--reason", "moved"},
		{"redrive", "start", "--rate", "1", "--actor", "ops", "--reason", "\t"},
		{"redrive", "stop", "rdv_x", "--actor", " "},
	} {
		r := db.cli(t, args...)
		assert.Equal(t, exitUsage, r.code, "%q: %s", args, r)
		assert.Contains(t, r.stderr, "blank", "%q", args)
	}
	r := db.cli(t, "--json", "redrive", "plan")
	require.Zero(t, r.code, r)
	assert.Contains(t, r.stdout, `"total": 2`, "nothing was redriven")
}

// TestDeadShowNeverPrintsURLCredentials dead-letters a delivery sent by the
// HTTP sender to a destination with user info in its URL, at a recipient
// that echoes the request headers in a 500, and reads it back with
// dead show --json.
func TestDeadShowNeverPrintsURLCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_ = r.Header.Write(w)
	}))
	t.Cleanup(srv.Close)
	sender, err := hookhttp.New(hookhttp.Config{
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Dialer:        &net.Dialer{Timeout: 5 * time.Second},
	})
	require.NoError(t, err)
	t.Cleanup(sender.CloseIdleConnections)

	db := database{dsn: filepath.Join(t.TempDir(), "hookrelay.db"), prefix: "hookrelay_"}
	require.Zero(t, db.cli(t, "migrate").code)
	db.open(t)
	ctx := context.Background()
	const user, pass = "Us3rname", "Pw4pass-zyxwvutsrqponm"
	url := strings.Replace(srv.URL, "://", "://"+user+":"+pass+"@", 1)
	require.NoError(t, db.store.Put(ctx, hookrelay.Destination{ID: "basic", TenantID: "tenant_a", URL: url}))
	policy := hookrelay.Policy{Version: "cli-test", MaxAttempts: 1}
	c, err := hookrelay.New(hookrelay.Config{Queue: db.store, Ledger: db.store, Destinations: db.store, Sender: sender, Policy: &policy})
	require.NoError(t, err)
	res, err := c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "evt_1", TenantID: "tenant_a", DestinationID: "basic", EventType: "e", Payload: []byte(`{}`)})
	require.NoError(t, err)
	claims, err := db.store.Claim(ctx, hookrelay.ClaimParams{Now: c.Clock().Now(), Limit: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.NoError(t, c.Process(ctx, claims[0]))

	r := db.cli(t, "--json", "dead", "show", res.ID)
	require.Zero(t, r.code, r)
	assert.Contains(t, r.stdout, "Basic [REDACTED]", "the echoed header is there, masked")
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	for _, secret := range []string{basic[:8], pass[:8]} {
		assert.NotContains(t, r.stdout, secret)
	}
}

// A database DSN in the forms its driver takes directly — go-sql-driver's
// user:password@net(addr)/db and libpq's keyword=value — is no SQLite path:
// it is not echoed back (password and all) as a missing file, nor created
// as one by migrate.
func TestDriverDSNsAreNotTakenForSQLitePaths(t *testing.T) {
	const pass = "Pw4dsn-zyxwvutsrq"
	dir := t.TempDir()
	for _, dsn := range []string{
		"root:" + pass + "@unix(" + filepath.Join(dir, "no.sock") + ")/test",
		"root:" + pass + "@/test?timeout=2s",
		"host=127.0.0.1 port=1 user=postgres password=" + pass + " dbname=test connect_timeout=2",
	} {
		for _, cmd := range []string{"stats", "migrate"} {
			code, out := failingCLIIn(t, dir, dsn, cmd)
			assert.Equal(t, exitDatabase, code, "%s %s:\n%s", dsn, cmd, out)
			assert.NotContains(t, out, pass[:8], "%s %s prints the password", dsn, cmd)
			assert.NotContains(t, out, "no database here", "%s %s", dsn, cmd)
			assert.NotContains(t, out, "sqlite", "%s %s", dsn, cmd)
		}
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries, "%s created a file", dsn)
	}
}

// A database URL written without its scheme (user:password@host:port/db)
// is no SQLite path either: it was echoed back, password and all, as a
// missing file, and migrate created a SQLite file named after it.
func TestSchemelessDatabaseURLsAreNotTakenForSQLitePaths(t *testing.T) {
	const pass = "Pw4dsn-zyxwvutsrq"
	dir := t.TempDir()
	for _, dsn := range []string{
		"root:" + pass + "@db.example.com:3306/test",
		"root:" + pass + "@db.example.com",
		"postgres:" + pass + "@127.0.0.1/test?sslmode=disable",
	} {
		for _, cmd := range []string{"stats", "migrate"} {
			code, out := failingCLIIn(t, dir, dsn, cmd)
			assert.Equal(t, exitUsage, code, "%s %s:\n%s", dsn, cmd, out)
			assert.NotContains(t, out, pass[:8], "%s %s prints the password", dsn, cmd)
			assert.Contains(t, out, "--dsn", "%s %s names the flag", dsn, cmd)
		}
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries, "%s created a file", dsn)
	}
	// A Windows path with an '@' in it is still a path.
	out, err := exec.Command(binary, "--dsn", `C:\Users\me@corp\hr.db`, "stats").CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, "%v\n%s", err, out)
	assert.Equal(t, exitDatabase, ee.ExitCode(), "%s", out)
	assert.Contains(t, string(out), "no database here", "%s", out)
}

// A numeric flag out of its range is refused naming the flag, not the
// library field it fills (RatePerSecond, BatchSize, Limit), nor quietly
// replaced: a --limit or --batch of 0 became the library's default (100,
// not the CLI's 50), one above 1000 was cut to 1000, and a --since after
// --before matched nothing at all.
func TestOutOfRangeFlagsAreRefusedNamingTheFlag(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "hr.db")
	require.NoError(t, exec.Command(binary, "--dsn", dsn, "migrate").Run())
	start := []string{"--dsn", dsn, "redrive", "start", "--actor", "ops", "--reason", "r"}
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"--rate", append(slices.Clone(start), "--rate", "NaN")},
		{"--rate", append(slices.Clone(start), "--rate", "+Inf")},
		{"--rate", append(slices.Clone(start), "--rate", "1e9")},
		{"--batch", append(slices.Clone(start), "--rate", "1", "--batch", "-1")},
		{"--batch", append(slices.Clone(start), "--rate", "1", "--batch", "0")},
		{"--batch", append(slices.Clone(start), "--rate", "1", "--batch", "1001")},
		{"--limit", []string{"--dsn", dsn, "dead", "list", "--limit", "-1"}},
		{"--limit", []string{"--dsn", dsn, "dead", "list", "--limit", "0"}},
		{"--limit", []string{"--dsn", dsn, "dead", "list", "--limit", "1001"}},
		{"--since", []string{"--dsn", dsn, "dead", "list", "--since", "2030-01-01T00:00:00Z", "--before", "2020-01-01T00:00:00Z"}},
		{"--since", []string{"--dsn", dsn, "redrive", "plan", "--since", "1h", "--before", "2h"}},
		{"--since", append(slices.Clone(start), "--rate", "1", "--since", "1h", "--before", "2h")},
	} {
		assertUsageError(t, c.flag, c.args...)
	}
}

// The selection flags are checked by the library's DeadLetterFilter
// (and redrive start's by RedriveParams) before the database is opened,
// and the message names the flags the operator typed, not the library's
// fields (Filter.TenantIDs[0]); an empty window names both its flags.
func TestSelectionErrorsNameTheFlags(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "hr.db")
	require.NoError(t, exec.Command(binary, "--dsn", dsn, "migrate").Run())
	start := []string{"--dsn", dsn, "redrive", "start", "--actor", "ops", "--reason", "r", "--rate", "1"}
	for _, c := range []struct {
		want []string
		args []string
	}{
		{[]string{"--tenant", "not valid UTF-8"}, []string{"--dsn", dsn, "dead", "list", "--tenant", "bad\xff"}},
		{[]string{"--failure"}, []string{"--dsn", dsn, "redrive", "plan", "--failure", "a\xfeb"}},
		{[]string{"--destination"}, append(slices.Clone(start), "--destination", "d\xc3")},
		{[]string{"--since 2030-01-01T00:00:00Z is not before --before 2020-01-01T00:00:00Z"},
			[]string{"--dsn", dsn, "dead", "list", "--since", "2030-01-01T00:00:00Z", "--before", "2020-01-01T00:00:00Z"}},
		{[]string{"--actor"}, []string{"--dsn", dsn, "redrive", "start", "--actor", " ", "--reason", "r", "--rate", "1"}},
		{[]string{"--rate", "at most 1e+06"}, []string{"--dsn", dsn, "redrive", "start", "--actor", "ops", "--reason", "r", "--rate", "2e6"}},
	} {
		out, err := exec.Command(binary, c.args...).CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%q: %s", c.args, out)
		assert.Equal(t, exitUsage, ee.ExitCode(), "%q: %s", c.args, out)
		for _, w := range c.want {
			assert.Contains(t, string(out), w, "%q", c.args)
		}
		assert.NotContains(t, string(out), "Filter.", "%q: the library's field names are not the operator's", c.args)
	}
}

// failingCLIIn runs the CLI in dir with --dsn dsn and cmd, which must fail,
// and returns its exit code and its output (stdout and stderr).
func failingCLIIn(t *testing.T, dir, dsn, cmd string) (int, string) {
	t.Helper()
	c := exec.Command(binary, "--dsn", dsn, cmd)
	c.Dir = dir
	out, err := c.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, "%s %s: %v\n%s", dsn, cmd, err, out)
	return ee.ExitCode(), string(out)
}

// A command interrupted (Ctrl-C) before its database answered says so: it
// reported "cannot reach the sqlite database: context canceled" with the
// database's exit status, as if the database were down.
func TestACommandInterruptedBeforeTheDatabaseAnsweredSaysSo(t *testing.T) {
	db := database{dsn: filepath.Join(t.TempDir(), "hookrelay.db"), prefix: "hookrelay_"}
	require.Zero(t, db.cli(t, "migrate").code)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{{"stats"}, {"dead", "list"}, {"migrate"}} {
		var stdout, stderr strings.Builder
		code := run(ctx, append([]string{"--dsn", db.dsn}, args...), &stdout, &stderr, func(string) string { return "" })
		assert.Equal(t, exitFailed, code, "%q: %s", args, stderr.String())
		assert.Contains(t, stderr.String(), "interrupted", "%q", args)
		assert.NotContains(t, stderr.String(), "cannot reach", "%q", args)
	}
}
