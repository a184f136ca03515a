package hookrelay

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookrelay/hookrelay/internal/errtext"
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
	// ErrUnsupported reports that the configured Ledger or Destinations
	// lacks an optional ability an operation needs (a DeadLetterLedger, a
	// RedriveLedger, a DestinationPauser, …). The memory and SQL adapters
	// have all of them.
	ErrUnsupported = errors.New("hookrelay: operation not supported by the configured adapter")
	// ErrInvalidRequest reports an operator request (a redrive, a dead-letter
	// listing) that fails validation. The concrete error is a *ValidationError
	// naming the field.
	ErrInvalidRequest = errors.New("hookrelay: invalid request")
	// ErrNotDue reports that a delivery exists and is pending but its next
	// attempt is not due yet. The concrete error is a *NotDueError carrying the
	// due time.
	ErrNotDue = errors.New("hookrelay: delivery not due")
	// ErrRedriveNotFound reports that no redrive audit entry has the given ID.
	ErrRedriveNotFound = errors.New("hookrelay: redrive not found")
	// ErrRedriveRefused reports a redrive the authorization rule refused. The
	// concrete error is a *RedriveRefusedError naming the tenants involved.
	ErrRedriveRefused = errors.New("hookrelay: redrive refused")
)

// ValidationError names the field of a delivery, destination, policy,
// config or operator request that was refused and why. It unwraps to Err:
// ErrInvalidDelivery, ErrInvalidDestination, ErrInvalidPolicy,
// ErrInvalidConfig or ErrInvalidRequest.
type ValidationError struct {
	// Err is the sentinel the error unwraps to: ErrInvalidDelivery,
	// ErrInvalidDestination, ErrInvalidPolicy, ErrInvalidConfig or
	// ErrInvalidRequest.
	Err     error
	Field   string // the offending field, e.g. "MaxAttempts"
	Problem string // what is wrong with it, e.g. "must be at least 1"
}

// invalid returns a *ValidationError: field of the input that err
// (ErrInvalidConfig, …) names was refused because of problem.
func invalid(err error, field, problem string) error {
	return &ValidationError{Err: err, Field: field, Problem: problem}
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("%v: %s %s", e.Err, e.Field, e.Problem)
}

func (e *ValidationError) Unwrap() error { return e.Err }

// NotDueError says when a delivery becomes due. It unwraps to ErrNotDue.
type NotDueError struct {
	ID string
	At time.Time
}

func (e *NotDueError) Error() string {
	return fmt.Sprintf("%v: %s is due at %s", ErrNotDue, e.ID, e.At.Format(time.RFC3339Nano))
}

func (e *NotDueError) Unwrap() error { return ErrNotDue }

// RedriveRefusedError is a refused redrive. It names the actor and the
// tenants the selection spans, and unwraps to ErrRedriveRefused and to the
// Authorizer's own error.
type RedriveRefusedError struct {
	Actor   string
	Tenants []string
	Err     error
}

func (e *RedriveRefusedError) Error() string {
	return fmt.Sprintf("%v: actor %q, selection spans %d tenant(s) [%s]: %v",
		ErrRedriveRefused, e.Actor, len(e.Tenants), strings.Join(e.Tenants, ", "), e.Err)
}

// Unwrap returns ErrRedriveRefused and the Authorizer's error.
func (e *RedriveRefusedError) Unwrap() []error { return []error{ErrRedriveRefused, e.Err} }

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
	if !errtext.Plain(id) { // a caller's over-long or odd ID: quoted, by a prefix
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
