package hooksql

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookrelay/hookrelay"
)

// Times are stored as BIGINT unix nanoseconds, identical on every dialect,
// so a mock clock's times round-trip exactly. The zero time.Time is stored
// as math.MinInt64; decoded times are in time.Local, like time.Unix.
const zeroTime = math.MinInt64

var (
	minTime = time.Unix(0, math.MinInt64+1)
	maxTime = time.Unix(0, math.MaxInt64)
)

// encTime encodes t, refusing times nanoseconds cannot hold (before 1678 or
// after 2262).
func encTime(field string, t time.Time) (int64, error) {
	if t.IsZero() {
		return zeroTime, nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		return 0, &timeRangeError{field: field, t: t}
	}
	return t.UnixNano(), nil
}

type timeRangeError struct {
	field string
	t     time.Time
}

func (e *timeRangeError) Error() string {
	return fmt.Sprintf("hooksql: %s %s %s", e.field, e.t.Format(time.RFC3339), e.problem())
}

func (e *timeRangeError) problem() string {
	return "is outside the storable range (years 1678 to 2262)"
}

func decTime(n int64) time.Time {
	if n == zeroTime {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func decNullTime(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return decTime(n.Int64)
}

// maxStringBytes bounds IDs and short labels; the columns are 255 bytes.
const maxStringBytes = 255

// checkString refuses what a TEXT column of every dialect cannot hold
// exactly: invalid UTF-8 and NUL bytes (PostgreSQL), and overlong values.
func checkString(field, v string, required bool) error {
	switch {
	case required && v == "":
		return badDelivery(field, "must not be empty")
	case len(v) > maxStringBytes:
		return badDelivery(field, fmt.Sprintf("is %d bytes, over the %d-byte limit", len(v), maxStringBytes))
	case !utf8.ValidString(v):
		return badDelivery(field, "is not valid UTF-8")
	case strings.IndexByte(v, 0) >= 0:
		return badDelivery(field, "contains a NUL byte")
	}
	return nil
}

// lookupID is id as the argument of a read or change by ID. An ID no
// record can have (checkString refuses it: empty, over the length limit,
// not UTF-8, with a NUL) is looked for as "", which nothing has either
// (every write refuses an empty ID), so the call answers exactly as for
// an unknown ID on every dialect. PostgreSQL refuses bytes that are not
// UTF-8, and NUL, in a text argument: such an ID, from a console URL, a
// CLI argument or a message on a broker subject, was a database error
// there and not found elsewhere.
func lookupID(id string) string {
	if checkString("ID", id, true) != nil {
		return ""
	}
	return id
}

func badDelivery(field, problem string) error {
	return &hookrelay.ValidationError{Err: hookrelay.ErrInvalidDelivery, Field: field, Problem: problem}
}

// cleanText makes free text (reasons, diagnostics) storable everywhere:
// a sender may cut a detail in the middle of a rune.
func cleanText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// deliveryRow is a delivery's columns in insert order.
type deliveryRow []any

const insertDeliveryCols = "id, event_id, tenant_id, scope, destination_id, event_type, payload, envelope_version, attempt, first_queued_at, next_attempt_at, policy_version, state, last_outcome, last_reason, updated_at, budget_start, lease_token"

const deliveryColCount = 18

// firstToken is the lease token a new record starts from: the wall clock
// in microseconds (not the caller's clock, which a test may stop). Claims
// add one to it. A record removed by the cleaner and created again (its
// event published again) has the same ID, and a worker may still hold a
// lease of the removed record; starting every record from 0 gave the new
// record the same tokens, so that holder's late write landed on the new
// record's lease. The new record starts above every token of the removed
// one, which was claimed fewer times than microseconds passed between the
// two creates (each claim is a transaction of its own), as long as the
// creating processes' clocks agree to within the removed record's life and
// retention. Microseconds keep tokens below 2^53 (exact in JSON numbers)
// until the year 2255.
func firstToken() int64 { return time.Now().UnixMicro() }

// encodeDelivery validates d as a new pending record and returns its
// column values.
func (s *Store) encodeDelivery(d hookrelay.Delivery) (deliveryRow, error) {
	if err := hookrelay.CheckStorable(d); err != nil {
		return nil, err
	}
	if len(d.Payload) > s.maxPay {
		return nil, badDelivery("Payload", fmt.Sprintf("is %d bytes, over the %d-byte limit", len(d.Payload), s.maxPay))
	}
	scope, err := json.Marshal(d.Scope) // nil → "null", kept apart from {}
	if err != nil {
		return nil, badDelivery("Scope", err.Error())
	}
	times := [3]int64{}
	for i, t := range []struct {
		name string
		t    time.Time
	}{{"FirstQueuedAt", d.FirstQueuedAt}, {"NextAttemptAt", d.NextAttemptAt}, {"UpdatedAt", d.UpdatedAt}} {
		if times[i], err = encTime(t.name, t.t); err != nil {
			return nil, badDelivery(t.name, t.t.Format(time.RFC3339)+" "+err.(*timeRangeError).problem())
		}
	}
	attempt := d.Attempt
	if attempt < 1 {
		attempt = 1
	}
	var payload any
	if d.Payload != nil {
		payload = d.Payload
	}
	return deliveryRow{
		d.ID, d.EventID, d.TenantID, string(scope), d.DestinationID, d.EventType, payload,
		d.EnvelopeVersion, attempt, times[0], times[1], d.PolicyVersion,
		string(hookrelay.StatePending), string(d.LastOutcome), hookrelay.StorableText(d.LastReason), times[2], d.BudgetStart,
		firstToken(),
	}, nil
}

// selectDeliveryCols are read by scanDelivery, in this order.
const selectDeliveryCols = "id, event_id, tenant_id, scope, destination_id, event_type, payload, " +
	"CASE WHEN payload IS NULL THEN 1 ELSE 0 END, envelope_version, attempt, first_queued_at, " +
	"next_attempt_at, policy_version, state, last_outcome, last_reason, updated_at, lease_token, budget_start, window_start"

type scanner interface{ Scan(dest ...any) error }

// DecodeError reports a stored delivery row that this library cannot read
// (edited by hand, or corrupted). It names the delivery and the column.
type DecodeError struct {
	DeliveryID string
	Column     string
	Err        error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("hooksql: delivery %q: cannot decode column %s: %v", e.DeliveryID, e.Column, e.Err)
}

// Unwrap returns the problem; for a record written by a newer library it
// wraps hookrelay.ErrUnknownEnvelopeVersion.
func (e *DecodeError) Unwrap() error { return e.Err }

// scanDelivery reads one row of selectDeliveryCols, followed by the extra
// columns the query selected into extra. A driver failure is returned as is
// (the caller translates it); an undecodable row is a *DecodeError.
func scanDelivery(r scanner, extra ...any) (hookrelay.Delivery, int64, error) {
	var (
		d                            hookrelay.Delivery
		scope, state, outcome        string
		payloadNull                  int64
		firstQueued, nextAt, updated int64
		token                        int64
		windowStart                  sql.NullInt64
	)
	dest := append([]any{&d.ID, &d.EventID, &d.TenantID, &scope, &d.DestinationID, &d.EventType,
		&d.Payload, &payloadNull, &d.EnvelopeVersion, &d.Attempt, &firstQueued, &nextAt,
		&d.PolicyVersion, &state, &outcome, &d.LastReason, &updated, &token, &d.BudgetStart, &windowStart}, extra...)
	if err := r.Scan(dest...); err != nil {
		return d, 0, err
	}
	if payloadNull == 0 && d.Payload == nil {
		d.Payload = []byte{}
	}
	if err := finishDelivery(&d, []byte(scope), state, outcome, firstQueued, nextAt, updated, windowStart); err != nil {
		return d, 0, err
	}
	return d, token, nil
}

// finishDelivery completes d, whose plain columns are read already, from
// the columns that need decoding, and checks what it read: the one
// decoding of a stored delivery, shared by scanDelivery and the
// PostgreSQL claim's pgxDeliveryReader. An undecodable row is a
// *DecodeError.
func finishDelivery(d *hookrelay.Delivery, scope []byte, state, outcome string, firstQueued, nextAt, updated int64, windowStart sql.NullInt64) error {
	var err error
	if d.Scope, err = decodeScope(scope); err != nil {
		return &DecodeError{DeliveryID: d.ID, Column: "scope", Err: err}
	}
	switch st := hookrelay.State(state); st {
	case hookrelay.StatePending, hookrelay.StateDelivered, hookrelay.StateDead:
		d.State = st
	default:
		return &DecodeError{DeliveryID: d.ID, Column: "state", Err: fmt.Errorf("unknown state %q", state)}
	}
	switch o := hookrelay.Outcome(outcome); o {
	case "", hookrelay.OutcomeAccepted, hookrelay.OutcomeRejected, hookrelay.OutcomeUnknown:
		d.LastOutcome = o
	default:
		return &DecodeError{DeliveryID: d.ID, Column: "last_outcome", Err: fmt.Errorf("unknown outcome %q", outcome)}
	}
	if d.EnvelopeVersion > hookrelay.EnvelopeVersion {
		return &DecodeError{DeliveryID: d.ID, Column: "envelope_version", Err: fmt.Errorf(
			"%w: version %d (this library reads versions 1 to %d)", hookrelay.ErrUnknownEnvelopeVersion, d.EnvelopeVersion, hookrelay.EnvelopeVersion)}
	}
	d.FirstQueuedAt, d.NextAttemptAt, d.UpdatedAt = decTime(firstQueued), decTime(nextAt), decTime(updated)
	d.WindowStart = decNullTime(windowStart)
	return nil
}

// decodeScope decodes a stored scope: JSON null (what a nil Scope is
// stored as) is a nil map without running the JSON decoder.
func decodeScope(b []byte) (map[string]string, error) {
	if string(b) == "null" {
		return nil, nil
	}
	var scope map[string]string
	if err := json.Unmarshal(b, &scope); err != nil {
		return nil, err
	}
	return scope, nil
}
