package hooksql

import (
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay"
)

// fakeRow is a selected delivery row as a driver hands it to Scan.
type fakeRow []any

func (r fakeRow) Scan(dest ...any) error {
	if len(dest) != len(r) {
		return fmt.Errorf("scan: %d destinations for %d columns", len(dest), len(r))
	}
	for i, v := range r {
		switch d := dest[i].(type) {
		case *string:
			*d = v.(string)
		case *[]byte:
			if v == nil {
				*d = nil
			} else {
				*d = append([]byte(nil), v.([]byte)...)
			}
		case *int64:
			*d = v.(int64)
		case *int:
			*d = int(v.(int64))
		case *sql.NullInt64:
			if v == nil {
				*d = sql.NullInt64{}
			} else {
				*d = sql.NullInt64{Int64: v.(int64), Valid: true}
			}
		default:
			return fmt.Errorf("scan: column %d: unsupported destination %T", i, dest[i])
		}
	}
	return nil
}

// selected turns an insert row into the row selectDeliveryCols reads back
// (a fresh record: no lease, budget from attempt 1).
func selected(row deliveryRow) fakeRow {
	payloadNull := int64(0)
	if row[6] == nil {
		payloadNull = 1
	}
	return fakeRow{row[0], row[1], row[2], row[3], row[4], row[5], row[6], payloadNull,
		int64(row[7].(int)), int64(row[8].(int)), row[9], row[10], row[11], row[12], row[13], row[14], row[15], int64(0), int64(0), nil}
}

// FuzzDeliveryRowCodec round-trips fuzzed deliveries through the row codec
// and decodes fuzzed stored columns: encodeDelivery either refuses with a
// *ValidationError or writes a row that scanDelivery reads back as the same
// delivery, and scanDelivery never panics on a hand-edited row — it
// returns a delivery or a *DecodeError.
func FuzzDeliveryRowCodec(f *testing.F) {
	f.Add("whd_1", "evt_1", "tenant", "property", "prop_204", "acct", "e", []byte(`{"a":1}`), 1, int64(1_790_000_000_123_456_789), "default", "", `{"k":"v"}`, "pending", "accepted")
	f.Add("whd_2", "", "", "", "", "", "", []byte(nil), 0, int64(0), "", "reason\x00\xff", `null`, "dead", "")
	f.Add("w", "\xff", "t", "k\xff", "v", "d", "e", []byte{}, 7, int64(-1), "p", "", `{"k":1}`, "gone", "maybe")
	s := &Store{dialect: SQLite, maxPay: DefaultMaxPayloadBytes}
	f.Fuzz(func(t *testing.T, id, event, tenant, scopeKey, scopeValue, dest, eventType string, payload []byte, attempt int, nanos int64, policy, reason, storedScope, storedState, storedOutcome string) {
		d := hookrelay.Delivery{
			ID: id, EventID: event, TenantID: tenant, DestinationID: dest, EventType: eventType,
			Payload: payload, EnvelopeVersion: hookrelay.EnvelopeVersion, Attempt: attempt,
			FirstQueuedAt: time.Unix(0, nanos), NextAttemptAt: time.Unix(0, nanos), UpdatedAt: time.Unix(0, nanos),
			PolicyVersion: policy, LastReason: reason, State: hookrelay.StatePending,
		}
		if scopeKey != "" {
			d.Scope = map[string]string{scopeKey: scopeValue}
		}
		row, err := s.encodeDelivery(d)
		if err != nil {
			var ve *hookrelay.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("refusal is not a *ValidationError: %v", err)
			}
		} else {
			got, token, err := scanDelivery(selected(row))
			if err != nil || token != 0 {
				t.Fatalf("a row the codec wrote does not read back: %v", err)
			}
			want := d
			want.Attempt = max(d.Attempt, 1)
			want.LastReason = cleanText(d.LastReason)
			if !got.FirstQueuedAt.Equal(want.FirstQueuedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
				t.Fatalf("times changed: %v → %v", want.FirstQueuedAt, got.FirstQueuedAt)
			}
			got.FirstQueuedAt, got.NextAttemptAt, got.UpdatedAt = want.FirstQueuedAt, want.NextAttemptAt, want.UpdatedAt
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip changed the delivery:\n%#v\n%#v", want, got)
			}
		}

		// A hand-edited stored row.
		raw := fakeRow{id, event, tenant, storedScope, dest, eventType, payload, int64(0), int64(hookrelay.EnvelopeVersion), int64(attempt), nanos, nanos, policy, storedState, storedOutcome, reason, nanos, int64(0), int64(0), nil}
		got, _, err := scanDelivery(raw)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("undecodable row is not a *DecodeError: %v", err)
			}
			return
		}
		switch got.State {
		case hookrelay.StatePending, hookrelay.StateDelivered, hookrelay.StateDead:
		default:
			t.Fatalf("decoded an unknown state %q", got.State)
		}
	})
}
