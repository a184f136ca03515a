package hookhttp

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hookrelay/hookrelay"
)

// ClassifyParams describe one HTTP response for a ClassifyFunc.
type ClassifyParams struct {
	// DestinationID names the destination, so one function can treat
	// destinations differently.
	DestinationID string
	StatusCode    int
	// Header is the response header.
	Header http.Header
	// RetryAfter is the parsed Retry-After header, 0 if absent or invalid.
	RetryAfter time.Duration
	// HasRetryAfter reports whether a valid Retry-After header was present
	// (it may be valid and 0).
	HasRetryAfter bool
}

// ClassifyFunc maps an HTTP response to a Result. The sender fills in
// StatusCode and, when it is empty, Detail (the truncated response
// snippet). Network errors and bad input are classified before a
// ClassifyFunc is consulted; it sees only responses.
type ClassifyFunc func(p ClassifyParams) hookrelay.Result

// DefaultClassify is the default ClassifyFunc: [hookrelay.ClassifyStatus]
// with one addition: a 409 Conflict that carries a Retry-After header is
// retryable with reason conflict_in_progress. That is how the recipient kit
// (package recipient) answers a duplicate that arrives while the first
// request with the same webhook-id is still running; a 409 without
// Retry-After stays permanent (client_error).
//
// To override the table for some destinations, wrap it:
//
//	cfg.Classify = func(p hookhttp.ClassifyParams) hookrelay.Result {
//		if p.DestinationID == "legacy-crm" && p.StatusCode == 404 {
//			return hookrelay.Retryable(hookrelay.ReasonNotFound)
//		}
//		return hookhttp.DefaultClassify(p)
//	}
func DefaultClassify(p ClassifyParams) hookrelay.Result {
	if p.StatusCode == http.StatusConflict && p.HasRetryAfter {
		return hookrelay.Retryable(ReasonConflictInProgress).
			WithStatus(p.StatusCode).WithRetryAfter(p.RetryAfter)
	}
	return hookrelay.ClassifyStatus(p.StatusCode, p.RetryAfter)
}

// maxRetryAfter bounds a parsed Retry-After; the policy's MaxDelay caps it
// much lower anyway.
const maxRetryAfter = time.Duration(math.MaxInt64)

// ParseRetryAfter parses a Retry-After header value: a non-negative number
// of seconds, or an HTTP-date (RFC 9110: IMF-fixdate, RFC 850 or asctime)
// taken relative to now. A date in the past gives 0. ok is false when the
// value is neither form. Huge second counts saturate rather than overflow.
func ParseRetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if isDigits(value) {
		secs, err := strconv.ParseInt(value, 10, 64)
		if err != nil || secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true // only digits: too large to represent
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return d, true
	}
	return 0, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// classifyError maps a failed round trip to a Result by error type, never
// by message. written reports whether the request was fully written
// (httptrace WroteRequest): before that nothing reached the recipient and
// the attempt is plainly retryable; after it the recipient may have applied
// the request and the outcome is unknown.
func classifyError(err error, written bool) hookrelay.Result {
	var blocked *blockedError
	if errors.As(err, &blocked) {
		return hookrelay.Permanent(ReasonDestinationBlocked)
	}
	timeout := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		timeout = true
	}
	if !written {
		var dnsErr *net.DNSError
		switch {
		case errors.As(err, &dnsErr):
			return hookrelay.Retryable(hookrelay.ReasonDNSFailure)
		case errors.Is(err, syscall.ECONNREFUSED):
			return hookrelay.Retryable(hookrelay.ReasonConnectionRefused)
		case timeout:
			return hookrelay.Retryable(hookrelay.ReasonTimeout)
		case errors.Is(err, syscall.ECONNRESET):
			return hookrelay.Retryable(hookrelay.ReasonConnectionReset)
		}
		return hookrelay.Retryable(hookrelay.ReasonNetworkError)
	}
	switch {
	case timeout:
		return hookrelay.Unknown(hookrelay.ReasonTimeout)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return hookrelay.Unknown(hookrelay.ReasonConnectionReset)
	}
	return hookrelay.Unknown(hookrelay.ReasonNetworkError)
}
