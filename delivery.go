package hookrelay

import (
	"encoding/binary"
	"time"

	"github.com/google/uuid"
)

// State is a delivery's business state. There are exactly three; "unknown"
// is an attempt outcome, not a state.
type State string

const (
	// StatePending: automated delivery is still active.
	StatePending State = "pending"
	// StateDelivered: the recipient acknowledged it; terminal.
	StateDelivered State = "delivered"
	// StateDead: automation stopped (permanent rejection, attempts
	// exhausted, or delivery window passed); only an explicit redrive
	// returns it to pending.
	StateDead State = "dead"
)

// Delivery is the durable record of one event going to one destination. It
// holds no credentials and no sensitive headers: destination secrets are
// resolved at send time through the Destinations port.
type Delivery struct {
	// ID is the immutable delivery ID, derived by DeliveryID from EventID and
	// DestinationID. It is the idempotency key on every attempt.
	ID      string
	EventID string
	// TenantID owns the delivery; redrive across tenants needs authorization.
	TenantID string
	// Scope holds free-form labels (property, lease, shipment…).
	Scope         map[string]string
	DestinationID string
	EventType     string
	// Payload is opaque and never edited after enqueue.
	Payload []byte
	// EnvelopeVersion is the envelope format the record was written with.
	EnvelopeVersion int
	// Attempt is the number of the next (or current, while claimed) attempt,
	// starting at 1. Attempt−1 attempts have been made.
	Attempt int
	// BudgetStart is the attempt number the current attempt budget began
	// at: 1 (zero is read as 1), or the first attempt after the latest
	// redrive. A redrive keeps the numbering going, so attempt history stays
	// unambiguous, and gives a fresh budget by moving BudgetStart.
	BudgetStart   int
	FirstQueuedAt time.Time
	// WindowStart is when the current delivery window (the policy's MaxAge)
	// began: zero means FirstQueuedAt; a redrive sets it to the redrive's
	// time, so a delivery redriven after an outage longer than MaxAge gets
	// a fresh window as well as a fresh attempt budget. FirstQueuedAt is
	// never changed, so both the original enqueue and the latest redrive
	// stay on the record.
	WindowStart   time.Time
	NextAttemptAt time.Time
	PolicyVersion string
	State         State
	// LastOutcome and LastReason describe the latest attempt or decision.
	LastOutcome Outcome
	LastReason  string
	// UpdatedAt is when the record last changed.
	UpdatedAt time.Time
}

// WindowStartsAt is when the current delivery window began: WindowStart,
// or FirstQueuedAt when WindowStart is zero.
func (d Delivery) WindowStartsAt() time.Time {
	if d.WindowStart.IsZero() {
		return d.FirstQueuedAt
	}
	return d.WindowStart
}

// BudgetAttempt is the position of Attempt within the current attempt
// budget, starting at 1: what the policy's MaxAttempts and backoff count.
func (d Delivery) BudgetAttempt() int {
	return d.Attempt - max(d.BudgetStart, 1) + 1
}

// deliveryNamespace is the UUIDv5 namespace of delivery IDs. Changing it
// changes every delivery ID and defeats deduplication across versions.
var deliveryNamespace = uuid.MustParse("6f1c1b5e-7f3a-5b9e-9a54-2f0c8f6c1d11")

// DeliveryID derives the delivery ID from (event ID, destination ID): the same
// pair always yields the same ID, in every version of the library, so
// enqueueing the same event for the same destination twice yields one record.
// The two inputs are length-prefixed so ("ab","c") and ("a","bc") differ.
func DeliveryID(eventID, destinationID string) string {
	b := make([]byte, 0, 16+len(eventID)+len(destinationID))
	b = binary.BigEndian.AppendUint64(b, uint64(len(eventID)))
	b = append(b, eventID...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(destinationID)))
	b = append(b, destinationID...)
	return "whd_" + uuid.NewSHA1(deliveryNamespace, b).String()
}

// Lease is a claim's right to run one attempt of a delivery until ExpiresAt.
// Token is a fencing token: it increases with every claim of the delivery,
// and a transition carrying an older token is refused with ErrLeaseLost.
type Lease struct {
	Token     int64
	Holder    string
	ExpiresAt time.Time
}

// Claim is a delivery handed to a worker under a lease.
type Claim struct {
	Delivery Delivery
	Lease    Lease
}

// Attempt is one row of a delivery's attempt history.
type Attempt struct {
	DeliveryID string
	// Number is the attempt number (1-based); redriven deliveries continue
	// the numbering, so old attempts are kept.
	Number     int
	StartedAt  time.Time
	FinishedAt time.Time
	Kind       Kind
	Outcome    Outcome
	Reason     string
	StatusCode int
	// Detail is a truncated, secret-free diagnostic.
	Detail string
	// NextAttemptAt is when a retry was scheduled, zero otherwise.
	NextAttemptAt time.Time
}
