package hookrelay_test

import (
	"context"
	"errors"
	"math"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBackoffFullJitter(t *testing.T) {
	p := hookrelay.DefaultPolicy()
	tests := []struct {
		attempt int
		random  float64
		want    time.Duration
	}{
		{1, 0.5, 500 * time.Millisecond},
		{2, 0.5, time.Second},
		{3, 0.5, 2 * time.Second},
		{1, 0, 0},
		{1, 0.999, 999 * time.Millisecond},
		{11, 0.5, 7*time.Minute + 30*time.Second}, // 1s·2^10 = 1024 s, capped at 15 min
		{7, 1.5, 64*time.Second - 1},              // out-of-range random is clamped below 1
		{0, 0.5, 500 * time.Millisecond},          // attempt < 1 treated as the first
		{3, math.NaN(), 0},                        // NaN is out of range too
		{3, -0.5, 0},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, hookrelay.Backoff(p, tc.attempt, tc.random), "attempt %d random %v", tc.attempt, tc.random)
	}
}

func TestBackoffNeverOverflows(t *testing.T) {
	for _, p := range []hookrelay.Policy{
		hookrelay.DefaultPolicy(),
		{Version: "huge", MaxAttempts: 1000, BaseDelay: time.Hour, MaxDelay: 1<<63 - 1},
		{Version: "tiny", MaxAttempts: 1000, BaseDelay: time.Nanosecond, MaxDelay: time.Second},
	} {
		prev := time.Duration(0)
		for attempt := 1; attempt <= 10_000; attempt++ {
			c := hookrelay.BackoffCeiling(p, attempt)
			require.GreaterOrEqual(t, c, prev, "%s: ceiling never shrinks (attempt %d)", p.Version, attempt)
			require.LessOrEqual(t, c, p.MaxDelay, "%s: ceiling within the cap (attempt %d)", p.Version, attempt)
			require.GreaterOrEqual(t, hookrelay.Backoff(p, attempt, 0.999999), time.Duration(0))
			prev = c
		}
		assert.Equal(t, p.MaxDelay, hookrelay.BackoffCeiling(p, 10_000), "%s: large attempts sit at the cap", p.Version)
	}
}

func TestNextDelayHonoursRetryAfterWithinTheCap(t *testing.T) {
	p := hookrelay.DefaultPolicy()
	assert.Equal(t, 500*time.Millisecond, hookrelay.NextDelay(p, 1, 0.5, 0), "no Retry-After: jitter")
	assert.Equal(t, 500*time.Millisecond, hookrelay.NextDelay(p, 1, 0.5, 100*time.Millisecond), "a shorter Retry-After does not shorten the backoff")
	assert.Equal(t, 2*time.Minute, hookrelay.NextDelay(p, 1, 0.5, 2*time.Minute), "a longer Retry-After is honoured")
	assert.Equal(t, 15*time.Minute, hookrelay.NextDelay(p, 1, 0.5, 24*time.Hour), "but capped by the policy")
}

func TestPolicyValidationNamesTheField(t *testing.T) {
	ok := hookrelay.DefaultPolicy()
	require.NoError(t, ok.Validate())
	tests := []struct {
		field  string
		mutate func(*hookrelay.Policy)
	}{
		{"MaxAttempts", func(p *hookrelay.Policy) { p.MaxAttempts = 0 }},
		{"MaxAttempts", func(p *hookrelay.Policy) { p.MaxAttempts = -3 }},
		{"BaseDelay", func(p *hookrelay.Policy) { p.BaseDelay = -time.Second }},
		{"MaxDelay", func(p *hookrelay.Policy) { p.MaxDelay = -time.Second }},
		{"MaxDelay", func(p *hookrelay.Policy) { p.MaxDelay = p.BaseDelay / 2 }},
		{"MaxAge", func(p *hookrelay.Policy) { p.MaxAge = -time.Minute }},
		{"Version", func(p *hookrelay.Policy) { p.Version = "" }},
	}
	for _, tc := range tests {
		p := hookrelay.DefaultPolicy()
		tc.mutate(&p)
		err := p.Validate()
		require.ErrorIs(t, err, hookrelay.ErrInvalidPolicy, tc.field)
		var ve *hookrelay.ValidationError
		require.ErrorAs(t, err, &ve)
		assert.Equal(t, tc.field, ve.Field)
		assert.Contains(t, err.Error(), tc.field)
	}
}

