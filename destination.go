package hookrelay

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/hookrelay/hookrelay/internal/reqheader"
)

// Destination is where deliveries for one destination ID go, resolved at send
// time so that a corrected URL or credential takes effect on the next attempt
// (a running worker keeps what it read for Config.DestinationCacheTTL, 1s by
// default). It holds secrets; it is never stored on a delivery record, and its
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
	// secret: never logged or recorded. Stores refuse on Put
	// (ValidateHeaders) the connection-specific headers, which describe one
	// connection the sender manages and which HTTP/2 forbids: Connection,
	// Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade, and TE but
	// "TE: trailers". They refuse Host as well: a request goes to the
	// URL's host, the one the SSRF guard checks, and a Host header is not
	// a way to name another; put the host in URL. The HTTP sender drops
	// such a header from a destination stored before stores refused it.
	Headers map[string]string
	// Policy overrides the client's default policy for new deliveries to
	// this destination when non-nil.
	Policy *Policy
	// MaxConcurrency caps attempts in flight to this destination per worker;
	// zero means the client's PerDestinationConcurrency. Stores refuse a
	// negative cap and one over math.MaxInt32 on Put (ValidateLimits). A worker learns it
	// when an attempt looks the destination up: attempts it started before
	// (up to PerDestinationConcurrency, after a start or once the limit was
	// lowered) that would exceed it wait for a free slot of the
	// destination, without sending or spending an attempt.
	MaxConcurrency int
	// MaxPerSecond caps sends to this destination per second, across every
	// worker sharing the store (a token bucket kept in the store through
	// DestinationGuard, refilling at this rate up to one second's worth);
	// a delivery over it waits without spending an attempt. Zero means the
	// client's DefaultMaxPerSecond; fractions are allowed (0.5: one send
	// every two seconds).
	MaxPerSecond float64
	// Timeout bounds one whole request; zero means the sender's default.
	Timeout time.Duration
	// Paused destinations are not sent to; their deliveries wait without
	// spending attempts until the destination is resumed.
	Paused bool
	// Disabled destinations are not sent to either; set when the recipient
	// said it is gone (HTTP 410). DisabledReason says why.
	Disabled       bool
	DisabledReason string
	// EventTypes are the event types this destination subscribes to, for
	// Client.Publish: exact types ("lease.payment_recorded"), prefixes
	// ("lease.*": every type under "lease.") or "*" (every type); see
	// MatchEventType. Empty means every type. Stores refuse a malformed
	// pattern on Put (ValidateEventTypes). Enqueue, which names the
	// destination itself, ignores it.
	EventTypes []string
}

// ValidateHeaders checks a destination's Headers, as destination stores
// do on Put (through ValidateLimits): it refuses the names the sender
// never sends (see Destination.Headers), matched without regard to case,
// and a name or value that is not valid UTF-8 or holds a NUL byte (a store
// keeping text would change it). It returns a *ValidationError (unwrapping
// to ErrInvalidDestination) whose Field names the header, e.g.
// `Headers["Connection"]`, and never holds a header's value.
func ValidateHeaders(headers map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		problem := reqheader.Unsendable(name, headers[name])
		if p := unstorableText(name); p != "" {
			problem = "name " + p
		} else if p := unstorableText(headers[name]); p != "" {
			problem = "value " + p
		}
		if problem != "" {
			return invalid(ErrInvalidDestination, fmt.Sprintf("Headers[%s]", quote(name)), problem)
		}
	}
	return nil
}

// String describes the destination without its URL, secrets or headers.
func (d Destination) String() string {
	return "destination(" + d.ID + ")"
}

// GoString redacts like String so %#v cannot print secrets either.
func (d Destination) GoString() string { return d.String() }

// Format writes String for every verb: String and GoString alone leave
// %d, %t and the like printing the fields, secrets included, one by one.
func (d Destination) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, d.String()) }

// DestinationFinder is an optional ability of Destinations (the memory and
// SQL stores have it): list destinations by tenant and event type.
// Client.Publish needs it to fan an event out and returns ErrUnsupported
// without it. Implementations must be safe for concurrent use.
type DestinationFinder interface {
	// DestinationsFor returns the destinations selected by params, paused
	// and disabled ones included (with their flags), ordered by ID; none is
	// an empty result, not an error. A store should find a tenant's
	// destinations without reading every tenant's (an index on the tenant).
	DestinationsFor(ctx context.Context, params DestinationsForParams) ([]Destination, error)
}

