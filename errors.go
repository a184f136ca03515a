package hookrelay

import (
	"errors"
	"fmt"
)

// Sentinel errors returned by the core and translated to by adapters at
// their boundary, so that no driver error type leaks through the public API.
var (
	// ErrNotFound reports that no delivery with the given ID exists.
	ErrNotFound = errors.New("hookrelay: delivery not found")
	// ErrDestinationNotFound reports that a destination ID is unknown.
	ErrDestinationNotFound = errors.New("hookrelay: destination not found")
	// ErrLeaseLost reports that a transition was refused because the caller's
	// lease expired and the delivery was claimed again (or already moved on):
	// a stale holder cannot overwrite a newer attempt.
	ErrLeaseLost = errors.New("hookrelay: lease lost")
	// ErrInvalidState reports a transition that the delivery's current state
	// does not allow, such as marking a dead delivery delivered.
	ErrInvalidState = errors.New("hookrelay: invalid state for transition")
	// ErrInvalidDelivery reports an enqueue request that fails validation.
	// The concrete error is a *ValidationError naming the field.
	ErrInvalidDelivery = errors.New("hookrelay: invalid delivery")
	// ErrInvalidDestination reports a destination a store refuses on Put,
	// such as a malformed EventTypes pattern. The concrete error is a
	// *ValidationError naming the field.
	ErrInvalidDestination = errors.New("hookrelay: invalid destination")
	// ErrInvalidPolicy reports a policy that fails validation. The concrete
	// error is a *ValidationError naming the field.
	ErrInvalidPolicy = errors.New("hookrelay: invalid policy")
	// ErrInvalidConfig reports a Config that fails validation.
	ErrInvalidConfig = errors.New("hookrelay: invalid config")
	// ErrUnknownEnvelopeVersion reports an envelope written by a newer
	// version of the library than this one can read. The message is refused,
	// not dropped: the caller must leave it in its queue.
	ErrUnknownEnvelopeVersion = errors.New("hookrelay: unknown envelope version")
	// ErrAlreadyStarted is returned by Client.Start when the client runs.
	ErrAlreadyStarted = errors.New("hookrelay: client already started")
)

// ValidationError names the field of a delivery, destination, policy or
// config that was refused and why. It unwraps to ErrInvalidDelivery,
// ErrInvalidDestination, ErrInvalidPolicy or ErrInvalidConfig.
type ValidationError struct {
	Kind    error  // one of ErrInvalidDelivery, ErrInvalidDestination, ErrInvalidPolicy, ErrInvalidConfig
	Field   string // the offending field, e.g. "MaxAttempts"
	Problem string // what is wrong with it, e.g. "must be at least 1"
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("%v: %s %s", e.Kind, e.Field, e.Problem)
}

func (e *ValidationError) Unwrap() error { return e.Kind }

// OpError carries the operation and the delivery ID of a failed port call.
// It never carries a secret: adapters put only the delivery ID and a
// sanitized cause in it.
type OpError struct {
	Op         string // the operation, e.g. "ledger.mark_delivered"
	DeliveryID string
	Err        error
}

func (e *OpError) Error() string {
	if e.DeliveryID == "" {
		return fmt.Sprintf("hookrelay: %s: %v", e.Op, e.Err)
	}
	id := e.DeliveryID
	if len(id) > quoteMax { // a caller's over-long ID: name it by a prefix
		id = quote(id)
	}
	return fmt.Sprintf("hookrelay: %s %s: %v", e.Op, id, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

func opErr(op, id string, err error) error {
	if err == nil {
		return nil
	}
	return &OpError{Op: op, DeliveryID: id, Err: err}
}