func TestDefaultPolicyIsSevenAttemptsFromOneSecondUpToFifteenMinutes(t *testing.T) {
	p := hookrelay.DefaultPolicy()
	assert.Equal(t, 7, p.MaxAttempts)
	assert.Equal(t, time.Second, p.BaseDelay)
	assert.Equal(t, 15*time.Minute, p.MaxDelay)
}

// The delivery ID is a compatibility contract: two versions of the library
// must derive the same ID for the same (event, destination), or
// deduplication breaks during a rolling deploy. These vectors were computed
// independently (UUIDv5 over the length-prefixed pair) and must never change.
func TestDeliveryIDIsStableAcrossVersions(t *testing.T) {
	assert.Equal(t, "whd_05a2585a-1458-5049-80ae-c57d046daea0", hookrelay.DeliveryID("evt_42", "dest_accounting"))
	assert.Equal(t, "whd_f36758b6-a805-5b07-a73e-5d72786273ea", hookrelay.DeliveryID("pay_7319", "acct_integration"))
	assert.Equal(t, hookrelay.DeliveryID("evt_42", "dest_accounting"), hookrelay.DeliveryID("evt_42", "dest_accounting"))
	assert.NotEqual(t, hookrelay.DeliveryID("ab", "c"), hookrelay.DeliveryID("a", "bc"), "the pair is unambiguous")
	assert.NotEqual(t, hookrelay.DeliveryID("evt_42", "dest_a"), hookrelay.DeliveryID("evt_42", "dest_b"), "one ID per destination")
}

func TestEnvelopeReadsVersionOne(t *testing.T) {
	// testdata/envelope_v1.json was written by envelope version 1; every
	// later version of the library must keep reading it.
	b, err := os.ReadFile("testdata/envelope_v1.json")
	require.NoError(t, err)
	d, err := hookrelay.UnmarshalEnvelope(b)
	require.NoError(t, err)
	assert.Equal(t, "whd_f36758b6-a805-5b07-a73e-5d72786273ea", d.ID)
	assert.Equal(t, hookrelay.DeliveryID(d.EventID, d.DestinationID), d.ID)
	assert.Equal(t, "lease.payment_recorded", d.EventType)
	assert.Equal(t, `{"leaseId":"lease_881","paymentId":"pay_7319","amountCents":125000}`, string(d.Payload))
	assert.Equal(t, map[string]string{"lease": "lease_881", "property": "prop_204"}, d.Scope)
	assert.Equal(t, 2, d.Attempt)
	assert.Equal(t, 1, d.EnvelopeVersion)
	assert.True(t, d.NextAttemptAt.Equal(time.Date(2026, 3, 4, 5, 6, 7, 5e8, time.UTC)))
}

func TestEnvelopeRoundTrip(t *testing.T) {
	in := hookrelay.Delivery{
		ID: hookrelay.DeliveryID("e", "d"), EventID: "e", TenantID: "t", DestinationID: "d",
		EventType: "x", Payload: []byte{0, 0xff, 'a'}, Attempt: 3, PolicyVersion: "p",
		FirstQueuedAt: time.Unix(100, 0).UTC(), NextAttemptAt: time.Unix(200, 0).UTC(),
	}
	b, err := hookrelay.MarshalEnvelope(in)
	require.NoError(t, err)
	out, err := hookrelay.UnmarshalEnvelope(b)
	require.NoError(t, err)
	in.EnvelopeVersion, in.State = hookrelay.EnvelopeVersion, hookrelay.StatePending
	assert.Equal(t, in, out)
}

func TestEnvelopeRefusesUnknownVersionsAndGarbage(t *testing.T) {
	_, err := hookrelay.UnmarshalEnvelope([]byte(`{"v":2,"id":"whd_x"}`))
	require.ErrorIs(t, err, hookrelay.ErrUnknownEnvelopeVersion)
	assert.Contains(t, err.Error(), "version 2")
	// A version below 1 was never written by any library: the message is
	// malformed (dead-lettered), not a newer library's (parked forever).
	for _, bad := range []string{`not json`, `{"id":"whd_x"}`, `{"v":1}`, `{"v":1,"id":5}`,
		`{"v":0,"id":"whd_x","event_id":"e","destination_id":"d"}`, `{"v":-1,"id":"whd_x","event_id":"e","destination_id":"d"}`} {
		_, err := hookrelay.UnmarshalEnvelope([]byte(bad))
		assert.Error(t, err, bad)
		assert.False(t, errors.Is(err, hookrelay.ErrUnknownEnvelopeVersion), bad)
	}
}

