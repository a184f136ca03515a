package hookrelay

// Reasons are short, lower_snake_case, bounded in number (safe as a metric
// label) and never carry a secret. A Result's reason comes from its Sender
// (classify.go has the classification table's; hookhttp adds the HTTP
// sender's own); the reasons below are decided by the core — the state
// machine, the worker, the recipient guard and the broker queues — and
// appear on dead letters, released events and attempts.
const (
	// ReasonAttemptsExhausted: dead-lettered because the policy's
	// MaxAttempts were spent.
	ReasonAttemptsExhausted = "attempts_exhausted"
	// ReasonWindowExpired: dead-lettered because the policy's MaxAge
	// passed (or the next attempt would fall after it).
	ReasonWindowExpired = "delivery_window_expired"
	// ReasonDestinationNotFound: dead-lettered because the delivery's
	// destination does not exist.
	ReasonDestinationNotFound = "destination_not_found"
	// ReasonDestinationDisabled: handed back, no attempt spent, because the
	// destination is disabled; it waits until the destination is enabled.
	ReasonDestinationDisabled = "destination_disabled"
	// ReasonDestinationPaused: handed back, no attempt spent, because the
	// destination is paused.
	ReasonDestinationPaused = "destination_paused"
	// ReasonDestinationSaturated: a delivery claimed ahead was handed
	// back, no attempt spent, because its destination stayed at its
	// concurrency limit while the claim's lease ran half down.
	ReasonDestinationSaturated = "destination_saturated"
	// ReasonWorkerStopped: a delivery claimed ahead was handed back, with
	// no attempt spent, because its worker stopped before a slot freed.
	ReasonWorkerStopped = "worker_stopped"
	// ReasonSenderError: the Sender returned an invalid Result, or the
	// attempt was cut off by the worker's own shutdown (then handed back
	// with no attempt spent).
	ReasonSenderError = "sender_error"
	// ReasonDestinationHeld: handed back, no attempt spent, because the
	// destination asked for a pause (429 or 503 with Retry-After) that
	// holds all its deliveries.
	ReasonDestinationHeld = "destination_held"
	// ReasonDestinationRateLimited: handed back, no attempt spent, because
	// the destination's MaxPerSecond was used up.
	ReasonDestinationRateLimited = "destination_rate_limited"
	// ReasonCircuitOpen: handed back, no attempt spent, because the
	// destination's circuit breaker is open (or another delivery probes it).
	ReasonCircuitOpen = "circuit_open"
	// ReasonDestinationFailing: the destination was disabled because every
	// attempt to it failed for Config.DisableAfterFailingFor.
	ReasonDestinationFailing = "destination_failing"
	// ReasonMalformedEnvelope: a broker queue dead-lettered a message that
	// is not an envelope at all; it has no delivery record to go back to.
	ReasonMalformedEnvelope = "malformed_envelope"
)
