package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

func TestDestinationEnableReEnablesADisabledDestination(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db database) {
		require.Equal(t, 0, db.cli(t, "migrate").code)
		db.open(t)
		db.seed(t, 1)
		ctx := context.Background()
		require.NoError(t, db.store.Disable(ctx, hookrelay.DisableParams{ID: "acct", Reason: hookrelay.ReasonDestinationGone, Now: time.Now()}))
		r := db.cli(t, "destination", "enable", "acct")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "destination acct re-enabled")
		d, err := db.store.Destination(ctx, "acct")
		require.NoError(t, err)
		assert.False(t, d.Disabled)
		assert.Empty(t, d.DisabledReason)
		r = db.cli(t, "destination", "enable", "nowhere")
		assert.Equal(t, exitNotFound, r.code, r)
	})
}

func TestDestinationClearGuardLiftsHoldsAndClosesTheCircuit(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db database) {
		require.Equal(t, 0, db.cli(t, "migrate").code)
		db.open(t)
		db.seed(t, 1)
		ctx := context.Background()
		// A destination held for an hour behind an open circuit, with half
		// a token in its bucket.
		at := time.Now().UTC().Truncate(time.Second)
		held := hookrelay.GuardState{Tokens: 0.5, RefilledAt: at, LimitedUntil: at.Add(time.Second), HeldUntil: at.Add(time.Hour),
			ConsecutiveFailures: 5, Circuit: hookrelay.CircuitHalfOpen, OpenUntil: at.Add(2 * time.Minute), Probe: "whd_probe", FailingSince: at.Add(-time.Hour)}
		_, err := db.store.UpdateGuard(ctx, hookrelay.UpdateGuardParams{DestinationID: "acct",
			Update: func(hookrelay.GuardState) hookrelay.GuardState { return held }})
		require.NoError(t, err)

		r := db.cli(t, "destination", "clear-guard", "acct")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "destination acct guard cleared")
		gs, err := db.store.GuardStates(ctx, hookrelay.GuardStatesParams{IDs: []string{"acct"}})
		require.NoError(t, err)
		require.Len(t, gs, 1)
		g := gs[0]
		assert.Zero(t, g.HeldUntil)
		assert.Zero(t, g.LimitedUntil)
		assert.False(t, g.IsOpen(), "circuit closed: %+v", g)
		assert.Zero(t, g.ConsecutiveFailures)
		assert.Empty(t, g.Probe)
		assert.Zero(t, g.ClaimableAt(), "claimable at once")
		assert.InDelta(t, 0.5, g.Tokens, 1e-9, "the bucket is kept")
		assert.True(t, g.RefilledAt.Equal(held.RefilledAt), "the bucket is kept")
		assert.True(t, g.FailingSince.Equal(held.FailingSince), "the failing run is kept")

		r = db.cli(t, "destination", "clear-guard", "--json", "acct")
		require.Equal(t, 0, r.code, r)
		assert.JSONEq(t, `{"destination":"acct","guard_cleared":true}`, r.stdout)
		r = db.cli(t, "destination", "clear-guard", "nowhere")
		assert.Equal(t, exitNotFound, r.code, r)
		gs, err = db.store.GuardStates(ctx, hookrelay.GuardStatesParams{IDs: []string{"nowhere"}})
		require.NoError(t, err)
		assert.Empty(t, gs, "no guard row made for an unknown destination")
		r = db.cli(t, "destination", "clear-guard")
		assert.Equal(t, exitUsage, r.code, r)
		r = db.cli(t, "destination", "clear-guard", "acct", "crm")
		assert.Equal(t, exitUsage, r.code, r)
	})
}

// The standalone console: loopback by default, the actor from --actor,
// shut down cleanly by SIGINT.
func TestConsoleServesTheOperatorPages(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db database) {
		require.Equal(t, 0, db.cli(t, "migrate").code)
		db.open(t)
		ids := db.seed(t, 2)
		cmd, base, stderr := startConsole(t, db, "--actor", "night-shift")
		get := func(path string) string {
			resp, err := http.Get(base + path)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
			return string(b)
		}
		body := get("/")
		assert.Contains(t, body, `signed in as <b id="actor">night-shift</b>`)
		assert.Contains(t, body, `<tr id="dest-acct">`)
		body = get("/dead?destination=acct")
		assert.Contains(t, body, ids[0])
		assert.Contains(t, get("/deliveries/"+ids[0]), "amount_cents must be positive")

		// A form post from another origin is refused.
		resp, err := http.PostForm(base+"/destinations/acct/pause", url.Values{"csrf_token": {"x"}})
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)

		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			assert.NoError(t, err, "a clean shutdown exits 0; stderr: %s", stderr.String())
		case <-time.After(20 * time.Second):
			t.Fatal("the console did not stop on SIGINT")
		}
	})
}