func TestClassifyStatusTable(t *testing.T) {
	tests := []struct {
		code    int
		kind    hookrelay.Kind
		reason  string
		disable bool
	}{
		{200, hookrelay.KindDelivered, "", false},
		{204, hookrelay.KindDelivered, "", false},
		{299, hookrelay.KindDelivered, "", false},
		{301, hookrelay.KindPermanent, hookrelay.ReasonRedirect, false},
		{308, hookrelay.KindPermanent, hookrelay.ReasonRedirect, false},
		{400, hookrelay.KindPermanent, hookrelay.ReasonBadRequest, false},
		{401, hookrelay.KindPermanent, hookrelay.ReasonAuthRejected, false},
		{403, hookrelay.KindPermanent, hookrelay.ReasonAuthRejected, false},
		{404, hookrelay.KindPermanent, hookrelay.ReasonNotFound, false},
		{408, hookrelay.KindRetryable, hookrelay.ReasonRequestTimeout, false},
		{410, hookrelay.KindPermanent, hookrelay.ReasonDestinationGone, true},
		{413, hookrelay.KindPermanent, hookrelay.ReasonPayloadTooLarge, false},
		{418, hookrelay.KindPermanent, hookrelay.ReasonClientError, false},
		{422, hookrelay.KindPermanent, hookrelay.ReasonUnprocessable, false},
		{425, hookrelay.KindRetryable, hookrelay.ReasonTooEarly, false},
		{429, hookrelay.KindRetryable, hookrelay.ReasonRateLimited, false},
		{500, hookrelay.KindRetryable, hookrelay.ReasonServerError, false},
		{501, hookrelay.KindRetryable, hookrelay.ReasonServerError, false},
		{502, hookrelay.KindRetryable, hookrelay.ReasonBadGateway, false},
		{503, hookrelay.KindRetryable, hookrelay.ReasonServiceUnavailable, false},
		{504, hookrelay.KindRetryable, hookrelay.ReasonGatewayTimeout, false},
		{100, hookrelay.KindRetryable, hookrelay.ReasonUnexpectedStatus, false},
		{101, hookrelay.KindRetryable, hookrelay.ReasonUnexpectedStatus, false},
		{199, hookrelay.KindRetryable, hookrelay.ReasonUnexpectedStatus, false},
		{300, hookrelay.KindPermanent, hookrelay.ReasonRedirect, false},
		{399, hookrelay.KindPermanent, hookrelay.ReasonRedirect, false},
		{409, hookrelay.KindPermanent, hookrelay.ReasonClientError, false}, // hookhttp.DefaultClassify adds the Retry-After row
		{499, hookrelay.KindPermanent, hookrelay.ReasonClientError, false},
		{505, hookrelay.KindRetryable, hookrelay.ReasonServerError, false},
		{599, hookrelay.KindRetryable, hookrelay.ReasonServerError, false},
		{600, hookrelay.KindRetryable, hookrelay.ReasonUnexpectedStatus, false},
		{999, hookrelay.KindRetryable, hookrelay.ReasonUnexpectedStatus, false},
		{0, hookrelay.KindRetryable, hookrelay.ReasonUnexpectedStatus, false},
		{-1, hookrelay.KindRetryable, hookrelay.ReasonUnexpectedStatus, false},
	}
	for _, tc := range tests {
		r := hookrelay.ClassifyStatus(tc.code, 7*time.Second)
		assert.Equal(t, tc.kind, r.Kind, "status %d", tc.code)
		assert.Equal(t, tc.reason, r.Reason, "status %d", tc.code)
		assert.Equal(t, tc.disable, r.DisableDestination, "status %d", tc.code)
		assert.Equal(t, tc.code, r.StatusCode)
		if tc.kind == hookrelay.KindRetryable {
			assert.Equal(t, 7*time.Second, r.RetryAfter, "Retry-After kept on retryable %d", tc.code)
		} else {
			assert.Zero(t, r.RetryAfter, "Retry-After ignored on %d", tc.code)
		}
	}
}

