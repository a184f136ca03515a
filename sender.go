package hookrelay

import (
	"context"
	"fmt"
	"time"
)

// Sender makes one attempt to deliver a delivery to its destination and
// classifies what happened. It never returns an error: every failure is a
// Result (retryable, unknown or permanent) so that classification happens
// before anything is retried. Send must honour ctx: the worker cancels it
// when the lease is about to expire or on StopAndCancel. Implementations must
// be safe for concurrent use.
type Sender interface {
	Send(ctx context.Context, params SendParams) Result
}

// SendParams are the inputs of Sender.Send.
type SendParams struct {
	// Delivery is the record; Delivery.ID is the idempotency key and
	// Delivery.Attempt the attempt number.
	Delivery Delivery
	// Destination is resolved at send time and carries the URL and secrets.
	Destination Destination
	// Now is the send time from the client's clock (e.g. for signatures).
	Now time.Time
}

// SenderFunc adapts a function to the Sender interface.
type SenderFunc func(ctx context.Context, params SendParams) Result

// Send calls f.
func (f SenderFunc) Send(ctx context.Context, params SendParams) Result { return f(ctx, params) }

// SendTimeouter is an optional interface of a Sender whose attempts are
// bounded by a timeout (the HTTP sender's is). SendTimeout returns the
// longest one Send to dest may take. Client.Prepare refuses to enqueue for
// a destination whose send timeout is not below Config.LeaseFor, since the
// lease would cut every attempt off (an unknown outcome, every time, until
// the delivery is dead). For a Sender without it, the destination's own
// Timeout is checked; a client without a Sender (enqueue only) checks
// nothing.
type SendTimeouter interface {
	SendTimeout(dest Destination) time.Duration
}

// checkLease refuses a destination whose attempts cannot finish inside a
// lease. A client without a Sender only enqueues: the workers' LeaseFor is
// not its own, so it has nothing to check.
func (c *Client) checkLease(dest Destination) error {
	if c.sender == nil {
		return nil
	}
	timeout := dest.Timeout
	if st, ok := c.sender.(SendTimeouter); ok {
		timeout = st.SendTimeout(dest)
	}
	if timeout > 0 && timeout >= c.cfg.LeaseFor {
		return invalid(ErrInvalidConfig, "LeaseFor", fmt.Sprintf(
			"%v must exceed the send timeout %v of destination %s: the lease would cut every attempt off", c.cfg.LeaseFor, timeout, quote(dest.ID)))
	}
	return nil
}
