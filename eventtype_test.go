package hookrelay_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

func TestMatchEventType(t *testing.T) {
	for _, tc := range []struct {
		pattern, eventType string
		want               bool
	}{
		{"lease.payment_recorded", "lease.payment_recorded", true},
		{"lease.payment_recorded", "lease.payment_recorded.v2", false},
		{"lease.payment_recorded", "lease.payment", false},
		{"lease.payment_recorded", "Lease.Payment_Recorded", false}, // case-sensitive
		{"lease.*", "lease.payment_recorded", true},
		{"lease.*", "lease.ended.early", true}, // every type under the prefix
		{"lease.*", "lease", false},            // not the prefix itself
		{"lease.*", "lease.", false},
		{"lease.*", "leases.created", false}, // a segment, not a string prefix
		{"lease.*", "invoice.lease.created", false},
		{"lease.payment.*", "lease.payment.recorded", true},
		{"lease.payment.*", "lease.payment_recorded", false},
		{"*", "lease.payment_recorded", true},
		{"*", "x", true},
	} {
		assert.Equal(t, tc.want, hookrelay.MatchEventType(tc.pattern, tc.eventType), "pattern %q, event type %q", tc.pattern, tc.eventType)
	}
}

func TestDestinationSubscribesTo(t *testing.T) {
	assert.True(t, hookrelay.Destination{}.SubscribesTo("lease.payment_recorded"), "no patterns: every type")
	d := hookrelay.Destination{EventTypes: []string{"invoice.paid", "lease.*"}}
	assert.True(t, d.SubscribesTo("invoice.paid"))
	assert.True(t, d.SubscribesTo("lease.payment_recorded"))
	assert.False(t, d.SubscribesTo("invoice.created"))
}

func TestValidateEventTypes(t *testing.T) {
	require.NoError(t, hookrelay.ValidateEventTypes(nil))
	require.NoError(t, hookrelay.ValidateEventTypes([]string{"*", "lease.*", "lease.payment_recorded", "a", "order-v2/created.x_y"}))
	for _, tc := range []struct {
		pattern string
		problem string
	}{
		{"", "must not be empty"},
		{".lease", "empty segment"},
		{"lease.", "empty segment"},
		{"lease..paid", "empty segment"},
		{"lease*", `"*" may only be`},
		{"*.paid", `"*" may only be`},
		{"lease.*.paid", `"*" may only be`},
		{"lease.**", `"*" may only be`},
		{"lease paid", "space or a control character"},
		{"lease.\tpaid", "space or a control character"},
		{"lease.\xff", "not valid UTF-8"},
		{strings.Repeat("a", 256), "over the 255-byte limit"},
	} {
		err := hookrelay.ValidateEventTypes([]string{"lease.*", tc.pattern})
		require.ErrorIs(t, err, hookrelay.ErrInvalidDestination, "pattern %q", tc.pattern)
		var ve *hookrelay.ValidationError
		require.ErrorAs(t, err, &ve)
		assert.Equal(t, "EventTypes[1]", ve.Field, "pattern %q", tc.pattern)
		assert.Contains(t, ve.Problem, tc.problem, "pattern %q", tc.pattern)
	}
	// A long malformed pattern is quoted by a short prefix only.
	long := "lease." + strings.Repeat("x", 200) + ".*.tail_secret_part"
	err := hookrelay.ValidateEventTypes([]string{long})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "tail_secret_part")
	assert.Less(t, len(err.Error()), 200)
}
