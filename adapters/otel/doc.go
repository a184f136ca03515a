// Package hookotel instruments hookrelay with OpenTelemetry: a span per
// attempt, W3C trace context carried to the recipient, and metrics
// equivalent to the Prometheus adapter's.
//
// # Traces
//
// WrapSender puts a span around every Send. The span ("hookrelay.attempt",
// kind client) carries the delivery ID, event ID, tenant, destination, event
// type and attempt number, and — once the send returned — the attempt's
// result (delivered, retryable, permanent), outcome (accepted, rejected,
// unknown), reason and HTTP status, plus the sender's diagnostic detail,
// masked and cut. A result other than delivered sets the span status to
// Error. The span is in the context the wrapped Sender receives, so the
// HTTP sender's request hook can propagate it:
//
//	sender := hookotel.WrapSender(httpSender, hookotel.WithTracerProvider(tp))
//	// with the HTTP adapter: Config{OnRequest: hookotel.InjectTraceContext}
//
// InjectTraceContext writes the traceparent (and tracestate) header, so the
// recipient can join the trace; it always uses W3C Trace Context, whatever
// the global propagator is.
//
// The span never carries the payload, the destination URL, signing secrets
// or headers. Its string attributes are valid UTF-8 (bytes that are not
// become U+FFFD, as in the metrics), so a record from a Ledger that skipped
// CheckStorable cannot make an OTLP exporter drop the batch.
//
// # Metrics
//
// NewMetrics returns an Observer that records, through a MeterProvider:
//
//	hookrelay.attempts                  counter {attempt}: hookrelay.destination.id, hookrelay.decision, hookrelay.reason
//	hookrelay.attempt.duration          histogram, s: hookrelay.destination.id
//	hookrelay.dead_lettered             counter {delivery}: hookrelay.destination.id, hookrelay.reason
//	hookrelay.released                  counter {delivery}: hookrelay.destination.id, hookrelay.reason
//	hookrelay.destinations.disabled     counter {destination}: hookrelay.destination.id, hookrelay.reason
//	hookrelay.redriven                  counter {delivery}: hookrelay.destination.id
//	hookrelay.duplicates                counter {delivery}: hookrelay.destination.id
//	hookrelay.worker.errors             counter {error}: hookrelay.op
//	hookrelay.history.removed           counter {delivery}: hookrelay.destination.id, hookrelay.state
//	hookrelay.attempts.compacted        counter {delivery}: hookrelay.destination.id
//	hookrelay.republished               counter {delivery}: hookrelay.destination.id
//	hookrelay.guard.changes             counter {change}: hookrelay.destination.id, hookrelay.guard.change
//
// and, with MetricsConfig.Stats set, observable gauges read once per
// collection from the ledger:
//
//	hookrelay.deliveries.pending, hookrelay.deliveries.eligible, hookrelay.deliveries.dead   {delivery}
//	hookrelay.deliveries.oldest_eligible.age, hookrelay.deliveries.oldest_dead.age           s
//	hookrelay.destination.circuit_open                                                       1 while open or half-open
//	hookrelay.destination.consecutive_failures                                               {attempt}
//	hookrelay.destination.held, hookrelay.destination.failing                                s
//	hookrelay.ledger_stats.up                                                                1 or 0
//
// hookrelay.decision is the decision after the attempt: delivered,
// retry_scheduled, permanently_rejected or dead_lettered. Attribute values
// are bounded exactly as in the Prometheus adapter: no delivery IDs, and a
// reason that is not a short lower_snake_case word becomes "other".
package hookotel