func TestResultHelpers(t *testing.T) {
	assert.Equal(t, hookrelay.OutcomeAccepted, hookrelay.Delivered(200).Outcome)
	assert.Equal(t, hookrelay.OutcomeRejected, hookrelay.Retryable(hookrelay.ReasonConnectionRefused).Outcome, "nothing was sent")
	u := hookrelay.Unknown(hookrelay.ReasonTimeout)
	assert.Equal(t, hookrelay.KindRetryable, u.Kind, "an unknown outcome is retried")
	assert.Equal(t, hookrelay.OutcomeUnknown, u.Outcome)
	p := hookrelay.Permanent(hookrelay.ReasonBadRequest).WithStatus(400).WithDetail("missing field")
	assert.Equal(t, hookrelay.KindPermanent, p.Kind)
	assert.Equal(t, 400, p.StatusCode)
	assert.Equal(t, "missing field", p.Detail)
}

func TestDestinationFormattingRedactsSecrets(t *testing.T) {
	d := hookrelay.Destination{ID: "dest_1", URL: "https://user:pw-SECRET@x.example/", Secrets: []string{"whsec_SECRET"}, Headers: map[string]string{"Authorization": "Bearer SECRET"}}
	for _, s := range []string{d.String(), d.GoString()} {
		assert.NotContains(t, s, "SECRET")
		assert.Contains(t, s, "dest_1")
	}
}

// Bad guard settings are refused by New with the field and the rule named;
// zero values turn each guard off, and CircuitCoolDown defaults.
func TestGuardConfigValidation(t *testing.T) {
	s, dests := newStore()
	for _, tc := range []struct {
		field, rule string
		set         func(*hookrelay.Config)
	}{
		{"DefaultMaxPerSecond", "finite positive rate", func(c *hookrelay.Config) { c.DefaultMaxPerSecond = -1 }},
		{"DefaultMaxPerSecond", "finite positive rate", func(c *hookrelay.Config) { c.DefaultMaxPerSecond = math.NaN() }},
		{"DefaultMaxPerSecond", "finite positive rate", func(c *hookrelay.Config) { c.DefaultMaxPerSecond = math.Inf(1) }},
		{"DefaultMaxPerSecond", "finite positive rate", func(c *hookrelay.Config) { c.DefaultMaxPerSecond = math.Inf(-1) }},
		{"CircuitFailureThreshold", "must not be negative", func(c *hookrelay.Config) { c.CircuitFailureThreshold = -1 }},
		{"CircuitCoolDown", "must not be negative", func(c *hookrelay.Config) { c.CircuitCoolDown = -time.Second }},
		{"DisableAfterFailingFor", "must not be negative", func(c *hookrelay.Config) { c.DisableAfterFailingFor = -time.Hour }},
	} {
		cfg := hookrelay.Config{Queue: s, Ledger: s, Destinations: dests}
		tc.set(&cfg)
		c, err := hookrelay.New(cfg)
		assert.Nil(t, c)
		var ve *hookrelay.ValidationError
		require.ErrorAs(t, err, &ve, tc.field)
		assert.ErrorIs(t, err, hookrelay.ErrInvalidConfig)
		assert.Equal(t, tc.field, ve.Field)
		assert.Contains(t, err.Error(), tc.rule, tc.field)
	}
	_, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: dests,
		DefaultMaxPerSecond: 0.5, CircuitFailureThreshold: 5, CircuitCoolDown: time.Minute, DisableAfterFailingFor: 5 * 24 * time.Hour})
	assert.NoError(t, err, "fractional rates and positive spans are fine")
}

func TestConfigValidation(t *testing.T) {
	_, err := hookrelay.New(hookrelay.Config{})
	var ve *hookrelay.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "Queue", ve.Field)
	assert.ErrorIs(t, err, hookrelay.ErrInvalidConfig)

	s, dests := newStore()
	_, err = hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: dests, Concurrency: -1})
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "Concurrency", ve.Field)

	bad := hookrelay.DefaultPolicy()
	bad.MaxAttempts = 0
	_, err = hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: dests, Policy: &bad})
	assert.ErrorIs(t, err, hookrelay.ErrInvalidPolicy)
	assert.Contains(t, err.Error(), "MaxAttempts")

	c, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: dests})
	require.NoError(t, err)
	assert.ErrorIs(t, c.Start(context.Background()), hookrelay.ErrInvalidConfig, "a client without a Sender cannot run the worker")
	assert.NoError(t, c.Stop(context.Background()), "stopping a client that never started is harmless")
}
