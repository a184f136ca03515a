package hookrelay

import (
	"fmt"
	"time"
)

// Kind is what a send attempt means for the delivery: done, try again later,
// or stop trying.
type Kind int

const (
	// KindDelivered means the recipient acknowledged the request according
	// to the integration contract. No redrive is needed for this delivery ID.
	KindDelivered Kind = iota + 1
	// KindRetryable means another attempt may succeed later.
	KindRetryable
	// KindPermanent means more attempts would waste capacity or repeat an
	// invalid request; the delivery is dead-lettered for human review.
	KindPermanent
)

func (k Kind) String() string {
	switch k {
	case KindDelivered:
		return "delivered"
	case KindRetryable:
		return "retryable"
	case KindPermanent:
		return "permanent"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Outcome is what the sender knows about the recipient's side of one attempt.
// It is a diagnostic attached to an attempt, not a delivery state.
type Outcome string

const (
	// OutcomeAccepted: the recipient answered and accepted the request.
	OutcomeAccepted Outcome = "accepted"
	// OutcomeRejected: the recipient answered and did not accept it, or the
	// request provably never reached it (refused connection, DNS failure,
	// blocked address, bad input).
	OutcomeRejected Outcome = "rejected"
	// OutcomeUnknown: the request may have been applied but no answer was
	// seen (timeout or reset after the request was written).
	OutcomeUnknown Outcome = "unknown"
)

// Reasons of the classification table (ClassifyStatus: what a
// recipient's HTTP status means) and of the network outcomes any
// network Sender reports. Reasons decided by the core itself are in
// reasons.go; reasons only the HTTP sender decides (a refused URL or
// address, an unusable secret or header) are in its package, hookhttp.
const (
	ReasonDestinationGone    = "destination_gone"
	ReasonAuthRejected       = "auth_rejected"
	ReasonRedirect           = "redirect_refused"
	ReasonBadRequest         = "bad_request"
	ReasonNotFound           = "not_found"
	ReasonPayloadTooLarge    = "payload_too_large"
	ReasonUnprocessable      = "unprocessable_entity"
	ReasonClientError        = "client_error"
	ReasonRequestTimeout     = "request_timeout"
	ReasonTooEarly           = "too_early"
	ReasonRateLimited        = "rate_limited"
	ReasonServerError        = "server_error"
	ReasonBadGateway         = "bad_gateway"
	ReasonServiceUnavailable = "service_unavailable"
	ReasonGatewayTimeout     = "gateway_timeout"
	ReasonUnexpectedStatus   = "unexpected_status"
	ReasonConnectionRefused  = "connection_refused"
	ReasonDNSFailure         = "dns_failure"
	ReasonTimeout            = "timeout"
	ReasonConnectionReset    = "connection_reset"
	ReasonNetworkError       = "network_error"
)

// Result is a classified send attempt. Senders build one with [Delivered],
// [Retryable], [Unknown] or [Permanent]; the state machine never looks at
// protocol details, only at the Result.
type Result struct {
	Kind    Kind
	Outcome Outcome
	// Reason is a short machine-readable cause (see the Reason constants);
	// empty for a delivered result.
	Reason string
	// RetryAfter is the recipient's requested wait, if it gave one. It is
	// honoured by the backoff but never beyond the policy's MaxDelay.
	RetryAfter time.Duration
	// StatusCode is the HTTP status (or protocol equivalent), 0 if none.
	StatusCode int
	// Detail is a short diagnostic: a truncated response snippet or a
	// sanitized error. It must never contain a secret.
	Detail string
	// DisableDestination asks the core to mark the destination disabled
	// (the recipient said it is gone, e.g. HTTP 410).
	DisableDestination bool
}

// Delivered builds a result for an acknowledged request.
func Delivered(statusCode int) Result {
	return Result{Kind: KindDelivered, Outcome: OutcomeAccepted, StatusCode: statusCode}
}

// Retryable builds a result for a request the recipient answered or that
// provably never reached it, where another attempt may succeed.
func Retryable(reason string) Result {
	return Result{Kind: KindRetryable, Outcome: OutcomeRejected, Reason: reason}
}

// Unknown builds a retryable result whose outcome is unknown: the request
// may have been applied (timeout or reset after it was written).
func Unknown(reason string) Result {
	return Result{Kind: KindRetryable, Outcome: OutcomeUnknown, Reason: reason}
}

// Permanent builds a result for a request that must not be retried
// automatically.
func Permanent(reason string) Result {
	return Result{Kind: KindPermanent, Outcome: OutcomeRejected, Reason: reason}
}

// WithStatus returns r with StatusCode set.
func (r Result) WithStatus(code int) Result { r.StatusCode = code; return r }

// WithRetryAfter returns r with RetryAfter set.
func (r Result) WithRetryAfter(d time.Duration) Result { r.RetryAfter = d; return r }

// WithDetail returns r with Detail set. Detail must not contain a secret.
func (r Result) WithDetail(detail string) Result { r.Detail = detail; return r }

// ClassifyStatus is the default HTTP status → Result table: 2xx is
// delivered; 408, 425, 429 and 5xx are retryable; 410 is permanent and
// disables the destination; 3xx and the other 4xx are permanent, each
// with its reason (Reason… constants above). The table in full, with the
// HTTP sender's input and network rows, is in adapters/http/README.md
// ("Classification").
//
// retryAfter is the parsed Retry-After header (0 if absent); it is attached
// to retryable results only.
func ClassifyStatus(code int, retryAfter time.Duration) Result {
	var r Result
	switch {
	case code >= 200 && code < 300:
		return Delivered(code)
	case code >= 300 && code < 400:
		r = Permanent(ReasonRedirect)
	case code == 408:
		r = Retryable(ReasonRequestTimeout)
	case code == 425:
		r = Retryable(ReasonTooEarly)
	case code == 429:
		r = Retryable(ReasonRateLimited)
	case code == 500:
		r = Retryable(ReasonServerError)
	case code == 502:
		r = Retryable(ReasonBadGateway)
	case code == 503:
		r = Retryable(ReasonServiceUnavailable)
	case code == 504:
		r = Retryable(ReasonGatewayTimeout)
	case code == 410:
		r = Permanent(ReasonDestinationGone)
		r.DisableDestination = true
	case code == 401 || code == 403:
		r = Permanent(ReasonAuthRejected)
	case code == 400:
		r = Permanent(ReasonBadRequest)
	case code == 404:
		r = Permanent(ReasonNotFound)
	case code == 413:
		r = Permanent(ReasonPayloadTooLarge)
	case code == 422:
		r = Permanent(ReasonUnprocessable)
	case code >= 400 && code < 500:
		r = Permanent(ReasonClientError)
	case code >= 500 && code < 600:
		r = Retryable(ReasonServerError)
	default:
		r = Retryable(ReasonUnexpectedStatus)
	}
	r.StatusCode = code
	if r.Kind == KindRetryable {
		r.RetryAfter = retryAfter
	}
	return r
}
