package hookrelaytest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// runRecordContract checks that every field of a record round-trips and
// that a Ledger refuses what hookrelay.CheckStorable refuses, and a
// cancelled context, with the same sentinel errors as the SQL store: a test
// that passes on the memory fake must not fail in production.
func runRecordContract(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()

	t.Run("CreateRoundTripsEveryFieldOfTheRecord", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base.Add(123456789*time.Nanosecond))
		d.Attempt, d.BudgetStart = 4, 3
		d.NextAttemptAt = base.Add(90 * time.Second)
		d.UpdatedAt = base.Add(45 * time.Second)
		d.LastOutcome, d.LastReason = hookrelay.OutcomeUnknown, hookrelay.ReasonTimeout
		d.Scope = map[string]string{"property": "prop_204", "note": "naïve café ✓", "": "empty key"}
		d.Payload = []byte{0, 1, 2, 0xff, '{', '}'}
		created, err := h.Ledger.Create(ctx, []hookrelay.Delivery{d})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, created)
		got, err := h.Ledger.Get(ctx, d.ID)
		require.NoError(t, err)
		assertSameDelivery(t, d, got)
		assert.Equal(t, d.BudgetStart, got.BudgetStart, "BudgetStart")
		assert.Equal(t, d.LastOutcome, got.LastOutcome, "LastOutcome")
		assert.Equal(t, d.LastReason, got.LastReason, "LastReason")
		assert.True(t, d.UpdatedAt.Equal(got.UpdatedAt), "UpdatedAt %v != %v", d.UpdatedAt, got.UpdatedAt)
		assert.True(t, d.FirstQueuedAt.Equal(got.FirstQueuedAt), "nanoseconds survive: %v != %v", d.FirstQueuedAt, got.FirstQueuedAt)

		empty := newDelivery("evt_2", "dest_1", base)
		empty.Scope, empty.Payload = nil, []byte{}
		_, err = h.Ledger.Create(ctx, []hookrelay.Delivery{empty})
		require.NoError(t, err)
		got, err = h.Ledger.Get(ctx, empty.ID)
		require.NoError(t, err)
		assert.Nil(t, got.Scope, "no scope stays no scope")
		assert.NotNil(t, got.Payload, "an empty payload is not a missing one")
		assert.Empty(t, got.Payload)
	})

	t.Run("RefusesWhatEveryStoreRefuses", func(t *testing.T) {
		h := newHarness(t)
		long := strings.Repeat("x", hookrelay.MaxStoredStringBytes+1)
		bigScope := map[string]string{"blob": strings.Repeat("s", hookrelay.MaxStoredScopeBytes)}
		cases := []struct {
			name, field string
			edit        func(*hookrelay.Delivery)
		}{
			{"EmptyID", "ID", func(d *hookrelay.Delivery) { d.ID = "" }},
			{"OverlongID", "ID", func(d *hookrelay.Delivery) { d.ID = "whd_" + long }},
			{"OverlongEventID", "EventID", func(d *hookrelay.Delivery) { d.EventID = long }},
			{"OverlongTenantID", "TenantID", func(d *hookrelay.Delivery) { d.TenantID = long }},
			{"OverlongDestinationID", "DestinationID", func(d *hookrelay.Delivery) { d.DestinationID = long }},
			{"OverlongEventType", "EventType", func(d *hookrelay.Delivery) { d.EventType = long }},
			{"InvalidUTF8EventID", "EventID", func(d *hookrelay.Delivery) { d.EventID = "evt_\xff" }},
			{"InvalidUTF8TenantID", "TenantID", func(d *hookrelay.Delivery) { d.TenantID = "tenant_\xc3" }},
			{"NULInEventType", "EventType", func(d *hookrelay.Delivery) { d.EventType = "lease.\x00paid" }},
			{"NULInID", "ID", func(d *hookrelay.Delivery) { d.ID = "whd_\x00" }},
			{"InvalidUTF8ScopeValue", "Scope", func(d *hookrelay.Delivery) { d.Scope = map[string]string{"k": "\xff"} }},
			{"OversizeScope", "Scope", func(d *hookrelay.Delivery) { d.Scope = bigScope }},
			{"UnknownEnvelopeVersion", "EnvelopeVersion", func(d *hookrelay.Delivery) { d.EnvelopeVersion = hookrelay.EnvelopeVersion + 1 }},
			{"UnstorableTime", "NextAttemptAt", func(d *hookrelay.Delivery) { d.NextAttemptAt = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		}
		for _, tc := range cases {
			d := newDelivery("evt_"+tc.name, "dest_1", base)
			tc.edit(&d)
			ok := newDelivery("evt_ok_"+tc.name, "dest_1", base)
			_, err := h.Ledger.Create(ctx, []hookrelay.Delivery{ok, d})
			var ve *hookrelay.ValidationError
			if assert.ErrorAs(t, err, &ve, "%s: Create must refuse it", tc.name) {
				assert.ErrorIs(t, err, hookrelay.ErrInvalidDelivery, tc.name)
				assert.Equal(t, tc.field, ve.Field, "%s: the error names the field", tc.name)
				assert.NotContains(t, err.Error(), long, "%s: the error quotes at most a prefix", tc.name)
			}
			_, err = h.Ledger.Get(ctx, ok.ID)
			assert.ErrorIs(t, err, hookrelay.ErrNotFound, "%s: one refused record refuses the whole call", tc.name)
		}

		fits := newDelivery("evt_fits", "dest_1", base)
		fits.EventID, fits.TenantID = strings.Repeat("é", hookrelay.MaxStoredStringBytes/2), strings.Repeat("t", hookrelay.MaxStoredStringBytes)
		fits.Scope = map[string]string{"blob": strings.Repeat("s", hookrelay.MaxStoredScopeBytes-len("blob"))}
		created, err := h.Ledger.Create(ctx, []hookrelay.Delivery{fits})
		require.NoError(t, err, "values at the limits are stored")
		assert.Equal(t, []bool{true}, created)
		got, err := h.Ledger.Get(ctx, fits.ID)
		require.NoError(t, err)
		assert.Equal(t, fits.EventID, got.EventID)
		assert.Equal(t, fits.Scope, got.Scope)
	})

	t.Run("CancelledContextIsRefused", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		other := newDelivery("evt_2", "dest_1", base)
		calls := map[string]func() error{
			"Create": func() error { _, err := h.Ledger.Create(cancelled, []hookrelay.Delivery{other}); return err },
			"Get":    func() error { _, err := h.Ledger.Get(cancelled, d.ID); return err },
			"WasDelivered": func() error {
				_, err := h.Ledger.WasDelivered(cancelled, d.ID)
				return err
			},
			"Attempts":         func() error { _, err := h.Ledger.Attempts(cancelled, d.ID); return err },
			"MarkDelivered":    func() error { return h.Ledger.MarkDelivered(cancelled, markDelivered(c, c.Lease, base)) },
			"RecordRetry":      func() error { return h.Ledger.RecordRetry(cancelled, recordRetry(c, c.Lease, base)) },
			"RecordDeadLetter": func() error { return h.Ledger.RecordDeadLetter(cancelled, recordDeadLetter(c, c.Lease, base)) },
			"Claim": func() error {
				_, err := h.Queue.Claim(cancelled, hookrelay.ClaimParams{Now: base.Add(time.Hour), Limit: 1, LeaseFor: leaseFor})
				return err
			},
			"Release": func() error {
				return h.Queue.Release(cancelled, hookrelay.ReleaseParams{ID: d.ID, Lease: c.Lease, At: base, Now: base})
			},
		}
		if as, ok := h.Ledger.(hookrelay.AttemptStats); ok {
			calls["RecentOutcomes"] = func() error {
				_, err := as.RecentOutcomes(cancelled, hookrelay.RecentOutcomesParams{Since: base})
				return err
			}
		}
		for name, call := range calls {
			assert.ErrorIs(t, call(), context.Canceled, "%s with a cancelled context", name)
		}
		_, err := h.Ledger.Get(ctx, other.ID)
		assert.ErrorIs(t, err, hookrelay.ErrNotFound, "the refused Create stored nothing")
		require.NoError(t, deliver(t, h, c, base), "the refused writes changed nothing: the lease still holds")
	})
}
