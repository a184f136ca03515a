package hookrelaytest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/errtext"
)

// refusedPutChangedNothing checks, after bad's Put was refused, that the
// stored destination reads as before and that bad under a new ID is
// refused and not stored either.
func refusedPutChangedNothing(t *testing.T, h Harness, stored, bad hookrelay.Destination, what string) {
	t.Helper()
	ctx := context.Background()
	got, err := h.Destinations.Destination(ctx, stored.ID)
	require.NoError(t, err)
	assert.Equal(t, stored.URL, got.URL, "a refused Put changes nothing (%s)", what)
	assert.Equal(t, stored.Headers, got.Headers, what)
	assert.Equal(t, stored.Secrets, got.Secrets, what)
	assert.Equal(t, stored.MaxPerSecond, got.MaxPerSecond, what)
	bad.ID = "dest_new"
	require.Error(t, h.Destinations.Put(ctx, bad), what)
	_, err = h.Destinations.Destination(ctx, bad.ID)
	assert.ErrorIs(t, err, hookrelay.ErrDestinationNotFound, "a refused new destination is not stored (%s)", what)
}

// RunDestinations runs the Destinations contract tests on the harness's
// DestinationStore: every field round-trips, a bad rate limit and a
// connection-specific or Host header (hookrelay.ValidateHeaders) are
// refused with nothing stored, an ID or tenant no store can hold (empty for the
// ID, over 255 bytes, not UTF-8, a NUL byte) and a URL, secret or header
// that is not UTF-8 or holds a NUL byte, and a MaxConcurrency below zero
// or over math.MaxInt32, are refused naming the field with nothing
// stored, unknown IDs wrap
// ErrDestinationNotFound, Disable keeps its first reason, pausing and
// resuming is seen by the next read, and a cancelled context is refused
// (by Enable and ListDestinations too, when the store is a
// DestinationEnabler or a DestinationLister).
func RunDestinations(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()
	full := func() hookrelay.Destination {
		p := hookrelay.DefaultPolicy()
		p.Version, p.MaxAttempts = "accounting-v2", 3
		return hookrelay.Destination{
			ID: "dest_full", TenantID: "tenant_a", URL: "https://hooks.example/in?x=1",
			Secrets:        []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_b2xkc2VjcmV0"},
			Headers:        map[string]string{"Authorization": "Bearer t0k3n"},
			Policy:         &p,
			MaxConcurrency: 2, MaxPerSecond: 2.5, Timeout: 7 * time.Second, Paused: true,
			Disabled: true, DisabledReason: hookrelay.ReasonDestinationGone,
		}
	}

	t.Run("EveryFieldRoundTrips", func(t *testing.T) {
		h := newHarness(t)
		want := full()
		require.NoError(t, h.Destinations.Put(ctx, want))
		got, err := h.Destinations.Destination(ctx, want.ID)
		require.NoError(t, err)
		assert.Equal(t, want.ID, got.ID)
		assert.Equal(t, want.TenantID, got.TenantID)
		assert.Equal(t, want.URL, got.URL)
		assert.Equal(t, want.Secrets, got.Secrets)
		assert.Equal(t, want.Headers, got.Headers)
		require.NotNil(t, got.Policy)
		assert.Equal(t, *want.Policy, *got.Policy)
		assert.Equal(t, want.MaxConcurrency, got.MaxConcurrency)
		assert.Equal(t, want.MaxPerSecond, got.MaxPerSecond, "a fractional rate limit is kept exactly")
		assert.Equal(t, want.Timeout, got.Timeout)
		assert.Equal(t, want.Paused, got.Paused)
		assert.Equal(t, want.Disabled, got.Disabled)
		assert.Equal(t, want.DisabledReason, got.DisabledReason)

		plain := hookrelay.Destination{ID: "dest_plain", URL: "https://hooks.example/plain"}
		require.NoError(t, h.Destinations.Put(ctx, plain))
		got, err = h.Destinations.Destination(ctx, plain.ID)
		require.NoError(t, err)
		assert.Nil(t, got.Policy, "no override stays no override")
		assert.False(t, got.Paused || got.Disabled)
	})

	t.Run("PutRefusesABadRateLimitAndChangesNothing", func(t *testing.T) {
		h := newHarness(t)
		stored := full()
		require.NoError(t, h.Destinations.Put(ctx, stored))
		for _, rate := range []float64{-1, -0.001, math.NaN(), math.Inf(1), math.Inf(-1)} {
			bad := full()
			bad.URL, bad.MaxPerSecond = "https://hooks.example/v2", rate
			err := h.Destinations.Put(ctx, bad)
			require.ErrorIs(t, err, hookrelay.ErrInvalidDestination, "MaxPerSecond %v", rate)
			assert.ErrorContains(t, err, "MaxPerSecond", "the error names the field")
			assert.ErrorContains(t, err, "finite positive rate", "and the rule")
			refusedPutChangedNothing(t, h, stored, bad, fmt.Sprintf("MaxPerSecond %v", rate))
		}
	})

	t.Run("PutRefusesAHeaderTheSenderCannotSendAndChangesNothing", func(t *testing.T) {
		h := newHarness(t)
		stored := full()
		require.NoError(t, h.Destinations.Put(ctx, stored))
		for name, value := range map[string]string{
			"Connection": "close", "keep-alive": "timeout=5", "Proxy-Connection": "keep-alive",
			"TRANSFER-ENCODING": "chunked", "Upgrade": "h2c", "TE": "gzip",
			"Host": "internal.example", "host": "hooks.example",
		} {
			bad := full()
			bad.URL = "https://hooks.example/v2"
			bad.Headers = map[string]string{"Authorization": "Bearer t0k3n", name: value}
			err := h.Destinations.Put(ctx, bad)
			require.ErrorIs(t, err, hookrelay.ErrInvalidDestination, "header %s", name)
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve, "header %s", name)
			assert.Contains(t, ve.Field, name, "the error names the header")
			assert.NotContains(t, err.Error(), "t0k3n", "nor shows a header value")
			refusedPutChangedNothing(t, h, stored, bad, "header "+name)
		}
		ok := full()
		ok.Headers = map[string]string{"TE": "trailers", "X-Connection": "close"}
		require.NoError(t, h.Destinations.Put(ctx, ok), "TE: trailers and names merely like the refused ones are stored")
	})

	t.Run("PutRefusesMoreSecretsThanEachSendShouldSign", func(t *testing.T) {
		h := newHarness(t)
		secrets := make([]string, hookrelay.MaxDestinationSecrets+1)
		for i := range secrets {
			secrets[i] = fmt.Sprintf("whsec_c2VjcmV0LW51bWJlci0%02d", i)
		}
		at := hookrelay.Destination{ID: "dest_1", URL: "https://hooks.example/in", Secrets: secrets[:hookrelay.MaxDestinationSecrets]}
		require.NoError(t, h.Destinations.Put(ctx, at), "MaxDestinationSecrets secrets are stored")
		over := at
		over.Secrets = secrets
		err := h.Destinations.Put(ctx, over)
		require.ErrorIs(t, err, hookrelay.ErrInvalidDestination)
		var ve *hookrelay.ValidationError
		require.ErrorAs(t, err, &ve)
		assert.Equal(t, "Secrets", ve.Field)
		assert.NotContains(t, err.Error(), "whsec_", "the error shows no secret")
		refusedPutChangedNothing(t, h, at, over, "too many secrets")
	})

	t.Run("PutRefusesAURLSecretOrHeaderThatIsNotUTF8", func(t *testing.T) {
		// A store keeping text (a JSON column, a TEXT column) would change
		// such bytes to U+FFFD: a secret signing with another key, a URL
		// naming another path. Every store refuses them instead, naming
		// the field and never showing a secret or a header's value.
		h := newHarness(t)
		stored := full()
		require.NoError(t, h.Destinations.Put(ctx, stored))
		for _, tc := range []struct {
			field string
			edit  func(*hookrelay.Destination)
		}{
			{"URL", func(d *hookrelay.Destination) { d.URL = "https://hooks.example/in\xff" }},
			{"URL", func(d *hookrelay.Destination) { d.URL = "https://hooks.example/in\x00" }},
			{"Secrets[1]", func(d *hookrelay.Destination) { d.Secrets[1] = "whsec_s3cr3t\xc3" }},
			{"Secrets[0]", func(d *hookrelay.Destination) { d.Secrets[0] = "whsec_s3cr3t\x00" }},
			{`Headers["X-Api-Key"]`, func(d *hookrelay.Destination) { d.Headers["X-Api-Key"] = "s3cr3t\xff" }},
			{`Headers["X-Api-Key"]`, func(d *hookrelay.Destination) { d.Headers["X-Api-Key"] = "s3cr3t\x00" }},
			{`Headers["X-\xff"]`, func(d *hookrelay.Destination) { d.Headers["X-\xff"] = "s3cr3t" }},
		} {
			bad := full()
			tc.edit(&bad)
			err := h.Destinations.Put(ctx, bad)
			require.ErrorIs(t, err, hookrelay.ErrInvalidDestination, tc.field)
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve, tc.field)
			assert.Equal(t, tc.field, ve.Field)
			assert.NotContains(t, err.Error(), "s3cr3t", "%s: the error shows no secret or header value", tc.field)
			assert.True(t, utf8.ValidString(err.Error()), "%s: the error is UTF-8", tc.field)
			refusedPutChangedNothing(t, h, stored, bad, tc.field)
		}
	})

	t.Run("PutRefusesAMaxConcurrencyOutOfRangeAndChangesNothing", func(t *testing.T) {
		// A 32-bit integer column (PostgreSQL, MySQL) holds up to
		// math.MaxInt32; every store takes that much and refuses more, and
		// a negative cap, naming the field.
		h := newHarness(t)
		stored := full()
		stored.MaxConcurrency = math.MaxInt32
		require.NoError(t, h.Destinations.Put(ctx, stored), "MaxConcurrency at math.MaxInt32 is stored")
		got, err := h.Destinations.Destination(ctx, stored.ID)
		require.NoError(t, err)
		assert.Equal(t, math.MaxInt32, got.MaxConcurrency)
		for _, n := range []int{math.MaxInt32 + 1, math.MaxInt, -1} {
			bad := full()
			bad.URL, bad.MaxConcurrency = "https://hooks.example/v2", n
			err := h.Destinations.Put(ctx, bad)
			require.ErrorIs(t, err, hookrelay.ErrInvalidDestination, "MaxConcurrency %d: %.200v", n, err)
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, "MaxConcurrency", ve.Field)
			refusedPutChangedNothing(t, h, stored, bad, fmt.Sprintf("MaxConcurrency %d", n))
		}
	})

	t.Run("PutRefusesAnIDOrTenantNoStoreCanHold", func(t *testing.T) {
		h := newHarness(t)
		edge := strings.Repeat("d", 255) // at the limit: stored
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: edge, TenantID: strings.Repeat("t", 255), URL: "https://hooks.example/in"}))
		_, err := h.Destinations.Destination(ctx, edge)
		require.NoError(t, err, "a 255-byte ID is stored")
		for _, bad := range []string{strings.Repeat("x", 256), "\xff\xfe", "nul\x00inside", ""} {
			err := h.Destinations.Put(ctx, hookrelay.Destination{ID: bad, URL: "https://hooks.example/in"})
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve, "Put with ID %s", errtext.Quote(bad))
			assert.Equal(t, "ID", ve.Field, "the error names the field")
			assert.ErrorIs(t, err, hookrelay.ErrInvalidDestination, "a refused destination is an invalid destination, not an invalid delivery")
			if bad != "" {
				_, err = h.Destinations.Destination(ctx, bad)
				assert.ErrorIs(t, err, hookrelay.ErrDestinationNotFound, "a refused destination is not stored (ID %s)", errtext.Quote(bad))
				err = h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_1", TenantID: bad, URL: "https://hooks.example/in"})
				require.ErrorAs(t, err, &ve, "Put with TenantID %s", errtext.Quote(bad))
				assert.Equal(t, "TenantID", ve.Field, "the error names the field")
				assert.ErrorIs(t, err, hookrelay.ErrInvalidDestination)
				_, err = h.Destinations.Destination(ctx, "dest_1")
				assert.ErrorIs(t, err, hookrelay.ErrDestinationNotFound, "a refused destination is not stored (TenantID %s)", errtext.Quote(bad))
			}
		}
	})

	t.Run("PutReplacesAndTheNextReadSeesIt", func(t *testing.T) {
		h := newHarness(t)
		d := full()
		require.NoError(t, h.Destinations.Put(ctx, d))
		d.URL, d.Secrets, d.Policy, d.Paused, d.Disabled, d.DisabledReason = "https://hooks.example/v2", []string{"whsec_bmV3"}, nil, false, false, ""
		require.NoError(t, h.Destinations.Put(ctx, d))
		got, err := h.Destinations.Destination(ctx, d.ID)
		require.NoError(t, err)
		assert.Equal(t, d.URL, got.URL, "a corrected URL takes effect on the next attempt")
		assert.Equal(t, d.Secrets, got.Secrets)
		assert.Nil(t, got.Policy)
		assert.False(t, got.Disabled)
	})

	t.Run("UnknownDestination", func(t *testing.T) {
		h := newHarness(t)
		_, err := h.Destinations.Destination(ctx, "dest_missing")
		assert.ErrorIs(t, err, hookrelay.ErrDestinationNotFound)
		assert.ErrorIs(t, h.Destinations.Disable(ctx, hookrelay.DisableParams{ID: "dest_missing", Reason: "gone", Now: base}), hookrelay.ErrDestinationNotFound)
		assert.ErrorIs(t, h.Destinations.SetPaused(ctx, "dest_missing", true), hookrelay.ErrDestinationNotFound)
	})

	t.Run("DisableKeepsTheFirstReason", func(t *testing.T) {
		h := newHarness(t)
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_1", URL: "https://hooks.example/in"}))
		require.NoError(t, h.Destinations.Disable(ctx, hookrelay.DisableParams{ID: "dest_1", Reason: hookrelay.ReasonDestinationGone, Now: base}))
		require.NoError(t, h.Destinations.Disable(ctx, hookrelay.DisableParams{ID: "dest_1", Reason: "later", Now: base.Add(time.Hour)}), "disabling twice is a no-op")
		got, err := h.Destinations.Destination(ctx, "dest_1")
		require.NoError(t, err)
		assert.True(t, got.Disabled)
		assert.Equal(t, hookrelay.ReasonDestinationGone, got.DisabledReason)
	})

	t.Run("ALongOrMalformedDisabledReasonIsKeptAsStorableText", func(t *testing.T) {
		// The reason may come from a recipient's answer or an operator;
		// whatever its size or bytes, the destination is disabled.
		h := newHarness(t)
		put := "bad\xff\x00" + strings.Repeat("é", hookrelay.MaxStoredTextBytes)
		disable := strings.Repeat("世", hookrelay.MaxStoredTextBytes)
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_1", URL: "https://hooks.example/in", Disabled: true, DisabledReason: put}))
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_2", URL: "https://hooks.example/in"}))
		require.NoError(t, h.Destinations.Disable(ctx, hookrelay.DisableParams{ID: "dest_2", Reason: disable, Now: base}))
		for id, wrote := range map[string]string{"dest_1": put, "dest_2": disable} {
			got, err := h.Destinations.Destination(ctx, id)
			require.NoError(t, err)
			assert.True(t, got.Disabled, id)
			assert.True(t, got.DisabledReason == hookrelay.StorableText(wrote), "%s: DisabledReason is StorableText of the reason given (%d bytes stored, %d expected)",
				id, len(got.DisabledReason), len(hookrelay.StorableText(wrote)))
		}
	})

	t.Run("LargeHeadersSecretsAndURLRoundTrip", func(t *testing.T) {
		// What one store holds, every store holds: 64 KiB is a limit of
		// a MySQL BLOB, not of a destination.
		h := newHarness(t)
		headers := map[string]string{}
		for i := range 40 {
			headers[fmt.Sprintf("X-Custom-%02d", i)] = strings.Repeat("h", 2048)
		}
		d := hookrelay.Destination{
			ID: "dest_1", URL: "https://hooks.example/in?token=" + strings.Repeat("u", 70<<10),
			Secrets: []string{"whsec_" + strings.Repeat("s", 70<<10)}, Headers: headers,
			EventTypes: make([]string, 0, 3000),
		}
		for i := range 3000 {
			d.EventTypes = append(d.EventTypes, fmt.Sprintf("lease.type_%04d.changed", i))
		}
		require.NoError(t, h.Destinations.Put(ctx, d))
		got, err := h.Destinations.Destination(ctx, d.ID)
		require.NoError(t, err)
		assert.True(t, got.URL == d.URL, "URL: %d bytes stored, %d written", len(got.URL), len(d.URL))
		assert.Equal(t, d.Secrets, got.Secrets)
		assert.Equal(t, d.Headers, got.Headers)
		assert.Equal(t, d.EventTypes, got.EventTypes)
	})

	t.Run("PauseAndResume", func(t *testing.T) {
		h := newHarness(t)
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_1", URL: "https://hooks.example/in"}))
		for _, paused := range []bool{true, true, false, false} {
			require.NoError(t, h.Destinations.SetPaused(ctx, "dest_1", paused))
			got, err := h.Destinations.Destination(ctx, "dest_1")
			require.NoError(t, err)
			assert.Equal(t, paused, got.Paused)
		}
	})

	t.Run("ReadsReturnCopies", func(t *testing.T) {
		h := newHarness(t)
		require.NoError(t, h.Destinations.Put(ctx, full()))
		got, err := h.Destinations.Destination(ctx, "dest_full")
		require.NoError(t, err)
		got.Secrets[0], got.Headers["Authorization"], got.Policy.MaxAttempts = "whsec_changed", "changed", 99
		again, err := h.Destinations.Destination(ctx, "dest_full")
		require.NoError(t, err)
		assert.Equal(t, full().Secrets, again.Secrets, "a caller cannot edit the stored destination through a read")
		assert.Equal(t, full().Headers, again.Headers)
		assert.Equal(t, 3, again.Policy.MaxAttempts)
	})

	t.Run("CancelledContextIsRefused", func(t *testing.T) {
		h := newHarness(t)
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_1", URL: "https://hooks.example/in"}))
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		_, err := h.Destinations.Destination(cancelled, "dest_1")
		assert.ErrorIs(t, err, context.Canceled, "Destination")
		assert.ErrorIs(t, h.Destinations.Disable(cancelled, hookrelay.DisableParams{ID: "dest_1", Reason: "gone", Now: base}), context.Canceled, "Disable")
		got, err := h.Destinations.Destination(ctx, "dest_1")
		require.NoError(t, err)
		assert.False(t, got.Disabled, "a refused Disable changed nothing")
		if en, ok := hookrelay.As[hookrelay.DestinationEnabler](h.Destinations); ok {
			require.NoError(t, h.Destinations.Disable(ctx, hookrelay.DisableParams{ID: "dest_1", Reason: "gone", Now: base}))
			assert.ErrorIs(t, en.Enable(cancelled, "dest_1"), context.Canceled, "Enable")
			got, err := h.Destinations.Destination(ctx, "dest_1")
			require.NoError(t, err)
			assert.True(t, got.Disabled, "a refused Enable changed nothing")
		}
		if l, ok := hookrelay.As[hookrelay.DestinationLister](h.Destinations); ok {
			_, err := l.ListDestinations(cancelled)
			assert.ErrorIs(t, err, context.Canceled, "ListDestinations")
		}
	})
}
