package hookrelay

import (
	"context"
	"time"
)

// Destination is where deliveries for one destination ID go, resolved at
// send time so that a corrected URL or credential takes effect on the next
// attempt. It holds secrets; it is never stored on a delivery record, and its
// String method redacts them.
type Destination struct {
	ID       string
	TenantID string
	// URL is the endpoint. It may contain credentials (user:pass@); they are
	// never logged or recorded.
	URL string
	// Secrets are the active Standard Webhooks signing secrets ("whsec_…").
	// While a destination rotates secrets, every active secret signs.
	Secrets []string
	// Headers are extra request headers, e.g. Authorization. Treated as
	// secret: never logged or recorded.
	Headers map[string]string
	// Policy overrides the client's default policy for new deliveries to
	// this destination when non-nil.
	Policy *Policy
	// MaxConcurrency caps attempts in flight to this destination per worker;
	// zero means the client's PerDestinationConcurrency.
	MaxConcurrency int
	// Timeout bounds one whole request; zero means the sender's default.
	Timeout time.Duration
	// Paused destinations are not sent to; their deliveries wait without
	// spending attempts until the destination is resumed.
	Paused bool
	// Disabled destinations are not sent to either; set when the recipient
	// said it is gone (HTTP 410). DisabledReason says why.
	Disabled       bool
	DisabledReason string
}

// String describes the destination without its URL, secrets or headers.
func (d Destination) String() string {
	return "destination(" + d.ID + ")"
}

// GoString redacts like String so %#v cannot print secrets either.
func (d Destination) GoString() string { return d.String() }

// Destinations is the port that resolves a destination ID at send time.
// Implementations must be safe for concurrent use.
type Destinations interface {
	// Destination returns the destination with the given ID, or an error
	// wrapping ErrDestinationNotFound.
	Destination(ctx context.Context, id string) (Destination, error)
	// Disable marks a destination disabled (the recipient said it is gone).
	// Disabling a disabled destination is a no-op.
	Disable(ctx context.Context, params DisableParams) error
}

// DisableParams are the inputs of Destinations.Disable.
type DisableParams struct {
	ID     string
	Reason string
	Now    time.Time
}

// DestinationEnabler is an optional ability of a Destinations port, found
// by type assertion: re-enabling a destination that was disabled (by a
// recipient's HTTP 410, or by hand) once its owner has corrected it.
type DestinationEnabler interface {
	// Enable clears Disabled and DisabledReason. Enabling an enabled
	// destination is a no-op; an unknown ID wraps ErrDestinationNotFound.
	// Paused is left as it is.
	Enable(ctx context.Context, id string) error
}

// DestinationStatus is what an operator may see of a destination: its ID,
// tenant and switches. It holds no URL, secret or header by construction,
// so a page or a listing built from it cannot leak them.
type DestinationStatus struct {
	ID             string
	TenantID       string
	Paused         bool
	Disabled       bool
	DisabledReason string
}

// DestinationLister is an optional ability of a Destinations port, found
// by type assertion: listing every destination's status, for operator
// pages. Results are ordered by ID.
type DestinationLister interface {
	ListDestinations(ctx context.Context) ([]DestinationStatus, error)
}

// Status returns the destination's operator-visible status.
func (d Destination) Status() DestinationStatus {
	return DestinationStatus{ID: d.ID, TenantID: d.TenantID, Paused: d.Paused, Disabled: d.Disabled, DisabledReason: d.DisabledReason}
}
