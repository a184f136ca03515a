package hookrelay

import "time"

// Policy is a retry schedule: how many attempts, how far apart, and for how
// long a delivery stays useful. Its Version is stored on every delivery
// record, so a later replay uses the policy the record names.
type Policy struct {
	// Version names this policy; it is stored on each record (at most 64
	// bytes of UTF-8 without a NUL byte).
	// Defaults to "default" in DefaultPolicy.
	Version string
	// MaxAttempts is the total attempt budget, including the first.
	// Defaults to 7.
	MaxAttempts int
	// BaseDelay is the backoff ceiling for the first retry; at least
	// MinRetryDelay (1ms) when MaxAttempts is above 1. Defaults to 1s.
	BaseDelay time.Duration
	// MaxDelay caps every delay, including a recipient's Retry-After.
	// Defaults to 15m.
	MaxDelay time.Duration
	// MaxAge is the delivery window measured from the first enqueue, or from
	// the latest redrive (Delivery.WindowStartsAt): a delivery past it is
	// dead-lettered with reason delivery_window_expired instead of being sent
	// or retried. Zero means no window.
	MaxAge time.Duration
}

// MinRetryDelay is the smallest BaseDelay of a policy that retries
// (MaxAttempts above 1). With no delay at all, a failing recipient would get
// the whole attempt budget at once (a thousand requests in a second);
// Validate refuses such a policy rather than clamping it silently.
const MinRetryDelay = time.Millisecond

// DefaultPolicy returns the defaults: 7 attempts, 1 s base, 15 min cap, full
// jitter, no delivery window, version "default".
func DefaultPolicy() Policy {
	return Policy{
		Version:     "default",
		MaxAttempts: 7,
		BaseDelay:   time.Second,
		MaxDelay:    15 * time.Minute,
	}
}

// Validate reports the first invalid field as a *ValidationError wrapping
// ErrInvalidPolicy, or nil.
func (p Policy) Validate() error {
	switch {
	case p.Version == "":
		return invalid(ErrInvalidPolicy, "Version", "must not be empty")
	case len(p.Version) > 64:
		return invalid(ErrInvalidPolicy, "Version", "must be at most 64 bytes")
	case unstorableText(p.Version) != "":
		// Stored on every record the policy makes.
		return invalid(ErrInvalidPolicy, "Version", unstorableText(p.Version))
	case p.MaxAttempts < 1:
		return invalid(ErrInvalidPolicy, "MaxAttempts", "must be at least 1")
	case p.BaseDelay < 0:
		return invalid(ErrInvalidPolicy, "BaseDelay", "must not be negative")
	case p.MaxDelay < 0:
		return invalid(ErrInvalidPolicy, "MaxDelay", "must not be negative")
	case p.MaxAttempts > 1 && p.BaseDelay < MinRetryDelay:
		return invalid(ErrInvalidPolicy, "BaseDelay", "must be at least 1ms when MaxAttempts is above 1: retries with no delay hammer a failing recipient")
	case p.MaxDelay < p.BaseDelay:
		return invalid(ErrInvalidPolicy, "MaxDelay", "must not be below BaseDelay")
	case p.MaxAge < 0:
		return invalid(ErrInvalidPolicy, "MaxAge", "must not be negative")
	}
	return nil
}

// policyFor returns the policy a record names, falling back to the
// destination's override and then the client default when the version is
// not known to this process.
func (c *Client) policyFor(d Delivery, dest *Destination) Policy {
	if dest != nil && dest.Policy != nil && dest.Policy.Version == d.PolicyVersion {
		return *dest.Policy
	}
	if p, ok := c.policies[d.PolicyVersion]; ok {
		return p
	}
	if dest != nil && dest.Policy != nil && dest.Policy.Validate() == nil {
		return *dest.Policy
	}
	return c.policy
}
