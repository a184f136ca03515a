package hookotel

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/internal/measure"
	"github.com/hookrelay/hookrelay/adapters/internal/redact"
)

// instrumentationName names this package's tracer and meter.
const instrumentationName = "github.com/hookrelay/hookrelay/adapters/otel"

// Attribute keys of the attempt span.
const (
	AttrDeliveryID     = attribute.Key("hookrelay.delivery.id")
	AttrEventID        = attribute.Key("hookrelay.event.id")
	AttrTenantID       = attribute.Key("hookrelay.tenant.id")
	AttrDestinationID  = attribute.Key("hookrelay.destination.id")
	AttrEventType      = attribute.Key("hookrelay.event.type")
	AttrAttempt        = attribute.Key("hookrelay.attempt")
	AttrAttemptResult  = attribute.Key("hookrelay.attempt.result")
	AttrAttemptOutcome = attribute.Key("hookrelay.attempt.outcome")
	AttrReason         = attribute.Key("hookrelay.reason")
	AttrDetail         = attribute.Key("hookrelay.detail")
	AttrHTTPStatus     = attribute.Key("http.response.status_code")
)

// Option configures WrapSender.
type Option func(*traceOptions)

type traceOptions struct {
	tp trace.TracerProvider
}

// WithTracerProvider sets the TracerProvider. Defaults to the global one
// (otel.GetTracerProvider()) at the time WrapSender is called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *traceOptions) { o.tp = tp }
}

// WrapSender returns a Sender that runs next inside a span per attempt (see
// the package documentation for its attributes). It is safe for concurrent
// use when next is.
func WrapSender(next hookrelay.Sender, opts ...Option) hookrelay.Sender {
	o := traceOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.tp == nil {
		o.tp = otel.GetTracerProvider()
	}
	return &tracingSender{next: next, tracer: o.tp.Tracer(instrumentationName)}
}

type tracingSender struct {
	next   hookrelay.Sender
	tracer trace.Tracer
}

// Send implements hookrelay.Sender.
func (s *tracingSender) Send(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
	d := p.Delivery
	ctx, span := s.tracer.Start(ctx, "hookrelay.attempt",
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			AttrDeliveryID.String(recordText(d.ID)),
			AttrEventID.String(recordText(d.EventID)),
			AttrTenantID.String(recordText(d.TenantID)),
			AttrDestinationID.String(measure.Destination(d.DestinationID)),
			AttrEventType.String(recordText(d.EventType)),
			AttrAttempt.Int(d.Attempt),
		))
	defer span.End()

	res := s.next.Send(ctx, p)

	span.SetAttributes(
		AttrAttemptResult.String(res.Kind.String()),
		// accepted, rejected or unknown by contract; anything else "other"
		AttrAttemptOutcome.String(measure.Label(string(res.Outcome))),
	)
	reason := redact.Text(res.Reason, 64)
	if reason != "" {
		span.SetAttributes(AttrReason.String(reason))
	}
	if res.StatusCode != 0 {
		span.SetAttributes(AttrHTTPStatus.Int(res.StatusCode))
	}
	if res.Detail != "" {
		span.SetAttributes(AttrDetail.String(redact.Text(res.Detail, redact.DefaultMax)))
	}
	if res.Kind != hookrelay.KindDelivered {
		span.SetStatus(codes.Error, reason)
	}
	return res
}

// recordText returns a string of the delivery record as an attribute value:
// valid UTF-8 (each run of bytes that is not becomes U+FFFD) of at most
// hookrelay.MaxStoredStringBytes, as every Ledger keeps it. A Ledger that
// skipped CheckStorable must not make an OTLP exporter, which cannot encode
// such a value, drop the whole batch of spans.
func recordText(s string) string { return redact.Cut(s, hookrelay.MaxStoredStringBytes) }

// InjectTraceContext writes the W3C traceparent and tracestate headers of
// the span in ctx into req, so the recipient can join the attempt's trace.
// Its signature matches the HTTP sender's request hook. Without a span in
// ctx it writes nothing.
func InjectTraceContext(ctx context.Context, req *http.Request) {
	if req.Header == nil {
		req.Header = http.Header{}
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
}
