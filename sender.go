package hookrelay

import (
	"context"
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
