// Package hookprom exports hookrelay's outcomes to Prometheus: a
// hookrelay.Observer that counts attempts and times them, and a
// prometheus.Collector that reads per-destination counts and ages from a
// hookrelay.LedgerStats at scrape time.
//
// A stable total depth can hide one destination that stopped making
// progress, so everything is split by destination, and the gauges include
// the age of the oldest eligible delivery and of the oldest dead-letter
// entry. Labels are bounded: destination IDs, outcomes, reasons and
// operation names — never delivery or event IDs, never free text (a reason
// that is not a short lower_snake_case word is reported as "other").
//
// # Metrics
//
//	hookrelay_attempts_total{destination,decision,reason}
//	    Finished attempts by the decision after them: decision is delivered,
//	    retry_scheduled, permanently_rejected (the recipient refused it for
//	    good) or dead_lettered (budget or delivery window ran out); reason is
//	    the attempt's result reason ("" when delivered).
//	hookrelay_attempt_duration_seconds{destination}
//	    Send latency of every attempt (histogram).
//	hookrelay_dead_lettered_total{destination,reason}
//	    Deliveries dead-lettered, including those with no final attempt
//	    (delivery window passed, destination unknown); reason is the
//	    dead-letter reason (attempts_exhausted, auth_rejected…).
//	hookrelay_released_total{destination,reason}
//	    Deliveries handed back without spending an attempt (destination
//	    paused, disabled or saturated; shutdown).
//	hookrelay_destinations_disabled_total{destination,reason}
//	hookrelay_redriven_total{destination}
//	hookrelay_duplicates_total{destination}
//	hookrelay_worker_errors_total{op}
//	hookrelay_history_removed_total{destination,state}
//	    Records the retention cleaner removed (Config.Retention), by state
//	    (delivered; dead only when the policy allows it).
//	hookrelay_attempts_compacted_total{destination}
//	    Delivered records whose attempt details the cleaner compacted.
//	hookrelay_republished_total{destination}
//	    Pending deliveries published again because their broker message was
//	    presumably lost (Config.RecoverUnpublishedAfter).
//	hookrelay_guard_changes_total{destination,change}
//	    Changes of a destination's recipient guard: destination_held (a
//	    Retry-After hold), circuit_opened, circuit_closed,
//	    destination_guard_cleared (an operator's ClearDestinationGuard).
//
// With Config.Stats set, at each scrape:
//
//	hookrelay_pending_deliveries{destination}
//	hookrelay_eligible_deliveries{destination}      due now and not leased
//	hookrelay_dead_deliveries{destination}
//	hookrelay_oldest_eligible_age_seconds{destination}
//	hookrelay_oldest_dead_age_seconds{destination}
//	hookrelay_circuit_open{destination}             1 while open or half-open
//	hookrelay_consecutive_failures{destination}
//	hookrelay_destination_held_seconds{destination} time left of a Retry-After hold
//	hookrelay_destination_failing_seconds{destination}
//	                                                how long every attempt has failed
//	hookrelay_ledger_stats_up                       0 when the last read failed
//
// The four guard gauges are exported only for rows that carry guard state
// (DestinationStats.Circuit set: the SQL store, or hookrelay.StatsWithGuard).
//
// A destination with nothing pending or dead may have no gauge series.
//
// Wiring:
//
//	reg := prometheus.NewRegistry()
//	metrics, err := hookprom.New(hookprom.Config{Registerer: reg, Stats: store})
//	...
//	client, err := hookrelay.New(hookrelay.Config{..., Observer: metrics})
//
// New refuses to register a second Metrics on the same registry (the
// series would collide). For two clients in one process (two ledgers, say),
// give each its own constant label:
//
//	hookprom.New(hookprom.Config{Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"client": "billing"}, reg), Stats: billingStore})
//	hookprom.New(hookprom.Config{Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"client": "crm"}, reg), Stats: crmStore})
package hookprom

import (
	"context"
	"errors"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/internal/measure"
)

// DefaultLatencyBuckets are the attempt latency histogram's upper bounds in
// seconds, from a fast local recipient to a slow one near a typical 30 s
// request timeout.
var DefaultLatencyBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Config configures Metrics. Zero fields take the documented defaults.
type Config struct {
	// Registerer is where New registers the metrics. Required: this package
	// never registers on the global registry by itself.
	Registerer prometheus.Registerer
	// Stats, when set, is read at every scrape for the per-destination
	// gauges; usually the store that is the client's Ledger.
	Stats hookrelay.LedgerStats
	// Clock gives Now for the stats ages; pass the client's clock
	// (Client.Clock()). Defaults to the wall clock.
	Clock clock.Clock
	// StatsTimeout bounds one Stats read during a scrape. Defaults to 5s.
	StatsTimeout time.Duration
	// LatencyBuckets are the latency histogram's bucket bounds in seconds.
	// Defaults to DefaultLatencyBuckets.
	LatencyBuckets []float64
}

