package hookotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/internal/measure"
)

// Attribute keys of the metrics (besides AttrDestinationID and AttrReason).
const (
	// AttrDecision is the decision after an attempt: delivered,
	// retry_scheduled, permanently_rejected or dead_lettered.
	AttrDecision = attribute.Key("hookrelay.decision")
	// AttrOp is the core operation of a worker error.
	AttrOp = attribute.Key("hookrelay.op")
	// AttrState is the state of records the retention cleaner removed.
	AttrState = attribute.Key("hookrelay.state")
	// AttrChange is a change of a destination's guard: destination_held,
	// circuit_opened, circuit_closed or destination_guard_cleared.
	AttrChange = attribute.Key("hookrelay.guard.change")
)

// DefaultLatencyBuckets are the attempt duration histogram's bucket bounds
// in seconds, the same as the Prometheus adapter's.
var DefaultLatencyBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// MetricsConfig configures Metrics. Zero fields take the documented
// defaults.
type MetricsConfig struct {
	// MeterProvider creates the instruments. Defaults to the global one
	// (otel.GetMeterProvider()).
	MeterProvider metric.MeterProvider
	// Stats, when set, is read once per collection for the observable
	// gauges; usually the store that is the client's Ledger.
	Stats hookrelay.LedgerStats
	// Clock gives Now for the stats ages; pass the client's clock
	// (Client.Clock()). Defaults to the wall clock.
	Clock clock.Clock
	// StatsTimeout bounds one Stats read. Defaults to 5s.
	StatsTimeout time.Duration
	// LatencyBuckets are the duration histogram's bucket bounds in seconds.
	// Defaults to DefaultLatencyBuckets.
	LatencyBuckets []float64
}

// Metrics is a hookrelay.Observer that records OpenTelemetry metrics. It is
// safe for concurrent use. Close unregisters the stats callback.
type Metrics struct {
	attempts, deadLettered, released, disabled, redriven, duplicates, workerErrors metric.Int64Counter
	removed, compacted, republished, guard                                         metric.Int64Counter
	latency                                                                        metric.Float64Histogram

	mu           sync.Mutex
	registration metric.Registration // nil without Stats or once closed
}

var _ hookrelay.Observer = (*Metrics)(nil)

