package hookotel_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay"
	hookotel "github.com/hookrelay/hookrelay/adapters/otel"
	"github.com/hookrelay/hookrelay/internal/scriptedrun"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newTracing(t *testing.T) (*tracetest.InMemoryExporter, scriptedrun.WrapSender) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return exp, func(s hookrelay.Sender) hookrelay.Sender {
		return hookotel.WrapSender(s, hookotel.WithTracerProvider(tp))
	}
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestOneSpanPerAttemptWithDeliveryAttemptAndOutcome(t *testing.T) {
	exp, wrap := newTracing(t)
	scriptedrun.New().Outcomes(t, nil, wrap)

	spans := exp.GetSpans()
	if len(spans) != 6 {
		t.Fatalf("%d spans, want one per attempt (6)", len(spans))
	}
	byAttempt := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		a := attrs(s)
		byAttempt[fmt.Sprintf("%s#%d", a[hookotel.AttrDestinationID].AsString(), a[hookotel.AttrAttempt].AsInt64())] = s
	}
	globexID := hookrelay.DeliveryID("evt-1", "globex")
	tests := []struct {
		key                     string
		result, outcome, reason string
		status                  int64
		code                    codes.Code
	}{
		{"globex#1", "retryable", "rejected", "service_unavailable", 503, codes.Error},
		{"globex#2", "delivered", "accepted", "", 204, codes.Unset},
		{"initech#1", "permanent", "rejected", "auth_rejected", 401, codes.Error},
		{"umbrella#2", "retryable", "rejected", "server_error", 500, codes.Error},
	}
	for _, tt := range tests {
		s, ok := byAttempt[tt.key]
		if !ok {
			t.Errorf("no span for %s; have %v", tt.key, keys(byAttempt))
			continue
		}
		a := attrs(s)
		if s.Name != "hookrelay.attempt" {
			t.Errorf("%s: span name %q", tt.key, s.Name)
		}
		if got := a[hookotel.AttrAttemptResult].AsString(); got != tt.result {
			t.Errorf("%s: result %q, want %q", tt.key, got, tt.result)
		}
		if got := a[hookotel.AttrAttemptOutcome].AsString(); got != tt.outcome {
			t.Errorf("%s: outcome %q, want %q", tt.key, got, tt.outcome)
		}
		if got := a[hookotel.AttrReason].AsString(); got != tt.reason {
			t.Errorf("%s: reason %q, want %q", tt.key, got, tt.reason)
		}
		if got := a[hookotel.AttrHTTPStatus].AsInt64(); got != tt.status {
			t.Errorf("%s: status %d, want %d", tt.key, got, tt.status)
		}
		if s.Status.Code != tt.code {
			t.Errorf("%s: span status %v, want %v", tt.key, s.Status.Code, tt.code)
		}
		if a[hookotel.AttrEventID].AsString() != "evt-1" || a[hookotel.AttrTenantID].AsString() != "tenant-1" {
			t.Errorf("%s: event/tenant attributes %v", tt.key, a)
		}
	}
	// Both attempts of one delivery carry the same delivery ID.
	for _, k := range []string{"globex#1", "globex#2"} {
		if got := attrs(byAttempt[k])[hookotel.AttrDeliveryID].AsString(); got != globexID {
			t.Errorf("%s: delivery ID %q, want %q", k, got, globexID)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestTraceparentOfTheAttemptSpanReachesTheRequest(t *testing.T) {
	exp, wrap := newTracing(t)
	var header http.Header
	inner := hookrelay.SenderFunc(func(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://recipient.example/hooks", nil)
		if err != nil {
			t.Fatal(err)
		}
		hookotel.InjectTraceContext(ctx, req) // what the HTTP sender's OnRequest hook calls
		header = req.Header
		return hookrelay.Delivered(200)
	})
	wrap(inner).Send(context.Background(), hookrelay.SendParams{
		Delivery: hookrelay.Delivery{ID: "whd_1", DestinationID: "acme", Attempt: 3},
	})
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sc := spans[0].SpanContext
	want := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
	if got := header.Get("traceparent"); got != want {
		t.Errorf("traceparent %q, want the attempt span's %q", got, want)
	}
}

func TestInjectWithoutASpanWritesNothing(t *testing.T) {
	req := &http.Request{}
	hookotel.InjectTraceContext(context.Background(), req)
	if len(req.Header) != 0 {
		t.Errorf("headers %v, want none", req.Header)
	}
}

// points indexes a metric's data points by their attribute values joined
// with "|" in key order.
func points(t *testing.T, rm metricdata.ResourceMetrics, name string) map[string]any {
	t.Helper()
	out := map[string]any{}
	key := func(set attribute.Set) string {
		var vs []string
		for _, kv := range set.ToSlice() {
			vs = append(vs, kv.Value.Emit())
		}
		return strings.Join(vs, "|")
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(p.Attributes)] = p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[key(p.Attributes)] = p.Value
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[key(p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(p.Attributes)] = fmt.Sprintf("count=%d sum=%g buckets=%v", p.Count, p.Sum, p.BucketCounts)
				}
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
			return out
		}
	}
	return out
}

