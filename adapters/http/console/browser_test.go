package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/http/console"
)

// chromium finds the Debian chromium binary, or skips naming what to
// install.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("the headless browser test needs Chromium: install the Debian package with `apt-get update && apt-get install -y chromium` (.ci/run does)")
	return ""
}

// browser starts headless Chromium with a fresh profile and returns a tab
// context; everything stops at cleanup.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("no-proxy-server", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
	})
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return ctx
}

// screenshot saves a PNG of the page under $HOOKRELAY_CONSOLE_SCREENSHOTS
// (the README's pictures are made with it set to docs/), if set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("HOOKRELAY_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
}

// An operator's session in a real browser: overview, filter the dead
// letters, open one, plan and start a redrive, stop it, pause a
// destination — checking what the page shows and what the ledger holds.
func TestOperatorSessionInAHeadlessBrowser(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, func(_ *hookrelay.Config, c *console.Config) { c.RecentWindow = 2 * time.Hour })
	payments, shipment, _ := f.seed()
	// The embedding service's authentication, as a proxy would set it.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("X-Operator", "alice")
		f.console.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	run := func(actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, actions...))
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return strings.TrimSpace(s)
	}

	// Overview: the ledger's numbers per destination.
	run(chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#overview")))
	row := text("#dest-accounting")
	assert.Contains(t, row, "prop_mgmt_co")
	assert.Regexp(t, `\b3\s+1h3m0s`, row, "three dead, the oldest an hour and three minutes old")
	assert.Contains(t, text("#dest-shipping"), "1h0m0s")
	assert.Contains(t, row, "3 permanent auth_rejected", "how its recent attempts ended")
	assert.Contains(t, text("#dest-orders"), "1 delivered")
	assert.Contains(t, text("#actor"), "alice")
	screenshot(t, ctx, "console-overview.png")

	// Dead letters, filtered by destination and reason through the form.
	run(chromedp.Navigate(srv.URL+"/dead"), chromedp.WaitVisible(chromedp.CSS("#dead")))
	assert.Contains(t, text("#dead"), "shipment.delivered", "unfiltered, every dead letter")
	run(
		chromedp.SetValue(chromedp.CSS(`input[name="destination"]`), "accounting"),
		chromedp.SetValue(chromedp.CSS(`input[name="reason"]`), "auth_rejected"),
		chromedp.Click(chromedp.CSS("#apply")),
		chromedp.WaitVisible(chromedp.CSS(`input[name="destination"][value="accounting"]`)),
	)
	deadURL, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	assert.Contains(t, deadURL, "destination=accounting", "the filter is in the URL, so it can be shared")
	table := text("#dead")
	for _, id := range payments {
		assert.Contains(t, table, id)
	}
	assert.NotContains(t, table, shipment)
	assert.NotContains(t, table, "shipment.delivered")

	// One delivery: its attempts and payload.
	run(chromedp.Click(chromedp.CSS(`a.delivery`)), chromedp.WaitVisible(chromedp.CSS("#attempts")))
	assert.Equal(t, payments[0], text("#delivery-id"))
	assert.Equal(t, "dead", text("#state"))
	assert.Contains(t, text("#attempts"), "auth_rejected")
	assert.Contains(t, text("#attempts"), "401")
	assert.Contains(t, text("#payload"), `"payment_id":"pay_7319"`)
	screenshot(t, ctx, "console-delivery.png")

	// Plan, then redrive at one per second per destination.
	run(chromedp.Navigate(deadURL), chromedp.WaitVisible(chromedp.CSS("#plan-link")),
		chromedp.Click(chromedp.CSS("#plan-link")), chromedp.WaitVisible(chromedp.CSS("#plan-total")))
	assert.Equal(t, "3", text("#plan-total"))
	assert.Regexp(t, `prop_mgmt_co\s+accounting\s+auth_rejected\s+3`, text("table#plan"))
	assert.Equal(t, hookrelay.StateDead, f.get(payments[0]).State, "the plan changed nothing")
	run(
		chromedp.SetValue(chromedp.CSS("#why"), "accounting rotated its signing secret"),
		chromedp.SetValue(chromedp.CSS("#rate"), "1"),
		chromedp.Click(chromedp.CSS("#start")),
		chromedp.WaitVisible(chromedp.CSS("#redrive-state")),
	)
	url, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.Contains(t, url, "/redrives/rdv_")
	id := url[strings.LastIndex(url, "/")+1:]
	assert.Equal(t, "running", text("#redrive-state"))
	assert.Equal(t, "3", text("#matched"))
	assert.Equal(t, "accounting rotated its signing secret", text("#redrive-reason"))
	assert.Equal(t, "alice", text("#redrive-actor"))
	require.Eventually(t, func() bool { return f.get(payments[0]).State == hookrelay.StatePending }, 10*time.Second, 5*time.Millisecond,
		"the first delivery moves at once; the next waits a second of the mock clock")

	// Stop: the persisted stop control; the redrive honours it at its next slot.
	run(chromedp.Click(chromedp.CSS("#stop")), chromedp.WaitVisible(chromedp.CSS("#notice")))
	assert.Contains(t, text("#notice"), "Stop requested")
	f.clock.Add(time.Second)
	require.Eventually(t, func() bool {
		a, err := f.client.RedriveStatus(context.Background(), id)
		require.NoError(t, err)
		return a.State == hookrelay.RedriveStopped
	}, 10*time.Second, 5*time.Millisecond)
	run(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#redrive-state")))
	assert.Equal(t, "stopped", text("#redrive-state"))
	assert.Equal(t, "1", text("#moved"))
	a, err := f.client.RedriveStatus(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, "alice", a.StopRequestedBy)
	assert.EqualValues(t, 1, a.Redriven)
	assert.Equal(t, hookrelay.StateDead, f.get(payments[1]).State, "stopped before the rest")
	assert.Equal(t, hookrelay.StateDead, f.get(payments[2]).State)
	assert.Equal(t, hookrelay.StateDead, f.get(shipment).State, "never selected")
	run(chromedp.Navigate(srv.URL+"/redrives"), chromedp.WaitVisible(chromedp.CSS("#audit-"+id)))
	assert.Contains(t, text("#audit-"+id), "stopped")

	// Pause a destination.
	run(chromedp.Navigate(srv.URL+"/destinations"), chromedp.WaitVisible(chromedp.CSS("#pause-accounting")),
		chromedp.Click(chromedp.CSS("#pause-accounting")), chromedp.WaitVisible(chromedp.CSS("#notice")))
	assert.Contains(t, text("#notice"), "Destination accounting paused")
	assert.Contains(t, text("#dest-accounting .status"), "paused")
	st, err := f.client.DestinationStatus(context.Background(), "accounting")
	require.NoError(t, err)
	assert.True(t, st.Paused, "the ledger's destination is paused")
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	require.NoError(t, err)
	for _, s := range plantedSecrets {
		assert.NotContains(t, html, s)
	}
}