// DestinationBatchReader is an optional ability of Destinations (the memory
// and SQL stores have it), found with As: read many destinations by ID in
// one call. Client.Prepare (so Enqueue and EnqueueMany too) uses it when its events name more than one destination, so an
// EnqueueMany fanned out to N destinations reads them in one round trip
// instead of N. Without it each destination is read with Destination.
// Implementations must be safe for concurrent use.
type DestinationBatchReader interface {
	// DestinationsByID returns the destinations whose IDs are among ids,
	// each once, in any order, paused and disabled ones included (with
	// their flags), every field as Destination returns it. An ID matches
	// only the destination with exactly that ID, byte for byte. An ID no
	// destination has is left out, not an error; none found is an empty
	// result. ids may repeat an ID and may be many (a store splits a long
	// list into several reads as it must).
	DestinationsByID(ctx context.Context, ids []string) ([]Destination, error)
}

// DestinationsForParams are the inputs of DestinationFinder.DestinationsFor.
type DestinationsForParams struct {
	// TenantID selects the destinations whose TenantID is exactly this;
	// empty selects every destination, with or without a tenant.
	TenantID string
	// EventType, when not empty, keeps only the destinations subscribed to
	// it (Destination.SubscribesTo): what a Publish of that type would
	// reach.
	EventType string
}

// DisableParams are the inputs of Destinations.Disable.
type DisableParams struct {
	ID     string
	Reason string
	Now    time.Time
}

// DestinationEnabler is an optional ability of a Destinations port, found with
// As (through wrappers that Unwrap): re-enabling a destination that was
// disabled (by a recipient's HTTP 410, or by hand) once its owner has corrected
// it.
type DestinationEnabler interface {
	// Enable clears Disabled and DisabledReason. Enabling an enabled
	// destination is a no-op; an unknown ID wraps ErrDestinationNotFound.
	// Paused is left as it is.
	Enable(ctx context.Context, id string) error
}

// DestinationLister is an optional ability of a Destinations port, found with
// As (through wrappers that Unwrap): listing every destination's status, for
// operator pages. Results are ordered by ID.
type DestinationLister interface {
	ListDestinations(ctx context.Context) ([]DestinationStatus, error)
}

// Status returns the destination's operator-visible status.
func (d Destination) Status() DestinationStatus {
	return DestinationStatus{ID: d.ID, TenantID: d.TenantID, Paused: d.Paused, Disabled: d.Disabled, DisabledReason: d.DisabledReason}
}

// DestinationPauser is an optional ability of a Destinations port, found with
// As (through wrappers that Unwrap): pausing and resuming a destination. A
// paused destination's deliveries are not sent and spend no attempts; they wait
// until it is resumed.
type DestinationPauser interface {
	// SetPaused pauses or resumes a destination; an unknown ID wraps
	// ErrDestinationNotFound.
	SetPaused(ctx context.Context, id string, paused bool) error
}

// DestinationGuard is an optional ability of a Destinations port (the
// memory and SQL stores have it), found with As: one destination's
// protection state, kept where every worker sharing the store sees it.
// Without it a client keeps the state in its own process, so a rate limit
// holds per process and a hold or an open circuit is not shared.
// Implementations must be safe for concurrent use, also across processes
// sharing the store.
type DestinationGuard interface {
	// UpdateGuard reads one destination's state, calls params.Update and
	// stores its result, atomically: no other UpdateGuard on the same
	// destination, in any process, runs between the read and the write. It
	// returns the stored state. The destination need not exist.
	UpdateGuard(ctx context.Context, params UpdateGuardParams) (GuardState, error)
	// GuardStates returns the stored states selected by params, ordered by
	// DestinationID, each once (an ID listed twice is answered once),
	// however many IDs params lists (a worker asks for every destination
	// it holds back). Destinations never updated are omitted.
	GuardStates(ctx context.Context, params GuardStatesParams) ([]GuardState, error)
}

// UpdateGuardParams are the inputs of DestinationGuard.UpdateGuard.
type UpdateGuardParams struct {
	DestinationID string
	// Update gets the stored state (the zero state with DestinationID set
	// when none is stored) and returns the state to store. It is pure: it
	// may be called more than once when the store retries a transaction,
	// and only the last call's result is stored.
	Update func(GuardState) GuardState
}

// GuardStatesParams are the inputs of DestinationGuard.GuardStates.
type GuardStatesParams struct {
	// IDs selects these destinations; empty selects every stored state.
	IDs []string
}