// Metrics is both the hookrelay.Observer that counts events and the
// prometheus.Collector that exposes them. It is safe for concurrent use.
type Metrics struct {
	attempts     *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	deadLettered *prometheus.CounterVec
	released     *prometheus.CounterVec
	disabled     *prometheus.CounterVec
	redriven     *prometheus.CounterVec
	duplicates   *prometheus.CounterVec
	workerErrors *prometheus.CounterVec
	removed      *prometheus.CounterVec
	compacted    *prometheus.CounterVec
	republished  *prometheus.CounterVec
	guard        *prometheus.CounterVec

	stats        hookrelay.LedgerStats
	clock        clock.Clock
	statsTimeout time.Duration
}

var (
	_ hookrelay.Observer   = (*Metrics)(nil)
	_ prometheus.Collector = (*Metrics)(nil)
)

var (
	pendingDesc = prometheus.NewDesc("hookrelay_pending_deliveries",
		"Pending deliveries per destination, due or not, leased or not.", []string{"destination"}, nil)
	eligibleDesc = prometheus.NewDesc("hookrelay_eligible_deliveries",
		"Pending deliveries per destination that are due now and not under a live lease.", []string{"destination"}, nil)
	deadDesc = prometheus.NewDesc("hookrelay_dead_deliveries",
		"Dead-lettered deliveries per destination.", []string{"destination"}, nil)
	oldestEligibleDesc = prometheus.NewDesc("hookrelay_oldest_eligible_age_seconds",
		"How long the oldest eligible delivery of the destination has been due; 0 when none is eligible.", []string{"destination"}, nil)
	oldestDeadDesc = prometheus.NewDesc("hookrelay_oldest_dead_age_seconds",
		"How long ago the oldest dead-letter entry of the destination was dead-lettered; 0 when none is dead.", []string{"destination"}, nil)
	circuitOpenDesc = prometheus.NewDesc("hookrelay_circuit_open",
		"1 while the destination's circuit breaker is open or half-open (probing), 0 when closed.", []string{"destination"}, nil)
	failuresDesc = prometheus.NewDesc("hookrelay_consecutive_failures",
		"Failed attempts to the destination since its last success.", []string{"destination"}, nil)
	heldDesc = prometheus.NewDesc("hookrelay_destination_held_seconds",
		"Time left of a hold the destination asked for with Retry-After; 0 when none.", []string{"destination"}, nil)
	failingDesc = prometheus.NewDesc("hookrelay_destination_failing_seconds",
		"How long every attempt to the destination has failed; 0 when its last attempt succeeded.", []string{"destination"}, nil)
	statsUpDesc = prometheus.NewDesc("hookrelay_ledger_stats_up",
		"1 when the last read of the ledger's stats succeeded, 0 when it failed.", nil, nil)
)

// New builds the metrics and registers them on cfg.Registerer. It returns
// an error when the Registerer is missing or refuses them (for example,
// hookrelay metrics are already registered there).
func New(cfg Config) (*Metrics, error) {
	if cfg.Registerer == nil {
		return nil, errors.New("hookprom: Config.Registerer is required")
	}
	buckets := cfg.LatencyBuckets
	if len(buckets) == 0 {
		buckets = DefaultLatencyBuckets
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &Metrics{
		attempts: counter("hookrelay_attempts_total",
			"Finished attempts by destination, by the decision after them (delivered, retry_scheduled, permanently_rejected, dead_lettered) and by the attempt's reason.",
			"destination", "decision", "reason"),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookrelay_attempt_duration_seconds",
			Help:    "Send latency of each attempt by destination.",
			Buckets: buckets,
		}, []string{"destination"}),
		deadLettered: counter("hookrelay_dead_lettered_total",
			"Deliveries dead-lettered by destination and dead-letter reason.", "destination", "reason"),
		released: counter("hookrelay_released_total",
			"Deliveries handed back without spending an attempt, by destination and reason.", "destination", "reason"),
		disabled: counter("hookrelay_destinations_disabled_total",
			"Destinations disabled because the recipient said they are gone.", "destination", "reason"),
		redriven: counter("hookrelay_redriven_total",
			"Dead deliveries moved back to pending by an operator.", "destination"),
		duplicates: counter("hookrelay_duplicates_total",
			"Deliveries acknowledged without sending because the ledger already said delivered.", "destination"),
		workerErrors: counter("hookrelay_worker_errors_total",
			"Failed port calls of the worker by operation; the affected lease expires and the delivery is claimed again.", "op"),
		removed: counter("hookrelay_history_removed_total",
			"Records the retention cleaner removed, by destination and state.", "destination", "state"),
		compacted: counter("hookrelay_attempts_compacted_total",
			"Delivered records whose attempt details the retention cleaner compacted into a summary.", "destination"),
		republished: counter("hookrelay_republished_total",
			"Pending deliveries published again because their broker message was presumably lost.", "destination"),
		guard: counter("hookrelay_guard_changes_total",
			"Changes of a destination's guard: destination_held (a Retry-After hold), circuit_opened, circuit_closed, destination_guard_cleared (by an operator).", "destination", "change"),
		stats:        cfg.Stats,
		clock:        cfg.Clock,
		statsTimeout: cfg.StatsTimeout,
	}
	if m.clock == nil {
		m.clock = clock.New()
	}
	if m.statsTimeout <= 0 {
		m.statsTimeout = 5 * time.Second
	}
	if err := cfg.Registerer.Register(m); err != nil {
		return nil, err
	}
	return m, nil
}

