package hookrelay_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay"
)

// FuzzUnmarshalEnvelope feeds arbitrary bytes to the envelope decoder: it
// never panics, returns no delivery with an error, accepts only complete
// pending deliveries, and what it accepts re-encodes to an envelope that
// decodes to the same delivery.
func FuzzUnmarshalEnvelope(f *testing.F) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	good, err := hookrelay.MarshalEnvelope(hookrelay.Delivery{
		ID: "whd_1", EventID: "evt_1", TenantID: "t", Scope: map[string]string{"property": "p"},
		DestinationID: "acct", EventType: "e", Payload: []byte(`{"a":1}`), Attempt: 2,
		FirstQueuedAt: at, NextAttemptAt: at, PolicyVersion: "default",
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(good), `{"v":2}`, `{"v":1}`, `{}`, `null`, `[]`, `{"v":1,"id":"a","event_id":"b","destination_id":"c","payload":"!!"}`,
		`{"v":1,"id":"a","event_id":"b","destination_id":"c","first_queued_at":"0000-01-01T00:00:00+23:59"}`,
		`{"v":-1}`, `{"v":1e400}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := hookrelay.UnmarshalEnvelope(b)
		if err != nil {
			if d.ID != "" {
				t.Fatalf("a refused envelope returned a delivery %+v", d)
			}
			return
		}
		if d.ID == "" || d.EventID == "" || d.DestinationID == "" || d.State != hookrelay.StatePending {
			t.Fatalf("accepted an incomplete envelope: %+v", d)
		}
		again, err := hookrelay.MarshalEnvelope(d)
		if err != nil {
			return // a time json cannot write back (a year beyond 9999 after the offset): refused at encode
		}
		d2, err := hookrelay.UnmarshalEnvelope(again)
		if err != nil {
			t.Fatalf("re-encoded envelope refused: %v\n%s", err, again)
		}
		if !d.FirstQueuedAt.Equal(d2.FirstQueuedAt) || !d.NextAttemptAt.Equal(d2.NextAttemptAt) {
			t.Fatalf("times changed: %v %v → %v %v", d.FirstQueuedAt, d.NextAttemptAt, d2.FirstQueuedAt, d2.NextAttemptAt)
		}
		d.FirstQueuedAt, d.NextAttemptAt, d2.FirstQueuedAt, d2.NextAttemptAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if len(d.Scope) == 0 {
			d.Scope = nil // omitted when empty
		}
		if !reflect.DeepEqual(d, d2) {
			t.Fatalf("round trip changed the delivery:\n%+v\n%+v", d, d2)
		}
	})
}
