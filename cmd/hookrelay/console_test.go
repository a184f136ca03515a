package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"os/exec"
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

// The standalone console: loopback by default, the actor from --actor,
// shut down cleanly by SIGINT.
func TestConsoleServesTheOperatorPages(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db database) {
		require.Equal(t, 0, db.cli(t, "migrate").code)
		db.open(t)
		ids := db.seed(t, 2)
		cmd := exec.Command(binary, "--dsn", db.dsn, "--table-prefix", db.prefix, "console", "--addr", "127.0.0.1:0", "--actor", "night-shift")
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		lines := bufio.NewScanner(stdout)
		require.True(t, lines.Scan(), "the console says where it listens; stderr: %s", stderr.String())
		m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/`).FindStringSubmatch(lines.Text())
		require.NotNil(t, m, "it binds loopback by default: %s", lines.Text())
		base := "http://" + m[1]
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
