package hookrelay

import (
	"math"
	"math/bits"
	"time"
)

// Random is a source of uniformly distributed numbers in [0, 1). A
// *math/rand/v2.Rand satisfies it. The client serializes calls to it, so an
// implementation need not be safe for concurrent use.
type Random interface {
	Float64() float64
}

// BackoffCeiling is min(BaseDelay × 2^(attempt−1), MaxDelay): the upper bound
// of the full-jitter delay after the given failed attempt (1-based). It never
// overflows, whatever the attempt number.
func BackoffCeiling(p Policy, attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if p.BaseDelay <= 0 {
		return 0
	}
	shift := attempt - 1
	// BaseDelay << shift stays below 2^63 while shift is under the number of
	// leading zero bits; past that point it would overflow and the cap wins.
	if shift >= bits.LeadingZeros64(uint64(p.BaseDelay)) {
		return p.MaxDelay
	}
	return min(p.BaseDelay<<shift, p.MaxDelay)
}

// Backoff is the full-jitter delay after the given failed attempt:
// floor(random × min(BaseDelay × 2^(attempt−1), MaxDelay)). With random fixed
// at 0.5 and a 1 s base it gives 500 ms after attempt 1 and 1 s after
// attempt 2. random outside [0, 1) is clamped; NaN counts as 0.
func Backoff(p Policy, attempt int, random float64) time.Duration {
	if math.IsNaN(random) {
		random = 0 // math.Min and math.Max would pass NaN through
	}
	random = math.Max(0, math.Min(random, math.Nextafter(1, 0)))
	return time.Duration(math.Floor(random * float64(BackoffCeiling(p, attempt))))
}

// NextDelay is the wait before the next attempt after the given failed
// attempt: the full-jitter backoff, raised to the recipient's Retry-After if
// it asked for longer, and never beyond the policy's MaxDelay.
func NextDelay(p Policy, attempt int, random float64, retryAfter time.Duration) time.Duration {
	d := Backoff(p, attempt, random)
	if retryAfter > d {
		d = retryAfter
	}
	return min(d, p.MaxDelay)
}
