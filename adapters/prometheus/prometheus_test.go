package hookprom_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay"
	hookprom "github.com/hookrelay/hookrelay/adapters/prometheus"
	"github.com/hookrelay/hookrelay/internal/scriptedrun"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestScrapeAfterScriptedRunShowsExactCountsAndAges(t *testing.T) {
	reg := prometheus.NewRegistry()
	run := scriptedrun.New()
	m, err := hookprom.New(hookprom.Config{
		Registerer: reg, Stats: run.Store, Clock: run.Clock, LatencyBuckets: []float64{0.1, 0.3},
	})
	if err != nil {
		t.Fatal(err)
	}
	run.Outcomes(t, m, nil) // ends at T0+10s; see scriptedrun.Outcomes for the timeline

	want := `
# HELP hookrelay_attempts_total Finished attempts by destination, by the decision after them (delivered, retry_scheduled, permanently_rejected, dead_lettered) and by the attempt's reason.
# TYPE hookrelay_attempts_total counter
hookrelay_attempts_total{decision="delivered",destination="acme",reason=""} 1
hookrelay_attempts_total{decision="delivered",destination="globex",reason=""} 1
hookrelay_attempts_total{decision="retry_scheduled",destination="globex",reason="service_unavailable"} 1
hookrelay_attempts_total{decision="permanently_rejected",destination="initech",reason="auth_rejected"} 1
hookrelay_attempts_total{decision="dead_lettered",destination="umbrella",reason="server_error"} 1
hookrelay_attempts_total{decision="retry_scheduled",destination="umbrella",reason="server_error"} 1
# HELP hookrelay_dead_lettered_total Deliveries dead-lettered by destination and dead-letter reason.
# TYPE hookrelay_dead_lettered_total counter
hookrelay_dead_lettered_total{destination="initech",reason="auth_rejected"} 1
hookrelay_dead_lettered_total{destination="umbrella",reason="attempts_exhausted"} 1
# HELP hookrelay_attempt_duration_seconds Send latency of each attempt by destination.
# TYPE hookrelay_attempt_duration_seconds histogram
hookrelay_attempt_duration_seconds_bucket{destination="acme",le="0.1"} 1
hookrelay_attempt_duration_seconds_bucket{destination="acme",le="0.3"} 1
hookrelay_attempt_duration_seconds_bucket{destination="acme",le="+Inf"} 1
hookrelay_attempt_duration_seconds_sum{destination="acme"} 0.1
hookrelay_attempt_duration_seconds_count{destination="acme"} 1
hookrelay_attempt_duration_seconds_bucket{destination="globex",le="0.1"} 0
hookrelay_attempt_duration_seconds_bucket{destination="globex",le="0.3"} 2
hookrelay_attempt_duration_seconds_bucket{destination="globex",le="+Inf"} 2
hookrelay_attempt_duration_seconds_sum{destination="globex"} 0.4
hookrelay_attempt_duration_seconds_count{destination="globex"} 2
hookrelay_attempt_duration_seconds_bucket{destination="initech",le="0.1"} 1
hookrelay_attempt_duration_seconds_bucket{destination="initech",le="0.3"} 1
hookrelay_attempt_duration_seconds_bucket{destination="initech",le="+Inf"} 1
hookrelay_attempt_duration_seconds_sum{destination="initech"} 0.05
hookrelay_attempt_duration_seconds_count{destination="initech"} 1
hookrelay_attempt_duration_seconds_bucket{destination="umbrella",le="0.1"} 0
hookrelay_attempt_duration_seconds_bucket{destination="umbrella",le="0.3"} 0
hookrelay_attempt_duration_seconds_bucket{destination="umbrella",le="+Inf"} 2
hookrelay_attempt_duration_seconds_sum{destination="umbrella"} 0.8
hookrelay_attempt_duration_seconds_count{destination="umbrella"} 2
# HELP hookrelay_pending_deliveries Pending deliveries per destination, due or not, leased or not.
# TYPE hookrelay_pending_deliveries gauge
hookrelay_pending_deliveries{destination="globex"} 1
hookrelay_pending_deliveries{destination="initech"} 0
hookrelay_pending_deliveries{destination="umbrella"} 0
# HELP hookrelay_eligible_deliveries Pending deliveries per destination that are due now and not under a live lease.
# TYPE hookrelay_eligible_deliveries gauge
hookrelay_eligible_deliveries{destination="globex"} 1
hookrelay_eligible_deliveries{destination="initech"} 0
hookrelay_eligible_deliveries{destination="umbrella"} 0
# HELP hookrelay_dead_deliveries Dead-lettered deliveries per destination.
# TYPE hookrelay_dead_deliveries gauge
hookrelay_dead_deliveries{destination="globex"} 0
hookrelay_dead_deliveries{destination="initech"} 1
hookrelay_dead_deliveries{destination="umbrella"} 1
# HELP hookrelay_oldest_eligible_age_seconds How long the oldest eligible delivery of the destination has been due; 0 when none is eligible.
# TYPE hookrelay_oldest_eligible_age_seconds gauge
hookrelay_oldest_eligible_age_seconds{destination="globex"} 7.4
hookrelay_oldest_eligible_age_seconds{destination="initech"} 0
hookrelay_oldest_eligible_age_seconds{destination="umbrella"} 0
# HELP hookrelay_oldest_dead_age_seconds How long ago the oldest dead-letter entry of the destination was dead-lettered; 0 when none is dead.
# TYPE hookrelay_oldest_dead_age_seconds gauge
hookrelay_oldest_dead_age_seconds{destination="globex"} 0
hookrelay_oldest_dead_age_seconds{destination="initech"} 9.65
hookrelay_oldest_dead_age_seconds{destination="umbrella"} 7.4
# HELP hookrelay_ledger_stats_up 1 when the last read of the ledger's stats succeeded, 0 when it failed.
# TYPE hookrelay_ledger_stats_up gauge
hookrelay_ledger_stats_up 1
`
	names := []string{
		"hookrelay_attempts_total", "hookrelay_dead_lettered_total", "hookrelay_attempt_duration_seconds",
		"hookrelay_pending_deliveries", "hookrelay_eligible_deliveries", "hookrelay_dead_deliveries",
		"hookrelay_oldest_eligible_age_seconds", "hookrelay_oldest_dead_age_seconds", "hookrelay_ledger_stats_up",
		// Nothing was released, disabled, redriven or duplicated and no
		// port failed: these have no series.
		"hookrelay_released_total", "hookrelay_destinations_disabled_total", "hookrelay_redriven_total",
		"hookrelay_duplicates_total", "hookrelay_worker_errors_total",
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

func TestAgesFollowTheClockAtEachScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	run := scriptedrun.New()
	m, err := hookprom.New(hookprom.Config{Registerer: reg, Stats: run.Store, Clock: run.Clock})
	if err != nil {
		t.Fatal(err)
	}
	run.Outcomes(t, m, nil)
	run.Clock.Add(time.Minute) // one minute later, nothing processed
	want := `
# HELP hookrelay_oldest_dead_age_seconds How long ago the oldest dead-letter entry of the destination was dead-lettered; 0 when none is dead.
# TYPE hookrelay_oldest_dead_age_seconds gauge
hookrelay_oldest_dead_age_seconds{destination="globex"} 0
hookrelay_oldest_dead_age_seconds{destination="initech"} 69.65
hookrelay_oldest_dead_age_seconds{destination="umbrella"} 67.4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hookrelay_oldest_dead_age_seconds"); err != nil {
		t.Error(err)
	}
}

func TestNoSecretOrPayloadInAnyMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	run := scriptedrun.New()
	m, err := hookprom.New(hookprom.Config{Registerer: reg, Stats: run.Store, Clock: run.Clock})
	if err != nil {
		t.Fatal(err)
	}
	run.Leaky(t, m, nil)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range scriptedrun.Secrets {
		if strings.Contains(text.String(), s) {
			t.Errorf("metrics contain %q:\n%s", s, text.String())
		}
	}
	// The leaky run was counted: the test looks at real series.
	for _, series := range []string{
		`hookrelay_attempts_total{decision="permanently_rejected",destination="leaky",reason="auth_rejected"} 1`,
		`hookrelay_worker_errors_total{op="destinations.get"} 1`,
	} {
		if !strings.Contains(text.String(), series) {
			t.Errorf("metrics lack %s:\n%s", series, text.String())
		}
	}
}

func TestFreeTextReasonsAreBoundedToOther(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := hookprom.New(hookprom.Config{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	r := hookrelay.Retryable("upstream said: token tok-123 expired")
	m.Observe(context.Background(), hookrelay.Event{
		Name: hookrelay.EventRetryScheduled, Delivery: hookrelay.Delivery{ID: "whd_x", DestinationID: "acme"}, Result: &r,
	})
	want := `
# HELP hookrelay_attempts_total Finished attempts by destination, by the decision after them (delivered, retry_scheduled, permanently_rejected, dead_lettered) and by the attempt's reason.
# TYPE hookrelay_attempts_total counter
hookrelay_attempts_total{decision="retry_scheduled",destination="acme",reason="other"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hookrelay_attempts_total"); err != nil {
		t.Error(err)
	}
}

type failingStats struct{}

func (failingStats) Stats(context.Context, hookrelay.StatsParams) ([]hookrelay.DestinationStats, error) {
	return nil, errors.New("database is down")
}

func TestFailedStatsReadKeepsTheScrapeAndReportsDown(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := hookprom.New(hookprom.Config{Registerer: reg, Stats: failingStats{}}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP hookrelay_ledger_stats_up 1 when the last read of the ledger's stats succeeded, 0 when it failed.
# TYPE hookrelay_ledger_stats_up gauge
hookrelay_ledger_stats_up 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hookrelay_ledger_stats_up", "hookrelay_pending_deliveries"); err != nil {
		t.Error(err)
	}
}

func TestRegistrationIsExplicit(t *testing.T) {
	if _, err := hookprom.New(hookprom.Config{}); err == nil {
		t.Error("New without a Registerer succeeded; it must never fall back to the global registry")
	}
	reg := prometheus.NewRegistry()
	if _, err := hookprom.New(hookprom.Config{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := hookprom.New(hookprom.Config{Registerer: reg}); err == nil {
		t.Error("registering hookrelay metrics twice on one registry succeeded")
	}
}

// The retention cleaner's batches and the recovery of lost broker messages
// are counted per destination.
func TestRetentionAndRecoveryAreCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := hookprom.New(hookprom.Config{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	delivered := hookrelay.Delivery{DestinationID: "acme", State: hookrelay.StateDelivered}
	m.Observe(ctx, hookrelay.Event{Name: hookrelay.EventHistoryRemoved, Delivery: delivered, Count: 500})
	m.Observe(ctx, hookrelay.Event{Name: hookrelay.EventHistoryRemoved, Delivery: delivered, Count: 20})
	m.Observe(ctx, hookrelay.Event{Name: hookrelay.EventAttemptsCompacted, Delivery: delivered, Count: 7})
	m.Observe(ctx, hookrelay.Event{Name: hookrelay.EventRepublished, Delivery: hookrelay.Delivery{ID: "whd_1", DestinationID: "acme"}})
	want := `
# HELP hookrelay_history_removed_total Records the retention cleaner removed, by destination and state.
# TYPE hookrelay_history_removed_total counter
hookrelay_history_removed_total{destination="acme",state="delivered"} 520
# HELP hookrelay_attempts_compacted_total Delivered records whose attempt details the retention cleaner compacted into a summary.
# TYPE hookrelay_attempts_compacted_total counter
hookrelay_attempts_compacted_total{destination="acme"} 7
# HELP hookrelay_republished_total Pending deliveries published again because their broker message was presumably lost.
# TYPE hookrelay_republished_total counter
hookrelay_republished_total{destination="acme"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"hookrelay_history_removed_total", "hookrelay_attempts_compacted_total", "hookrelay_republished_total"); err != nil {
		t.Error(err)
	}
}

// After a 429 with Retry-After and a circuit that opened, a scrape shows
// the changes counted and each destination's guard as it stands; once the
// probe succeeded, the close is counted and the guard gauges are gone.
func TestScrapeShowsTheGuard(t *testing.T) {
	reg := prometheus.NewRegistry()
	run := scriptedrun.New()
	m, err := hookprom.New(hookprom.Config{Registerer: reg, Stats: run.GuardedStats(), Clock: run.Clock})
	if err != nil {
		t.Fatal(err)
	}
	run.Guards(t, m, nil) // ends at T0+10s; see scriptedrun.Guards for the timeline
	names := []string{"hookrelay_guard_changes_total", "hookrelay_circuit_open", "hookrelay_consecutive_failures",
		"hookrelay_destination_held_seconds", "hookrelay_destination_failing_seconds"}
	want := `
# HELP hookrelay_guard_changes_total Changes of a destination's guard: destination_held (a Retry-After hold), circuit_opened, circuit_closed, destination_guard_cleared (by an operator).
# TYPE hookrelay_guard_changes_total counter
hookrelay_guard_changes_total{change="circuit_opened",destination="globex"} 1
hookrelay_guard_changes_total{change="destination_held",destination="acme"} 1
# HELP hookrelay_circuit_open 1 while the destination's circuit breaker is open or half-open (probing), 0 when closed.
# TYPE hookrelay_circuit_open gauge
hookrelay_circuit_open{destination="acme"} 0
hookrelay_circuit_open{destination="globex"} 1
# HELP hookrelay_consecutive_failures Failed attempts to the destination since its last success.
# TYPE hookrelay_consecutive_failures gauge
hookrelay_consecutive_failures{destination="acme"} 1
hookrelay_consecutive_failures{destination="globex"} 2
# HELP hookrelay_destination_held_seconds Time left of a hold the destination asked for with Retry-After; 0 when none.
# TYPE hookrelay_destination_held_seconds gauge
hookrelay_destination_held_seconds{destination="acme"} 20.1
hookrelay_destination_held_seconds{destination="globex"} 0
# HELP hookrelay_destination_failing_seconds How long every attempt to the destination has failed; 0 when its last attempt succeeded.
# TYPE hookrelay_destination_failing_seconds gauge
hookrelay_destination_failing_seconds{destination="acme"} 9.9
hookrelay_destination_failing_seconds{destination="globex"} 8.8
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	run.GuardsRecover(t) // the hold ended, the probe succeeded: T0+80s
	// Every delivery went and every guard is healthy again: like the
	// backlog gauges, the guard gauges of a destination with nothing to
	// report are gone (an alert on hookrelay_circuit_open == 1 resolves).
	want = `
# HELP hookrelay_guard_changes_total Changes of a destination's guard: destination_held (a Retry-After hold), circuit_opened, circuit_closed, destination_guard_cleared (by an operator).
# TYPE hookrelay_guard_changes_total counter
hookrelay_guard_changes_total{change="circuit_closed",destination="globex"} 1
hookrelay_guard_changes_total{change="circuit_opened",destination="globex"} 1
hookrelay_guard_changes_total{change="destination_held",destination="acme"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

type statsOf []hookrelay.DestinationStats

func (s statsOf) Stats(context.Context, hookrelay.StatsParams) ([]hookrelay.DestinationStats, error) {
	return s, nil
}

// Prometheus refuses a label value that is not UTF-8 by panicking: an
// event or a stats row with such a destination ID (from a Ledger that
// skipped CheckStorable) must neither crash the worker or the scrape nor
// lose the count; it is counted under the ID with U+FFFD for the bad bytes.
func TestDestinationIDsThatAreNotUTF8AreCountedNotPanicked(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := hookprom.New(hookprom.Config{Registerer: reg, Stats: statsOf{{DestinationID: "glo\xffbex", Pending: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(context.Background(), hookrelay.Event{
		Name: hookrelay.EventRedriven, Delivery: hookrelay.Delivery{ID: "whd_x", DestinationID: "ac\xffme"},
	})
	want := `
# HELP hookrelay_redriven_total Dead deliveries moved back to pending by an operator.
# TYPE hookrelay_redriven_total counter
hookrelay_redriven_total{destination="ac\uFFFDme"} 1
# HELP hookrelay_pending_deliveries Pending deliveries per destination, due or not, leased or not.
# TYPE hookrelay_pending_deliveries gauge
hookrelay_pending_deliveries{destination="glo\uFFFDbex"} 2
`
	want = strings.ReplaceAll(want, `\uFFFD`, "\uFFFD")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hookrelay_redriven_total", "hookrelay_pending_deliveries"); err != nil {
		t.Error(err)
	}
}

// Two clients share one registry when each Metrics is registered under its
// own constant label, as the package documentation shows.
func TestTwoClientsShareARegistryUnderTheirOwnLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, name := range []string{"billing", "crm"} {
		m, err := hookprom.New(hookprom.Config{Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"client": name}, reg)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m.Observe(context.Background(), hookrelay.Event{Name: hookrelay.EventRedriven, Delivery: hookrelay.Delivery{DestinationID: "acme"}})
	}
	want := `
# HELP hookrelay_redriven_total Dead deliveries moved back to pending by an operator.
# TYPE hookrelay_redriven_total counter
hookrelay_redriven_total{client="billing",destination="acme"} 1
hookrelay_redriven_total{client="crm",destination="acme"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hookrelay_redriven_total"); err != nil {
		t.Error(err)
	}
}

// Two destination IDs that differ only in bytes that are not UTF-8 have
// one label value: their gauges are one series (counts summed, the oldest
// age), not two with the same labels, which fails the whole scrape.
func TestDestinationIDsWithOneLabelValueAreOneSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := hookprom.New(hookprom.Config{Registerer: reg, Stats: statsOf{
		{DestinationID: "ac\xffme", Pending: 2, Dead: 1, OldestDeadAge: time.Minute},
		{DestinationID: "ac\xfeme", Pending: 3, OldestDeadAge: time.Hour},
	}}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP hookrelay_pending_deliveries Pending deliveries per destination, due or not, leased or not.
# TYPE hookrelay_pending_deliveries gauge
hookrelay_pending_deliveries{destination="ac\uFFFDme"} 5
# HELP hookrelay_oldest_dead_age_seconds How long ago the oldest dead-letter entry of the destination was dead-lettered; 0 when none is dead.
# TYPE hookrelay_oldest_dead_age_seconds gauge
hookrelay_oldest_dead_age_seconds{destination="ac\uFFFDme"} 3600
`
	want = strings.ReplaceAll(want, `\uFFFD`, "\uFFFD")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hookrelay_pending_deliveries", "hookrelay_oldest_dead_age_seconds"); err != nil {
		t.Error(err)
	}
}