// startConsole runs hookrelay console on a free loopback port and returns
// the process, its base URL and its stderr.
func startConsole(t *testing.T, db database, args ...string) (*exec.Cmd, string, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"--dsn", db.dsn, "--table-prefix", db.prefix, "console", "--addr", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "the console says where it listens")
	m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/`).FindStringSubmatch(lines.Text())
	require.NotNil(t, m, "it binds loopback by default: %s", lines.Text())
	return cmd, "http://" + m[1], stderr
}

// Behind an authenticating proxy, the operator's name comes from its header.
func TestConsoleTakesTheActorFromAProxyHeader(t *testing.T) {
	db := database{dsn: filepath.Join(t.TempDir(), "hookrelay.db"), prefix: "hookrelay_"}
	require.Equal(t, 0, db.cli(t, "migrate").code)
	_, base, _ := startConsole(t, db, "--actor-header", "X-Forwarded-User")
	get := func(user string) (int, string) {
		req, err := http.NewRequest("GET", base+"/", nil)
		require.NoError(t, err)
		if user != "" {
			req.Header.Set("X-Forwarded-User", user)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body, "X-Forwarded-User")
	code, body = get("carol@example")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `signed in as <b id="actor">carol@example</b>`)
}

func TestConsoleNeedsAnActor(t *testing.T) {
	cmd := exec.Command(binary, "--dsn", t.TempDir()+"/x.db", "console", "--actor", "a", "--actor-header", "X-User")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, string(out))
	assert.Equal(t, exitUsage, ee.ExitCode())
	assert.Contains(t, string(out), "not both")
}

func TestProgressLineShowsMovedRateAndETA(t *testing.T) {
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	a := hookrelay.RedriveAudit{ID: "rdv_1", Matched: 1000, Redriven: 290, Skipped: 10, State: hookrelay.RedriveRunning, CreatedAt: start}
	line := progressLine(a, start.Add(time.Minute))
	assert.Equal(t, "redrive rdv_1: 290/1000 moved (30%), 10 skipped · 5.0/s · ETA 2m20s · running", line)
	a.State, a.Redriven = hookrelay.RedriveFinished, 990
	assert.Equal(t, "redrive rdv_1: 990/1000 moved (100%), 10 skipped · 16.7/s · finished", progressLine(a, start.Add(time.Minute)))
}

func TestProgressIsPlainWhenPiped(t *testing.T) {
	var buf strings.Builder
	assert.False(t, isTerminal(&buf))
	g := &globals{stderr: &buf, tty: isTerminal(&buf)}
	g.progress(hookrelay.RedriveAudit{ID: "rdv_1", Matched: 4, Redriven: 1, State: hookrelay.RedriveRunning})
	assert.Equal(t, "redrive rdv_1: 1/4 re-enqueued, 0 skipped, running\n", buf.String(), "no escape codes in a pipe")
	buf.Reset()
	g = &globals{stderr: &buf, tty: true, json: true}
	g.progress(hookrelay.RedriveAudit{ID: "rdv_1", Matched: 4, Redriven: 1, State: hookrelay.RedriveRunning})
	assert.NotContains(t, buf.String(), "\033", "nor with --json")
	buf.Reset()
	g = &globals{stderr: &buf, tty: true}
	g.progress(hookrelay.RedriveAudit{ID: "rdv_1", Matched: 4, Redriven: 1, State: hookrelay.RedriveRunning})
	assert.True(t, strings.HasPrefix(buf.String(), "\r\033[K"), "a terminal line is rewritten in place")
}

// A blank --actor, or an --actor-header that is blank or no header name
// at all, is refused before anything is served: the console started with
// it, and then every redrive from it failed for want of an actor (a blank
// one), or every request was refused for want of a header no request can
// carry.
func TestConsoleRefusesABlankActorOrAnUnusableActorHeader(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "missing.db")
	assertUsageError(t, "--actor", "--dsn", dsn, "console", "--actor", "  ")
	for _, h := range []string{" ", "X User", "X-User:", "X-Üser"} {
		assertUsageError(t, "--actor-header", "--dsn", dsn, "console", "--actor-header", h)
	}
	cmd := exec.Command(binary, "--dsn", dsn, "console")
	cmd.Env = append(os.Environ(), "USER=  ")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, string(out))
	assert.Equal(t, exitUsage, ee.ExitCode(), "a blank $USER is no actor either:\n%s", out)
}