func wantPoints(t *testing.T, rm metricdata.ResourceMetrics, name string, want map[string]any) {
	t.Helper()
	got := points(t, rm, name)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got %v\nwant %v", name, got, want)
	}
}

func TestMetricsAfterScriptedRunShowExactCountsAndAges(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	run := scriptedrun.New()
	m, err := hookotel.NewMetrics(hookotel.MetricsConfig{
		MeterProvider: mp, Stats: run.Store, Clock: run.Clock, LatencyBuckets: []float64{0.1, 0.3},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	run.Outcomes(t, m, nil) // ends at T0+10s; see scriptedrun.Outcomes

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	wantPoints(t, rm, "hookrelay.attempts", map[string]any{
		"delivered|acme|":                            int64(1),
		"delivered|globex|":                          int64(1),
		"retry_scheduled|globex|service_unavailable": int64(1),
		"permanently_rejected|initech|auth_rejected": int64(1),
		"retry_scheduled|umbrella|server_error":      int64(1),
		"dead_lettered|umbrella|server_error":        int64(1),
	})
	wantPoints(t, rm, "hookrelay.dead_lettered", map[string]any{
		"initech|auth_rejected":       int64(1),
		"umbrella|attempts_exhausted": int64(1),
	})
	wantPoints(t, rm, "hookrelay.attempt.duration", map[string]any{
		"acme":     "count=1 sum=0.1 buckets=[1 0 0]",
		"globex":   "count=2 sum=0.4 buckets=[0 2 0]",
		"initech":  "count=1 sum=0.05 buckets=[1 0 0]",
		"umbrella": "count=2 sum=0.8 buckets=[0 0 2]",
	})
	wantPoints(t, rm, "hookrelay.deliveries.pending", map[string]any{"globex": int64(1), "initech": int64(0), "umbrella": int64(0)})
	wantPoints(t, rm, "hookrelay.deliveries.eligible", map[string]any{"globex": int64(1), "initech": int64(0), "umbrella": int64(0)})
	wantPoints(t, rm, "hookrelay.deliveries.dead", map[string]any{"globex": int64(0), "initech": int64(1), "umbrella": int64(1)})
	wantPoints(t, rm, "hookrelay.deliveries.oldest_eligible.age", map[string]any{"globex": 7.4, "initech": 0.0, "umbrella": 0.0})
	wantPoints(t, rm, "hookrelay.deliveries.oldest_dead.age", map[string]any{"globex": 0.0, "initech": 9.65, "umbrella": 7.4})
	wantPoints(t, rm, "hookrelay.ledger_stats.up", map[string]any{"": int64(1)})
	wantPoints(t, rm, "hookrelay.released", map[string]any{})
	wantPoints(t, rm, "hookrelay.worker.errors", map[string]any{})

	// After Close the gauges are no longer read.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	run.Clock.Add(time.Minute)
	rm = metricdata.ResourceMetrics{}
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	wantPoints(t, rm, "hookrelay.deliveries.oldest_dead.age", map[string]any{})
}

func TestNoSecretOrPayloadInAnySpanOrMetric(t *testing.T) {
	exp, wrap := newTracing(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	run := scriptedrun.New()
	m, err := hookotel.NewMetrics(hookotel.MetricsConfig{MeterProvider: mp, Stats: run.Store, Clock: run.Clock})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	run.Leaky(t, m, wrap)

	var out strings.Builder
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for _, s := range spans {
		fmt.Fprintf(&out, "%s %v %v %v %v\n", s.Name, s.Attributes, s.Status, s.Events, s.Links)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			fmt.Fprintf(&out, "%s %+v\n", mt.Name, mt.Data)
		}
	}
	text := out.String()
	for _, s := range scriptedrun.Secrets {
		if strings.Contains(text, s) {
			t.Errorf("telemetry contains %q:\n%s", s, text)
		}
	}
	// The leaked detail is on the spans, masked: the test looks at real output.
	if n := strings.Count(text, "[REDACTED]"); n < 2 {
		t.Errorf("%d masked values in spans, want the detail of both attempts:\n%s", n, text)
	}
	if !strings.Contains(text, "destinations.get") {
		t.Errorf("the worker error was not counted:\n%s", text)
	}
}

// After a 429 with Retry-After and a circuit that opened, a collection
// shows the changes counted and each destination's guard as it stands;
// once the probe succeeded, the close is counted and the guard gauges of
// destinations with nothing to report are gone.
func TestMetricsShowTheGuard(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	run := scriptedrun.New()
	m, err := hookotel.NewMetrics(hookotel.MetricsConfig{MeterProvider: mp, Stats: run.GuardedStats(), Clock: run.Clock})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	run.Guards(t, m, nil) // ends at T0+10s; see scriptedrun.Guards

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	wantPoints(t, rm, "hookrelay.guard.changes", map[string]any{
		"acme|destination_held": int64(1),
		"globex|circuit_opened": int64(1),
	})
	wantPoints(t, rm, "hookrelay.destination.circuit_open", map[string]any{"acme": int64(0), "globex": int64(1)})
	wantPoints(t, rm, "hookrelay.destination.consecutive_failures", map[string]any{"acme": int64(1), "globex": int64(2)})
	wantPoints(t, rm, "hookrelay.destination.held", map[string]any{"acme": 20.1, "globex": 0.0})
	wantPoints(t, rm, "hookrelay.destination.failing", map[string]any{"acme": 9.9, "globex": 8.8})

	run.GuardsRecover(t) // T0+80s
	rm = metricdata.ResourceMetrics{}
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	wantPoints(t, rm, "hookrelay.guard.changes", map[string]any{
		"acme|destination_held": int64(1),
		"globex|circuit_closed": int64(1),
		"globex|circuit_opened": int64(1),
	})
	wantPoints(t, rm, "hookrelay.destination.circuit_open", map[string]any{})
	wantPoints(t, rm, "hookrelay.destination.consecutive_failures", map[string]any{})
}

type statsOf []hookrelay.DestinationStats

func (s statsOf) Stats(context.Context, hookrelay.StatsParams) ([]hookrelay.DestinationStats, error) {
	return s, nil
}

// An OTLP exporter cannot encode an attribute value that is not UTF-8 and
// drops the whole export: a destination ID with such bytes (from a Ledger
// that skipped CheckStorable) is recorded with U+FFFD for them instead.
func TestDestinationIDsThatAreNotUTF8AreRecordedAsUTF8(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := hookotel.NewMetrics(hookotel.MetricsConfig{MeterProvider: mp, Stats: statsOf{{DestinationID: "glo\xffbex", Pending: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Observe(context.Background(), hookrelay.Event{
		Name: hookrelay.EventRedriven, Delivery: hookrelay.Delivery{ID: "whd_x", DestinationID: "ac\xffme"},
	})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	wantPoints(t, rm, "hookrelay.redriven", map[string]any{"ac\uFFFDme": int64(1)})
	wantPoints(t, rm, "hookrelay.deliveries.pending", map[string]any{"glo\uFFFDbex": int64(2)})
}

// The attempt span's identifying attributes come from the delivery record
// as the Ledger returned it: one that is not UTF-8 (a Ledger that skipped
// CheckStorable) is recorded with U+FFFD for its bad bytes, as the metrics
// do, so an OTLP exporter does not drop the whole batch of spans.
func TestSpanAttributesThatAreNotUTF8AreRecordedAsUTF8(t *testing.T) {
	exp, wrap := newTracing(t)
	inner := hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
		return hookrelay.Delivered(200)
	})
	wrap(inner).Send(context.Background(), hookrelay.SendParams{
		Delivery: hookrelay.Delivery{
			ID: "whd_\xff1", EventID: "evt\xfe", TenantID: "ten\xc3", DestinationID: "ac\xffme", EventType: "order.\xffpaid", Attempt: 1,
		},
	})
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	a := attrs(spans[0])
	want := map[attribute.Key]string{
		hookotel.AttrDeliveryID:    "whd_\uFFFD1",
		hookotel.AttrEventID:       "evt\uFFFD",
		hookotel.AttrTenantID:      "ten\uFFFD",
		hookotel.AttrDestinationID: "ac\uFFFDme",
		hookotel.AttrEventType:     "order.\uFFFDpaid",
	}
	for k, w := range want {
		if got := a[k].AsString(); got != w {
			t.Errorf("%s = %q, want %q", k, got, w)
		}
	}
}

// A Sender's Result.Outcome is one of three words by contract; one that
// breaks it (free text, a secret, bytes that are not UTF-8, any length)
// is recorded as "other", as a reason label is, not copied onto the span.
func TestSpanOutcomeIsBounded(t *testing.T) {
	exp, wrap := newTracing(t)
	inner := hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
		res := hookrelay.Retryable(hookrelay.ReasonServerError)
		res.Outcome = hookrelay.Outcome("failed posting to https://u:OutcomePw1@h.invalid/ \xff" + strings.Repeat("x", 10<<10))
		return res
	})
	wrap(inner).Send(context.Background(), hookrelay.SendParams{Delivery: hookrelay.Delivery{ID: "whd_1", DestinationID: "acme", Attempt: 1}})
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	if got := attrs(spans[0])[hookotel.AttrAttemptOutcome].AsString(); got != "other" {
		t.Errorf("outcome %.60q, want other", got)
	}
}