// Observe implements hookrelay.Observer.
func (m *Metrics) Observe(ctx context.Context, e hookrelay.Event) {
	measure.Dispatch(ctx, e, recorder{m})
}

// recorder adapts Metrics to measure.Recorder; its methods are not part of
// Metrics' public API.
type recorder struct{ m *Metrics }

func (r recorder) Attempt(_ context.Context, dest, decision, reason string) {
	r.m.attempts.WithLabelValues(dest, decision, reason).Inc()
}

func (r recorder) AttemptLatency(_ context.Context, dest string, d time.Duration) {
	r.m.latency.WithLabelValues(dest).Observe(d.Seconds())
}

func (r recorder) DeadLettered(_ context.Context, dest, reason string) {
	r.m.deadLettered.WithLabelValues(dest, reason).Inc()
}

func (r recorder) Released(_ context.Context, dest, reason string) {
	r.m.released.WithLabelValues(dest, reason).Inc()
}

func (r recorder) DestinationDisabled(_ context.Context, dest, reason string) {
	r.m.disabled.WithLabelValues(dest, reason).Inc()
}

func (r recorder) Redriven(_ context.Context, dest string) { r.m.redriven.WithLabelValues(dest).Inc() }

func (r recorder) Duplicate(_ context.Context, dest string) {
	r.m.duplicates.WithLabelValues(dest).Inc()
}

func (r recorder) WorkerError(_ context.Context, op string) {
	r.m.workerErrors.WithLabelValues(op).Inc()
}

func (r recorder) HistoryRemoved(_ context.Context, dest, state string, n int64) {
	r.m.removed.WithLabelValues(dest, state).Add(float64(n))
}

func (r recorder) AttemptsCompacted(_ context.Context, dest string, n int64) {
	r.m.compacted.WithLabelValues(dest).Add(float64(n))
}

func (r recorder) GuardChanged(_ context.Context, dest, change string) {
	r.m.guard.WithLabelValues(dest, change).Inc()
}

func (r recorder) Republished(_ context.Context, dest string) {
	r.m.republished.WithLabelValues(dest).Inc()
}

func (m *Metrics) vectors() []prometheus.Collector {
	return []prometheus.Collector{m.attempts, m.latency, m.deadLettered, m.released, m.disabled, m.redriven, m.duplicates, m.workerErrors,
		m.removed, m.compacted, m.republished, m.guard}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.vectors() {
		c.Describe(ch)
	}
	if m.stats != nil {
		for _, d := range []*prometheus.Desc{pendingDesc, eligibleDesc, deadDesc, oldestEligibleDesc, oldestDeadDesc, statsUpDesc,
			circuitOpenDesc, failuresDesc, heldDesc, failingDesc} {
			ch <- d
		}
	}
}

// Collect implements prometheus.Collector. With Config.Stats set it reads
// the ledger's stats once per scrape; a failed read reports
// hookrelay_ledger_stats_up 0 and no per-destination gauges, rather than
// failing the whole scrape.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.vectors() {
		c.Collect(ch)
	}
	if m.stats == nil {
		return
	}
	now := m.clock.Now()
	stats, err := measure.ReadStats(m.stats, m.clock, m.statsTimeout)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(statsUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(statsUpDesc, prometheus.GaugeValue, 1)
	for _, s := range measure.ByLabel(stats) {
		dest := s.DestinationID
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, dest)
		}
		gauge(pendingDesc, float64(s.Pending))
		gauge(eligibleDesc, float64(s.EligibleNow))
		gauge(deadDesc, float64(s.Dead))
		gauge(oldestEligibleDesc, s.OldestEligibleAge.Seconds())
		gauge(oldestDeadDesc, s.OldestDeadAge.Seconds())
		if g, ok := measure.GuardOf(s, now); ok {
			gauge(circuitOpenDesc, float64(g.CircuitOpen))
			gauge(failuresDesc, float64(g.ConsecutiveFailures))
			gauge(heldDesc, g.HeldSeconds)
			gauge(failingDesc, g.FailingSeconds)
		}
	}
}