// NewMetrics creates the instruments (and, with cfg.Stats, the observable
// gauges and their callback).
func NewMetrics(cfg MetricsConfig) (*Metrics, error) {
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	buckets := cfg.LatencyBuckets
	if len(buckets) == 0 {
		buckets = DefaultLatencyBuckets
	}
	meter := mp.Meter(instrumentationName)
	m := &Metrics{}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	m.attempts = counter("hookrelay.attempts", "{attempt}",
		"Finished attempts by destination, by the decision after them and by the attempt's reason.")
	m.deadLettered = counter("hookrelay.dead_lettered", "{delivery}", "Deliveries dead-lettered by destination and dead-letter reason.")
	m.released = counter("hookrelay.released", "{delivery}", "Deliveries handed back without spending an attempt, by destination and reason.")
	m.disabled = counter("hookrelay.destinations.disabled", "{destination}", "Destinations disabled because the recipient said they are gone.")
	m.redriven = counter("hookrelay.redriven", "{delivery}", "Dead deliveries moved back to pending by an operator.")
	m.duplicates = counter("hookrelay.duplicates", "{delivery}", "Deliveries acknowledged without sending because the ledger already said delivered.")
	m.workerErrors = counter("hookrelay.worker.errors", "{error}", "Failed port calls of the worker by operation.")
	m.removed = counter("hookrelay.history.removed", "{delivery}", "Records the retention cleaner removed, by destination and state.")
	m.compacted = counter("hookrelay.attempts.compacted", "{delivery}", "Delivered records whose attempt details the retention cleaner compacted.")
	m.republished = counter("hookrelay.republished", "{delivery}", "Pending deliveries published again because their broker message was presumably lost.")
	m.guard = counter("hookrelay.guard.changes", "{change}", "Changes of a destination's guard: destination_held, circuit_opened, circuit_closed, destination_guard_cleared.")
	var err error
	m.latency, err = meter.Float64Histogram("hookrelay.attempt.duration", metric.WithUnit("s"),
		metric.WithDescription("Send latency of each attempt by destination."),
		metric.WithExplicitBucketBoundaries(buckets...))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Stats != nil {
		if err := m.observeStats(meter, cfg); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observeStats(meter metric.Meter, cfg MetricsConfig) error {
	clk := cfg.Clock
	if clk == nil {
		clk = clock.New()
	}
	timeout := cfg.StatsTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	var errs []error
	intGauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	ageGauge := func(name, desc string) metric.Float64ObservableGauge {
		g, err := meter.Float64ObservableGauge(name, metric.WithUnit("s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	pending := intGauge("hookrelay.deliveries.pending", "{delivery}", "Pending deliveries per destination, due or not, leased or not.")
	eligible := intGauge("hookrelay.deliveries.eligible", "{delivery}", "Pending deliveries per destination that are due now and not under a live lease.")
	dead := intGauge("hookrelay.deliveries.dead", "{delivery}", "Dead-lettered deliveries per destination.")
	oldestEligible := ageGauge("hookrelay.deliveries.oldest_eligible.age", "How long the oldest eligible delivery of the destination has been due.")
	oldestDead := ageGauge("hookrelay.deliveries.oldest_dead.age", "How long ago the oldest dead-letter entry of the destination was dead-lettered.")
	circuitOpen := intGauge("hookrelay.destination.circuit_open", "1", "1 while the destination's circuit breaker is open or half-open, 0 when closed.")
	failures := intGauge("hookrelay.destination.consecutive_failures", "{attempt}", "Failed attempts to the destination since its last success.")
	held := ageGauge("hookrelay.destination.held", "Time left of a hold the destination asked for with Retry-After.")
	failing := ageGauge("hookrelay.destination.failing", "How long every attempt to the destination has failed.")
	up := intGauge("hookrelay.ledger_stats.up", "1", "1 when the last read of the ledger's stats succeeded, 0 when it failed.")
	if err := errors.Join(errs...); err != nil {
		return err
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		stats, err := measure.ReadStats(cfg.Stats, clk, timeout)
		if err != nil {
			o.ObserveInt64(up, 0)
			return nil // reported through the up gauge; the other instruments still export
		}
		o.ObserveInt64(up, 1)
		for _, s := range measure.ByLabel(stats) {
			attrs := metric.WithAttributeSet(attribute.NewSet(AttrDestinationID.String(s.DestinationID)))
			o.ObserveInt64(pending, s.Pending, attrs)
			o.ObserveInt64(eligible, s.EligibleNow, attrs)
			o.ObserveInt64(dead, s.Dead, attrs)
			o.ObserveFloat64(oldestEligible, s.OldestEligibleAge.Seconds(), attrs)
			o.ObserveFloat64(oldestDead, s.OldestDeadAge.Seconds(), attrs)
			if g, ok := measure.GuardOf(s, clk.Now()); ok {
				o.ObserveInt64(circuitOpen, g.CircuitOpen, attrs)
				o.ObserveInt64(failures, g.ConsecutiveFailures, attrs)
				o.ObserveFloat64(held, g.HeldSeconds, attrs)
				o.ObserveFloat64(failing, g.FailingSeconds, attrs)
			}
		}
		return nil
	}, pending, eligible, dead, oldestEligible, oldestDead, up, circuitOpen, failures, held, failing)
	if err != nil {
		return err
	}
	m.registration = reg
	return nil
}

// Close unregisters the stats callback; the counters stay usable. Closing
// twice is harmless.
func (m *Metrics) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.registration == nil {
		return nil
	}
	err := m.registration.Unregister()
	m.registration = nil
	return err
}

// Observe implements hookrelay.Observer.
func (m *Metrics) Observe(ctx context.Context, e hookrelay.Event) {
	measure.Dispatch(ctx, e, recorder{m})
}

// recorder adapts Metrics to measure.Recorder.
type recorder struct{ m *Metrics }

func dest(id string) attribute.KeyValue { return AttrDestinationID.String(id) }

func (r recorder) Attempt(ctx context.Context, d, decision, reason string) {
	r.m.attempts.Add(ctx, 1, metric.WithAttributes(dest(d), AttrDecision.String(decision), AttrReason.String(reason)))
}

func (r recorder) AttemptLatency(ctx context.Context, d string, latency time.Duration) {
	r.m.latency.Record(ctx, latency.Seconds(), metric.WithAttributes(dest(d)))
}

func (r recorder) DeadLettered(ctx context.Context, d, reason string) {
	r.m.deadLettered.Add(ctx, 1, metric.WithAttributes(dest(d), AttrReason.String(reason)))
}

func (r recorder) Released(ctx context.Context, d, reason string) {
	r.m.released.Add(ctx, 1, metric.WithAttributes(dest(d), AttrReason.String(reason)))
}

func (r recorder) DestinationDisabled(ctx context.Context, d, reason string) {
	r.m.disabled.Add(ctx, 1, metric.WithAttributes(dest(d), AttrReason.String(reason)))
}

func (r recorder) Redriven(ctx context.Context, d string) {
	r.m.redriven.Add(ctx, 1, metric.WithAttributes(dest(d)))
}

func (r recorder) Duplicate(ctx context.Context, d string) {
	r.m.duplicates.Add(ctx, 1, metric.WithAttributes(dest(d)))
}

func (r recorder) WorkerError(ctx context.Context, op string) {
	r.m.workerErrors.Add(ctx, 1, metric.WithAttributes(AttrOp.String(op)))
}

func (r recorder) HistoryRemoved(ctx context.Context, d, state string, n int64) {
	r.m.removed.Add(ctx, n, metric.WithAttributes(dest(d), AttrState.String(state)))
}

func (r recorder) AttemptsCompacted(ctx context.Context, d string, n int64) {
	r.m.compacted.Add(ctx, n, metric.WithAttributes(dest(d)))
}

func (r recorder) GuardChanged(ctx context.Context, d, change string) {
	r.m.guard.Add(ctx, 1, metric.WithAttributes(dest(d), AttrChange.String(change)))
}

func (r recorder) Republished(ctx context.Context, d string) {
	r.m.republished.Add(ctx, 1, metric.WithAttributes(dest(d)))
}
