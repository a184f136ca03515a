package hookrelay

import (
	"encoding/json"
	"fmt"
	"time"
)

// EnvelopeVersion is the envelope format this version of the library
// writes. Decoders keep reading every older version for at least the longest
// delivery window, so a message queued by an older worker is still read by a
// newer one; a message from a newer library is refused, never dropped.
const EnvelopeVersion = 1

// envelopeV1 is the wire form of envelope version 1. Its field names are a
// compatibility contract: never rename or reuse them.
type envelopeV1 struct {
	V             int               `json:"v"`
	ID            string            `json:"id"`
	EventID       string            `json:"event_id"`
	TenantID      string            `json:"tenant_id"`
	Scope         map[string]string `json:"scope,omitempty"`
	DestinationID string            `json:"destination_id"`
	EventType     string            `json:"event_type"`
	Payload       []byte            `json:"payload"`
	Attempt       int               `json:"attempt"`
	FirstQueuedAt time.Time         `json:"first_queued_at"`
	NextAttemptAt time.Time         `json:"next_attempt_at"`
	PolicyVersion string            `json:"policy_version"`
}

// MarshalEnvelope encodes what a queue carries for a delivery: its identity,
// routing and payload, at the current EnvelopeVersion. It never includes a
// destination's URL or secrets.
func MarshalEnvelope(d Delivery) ([]byte, error) {
	return json.Marshal(envelopeV1{
		V: EnvelopeVersion, ID: d.ID, EventID: d.EventID, TenantID: d.TenantID,
		Scope: d.Scope, DestinationID: d.DestinationID, EventType: d.EventType,
		Payload: d.Payload, Attempt: d.Attempt, FirstQueuedAt: d.FirstQueuedAt,
		NextAttemptAt: d.NextAttemptAt, PolicyVersion: d.PolicyVersion,
	})
}

// UnmarshalEnvelope decodes an envelope of any version this library knows.
// A newer version returns an error wrapping ErrUnknownEnvelopeVersion; a
// malformed message (a version below 1 included) returns an error naming
// the problem. The decoded delivery is pending.
func UnmarshalEnvelope(b []byte) (Delivery, error) {
	var head struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return Delivery{}, fmt.Errorf("hookrelay: decode envelope: %w", err)
	}
	if head.V == nil {
		return Delivery{}, fmt.Errorf("hookrelay: decode envelope: missing version field \"v\"")
	}
	switch *head.V {
	case 1:
		var e envelopeV1
		if err := json.Unmarshal(b, &e); err != nil {
			return Delivery{}, fmt.Errorf("hookrelay: decode envelope v1: %w", err)
		}
		if e.ID == "" || e.EventID == "" || e.DestinationID == "" {
			return Delivery{}, fmt.Errorf("hookrelay: decode envelope v1: missing id, event_id or destination_id")
		}
		return Delivery{
			ID: e.ID, EventID: e.EventID, TenantID: e.TenantID, Scope: e.Scope,
			DestinationID: e.DestinationID, EventType: e.EventType, Payload: e.Payload,
			EnvelopeVersion: 1, Attempt: e.Attempt, FirstQueuedAt: e.FirstQueuedAt,
			NextAttemptAt: e.NextAttemptAt, PolicyVersion: e.PolicyVersion, State: StatePending,
		}, nil
	default:
		if *head.V < 1 {
			// No library ever wrote it: malformed, not a newer library's.
			return Delivery{}, fmt.Errorf("hookrelay: decode envelope: invalid version %d (versions start at 1)", *head.V)
		}
		return Delivery{}, fmt.Errorf("%w: envelope version %d (this library reads versions 1 to %d)",
			ErrUnknownEnvelopeVersion, *head.V, EnvelopeVersion)
	}
}
