package hookrelay_test

import (
	"context"
	"encoding/base64"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

func TestEnqueueBoundsTheScope(t *testing.T) {
	many := map[string]string{}
	for i := range hookrelay.MaxScopeLabels + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	tests := []struct {
		name  string
		scope map[string]string
		ok    bool
	}{
		{"at the label limit", func() map[string]string {
			m := map[string]string{}
			for k := range many {
				if len(m) < hookrelay.MaxScopeLabels {
					m[k] = "v"
				}
			}
			return m
		}(), true},
		{"over the label limit", many, false},
		{"key at the limit", map[string]string{strings.Repeat("k", hookrelay.MaxScopeKeyBytes): "v"}, true},
		{"key over the limit", map[string]string{strings.Repeat("k", hookrelay.MaxScopeKeyBytes+1): "v"}, false},
		{"value at the limit", map[string]string{"lease": strings.Repeat("v", hookrelay.MaxScopeValueBytes)}, true},
		{"20 MiB value", map[string]string{"lease": strings.Repeat("v", 20<<20)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, s := newClient(t)
			p := validParams()
			p.Scope = tc.scope
			_, err := c.Enqueue(context.Background(), p)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, hookrelay.ErrInvalidDelivery)
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, "Scope", ve.Field)
			assert.Less(t, len(err.Error()), 400, "the error quotes at most a prefix: %.500s", err)
			_, getErr := s.Get(context.Background(), hookrelay.DeliveryID(p.EventID, p.DestinationID))
			assert.ErrorIs(t, getErr, hookrelay.ErrNotFound, "nothing was stored")
		})
	}
}

// TestErrorsQuoteAShortPrefixOfTheInput: a 100 KB input makes a short
// error, whichever check refuses it.
func TestErrorsQuoteAShortPrefixOfTheInput(t *testing.T) {
	huge := "evt_" + strings.Repeat("x", 100<<10)
	tests := []struct {
		name   string
		mutate func(*hookrelay.EnqueueParams)
	}{
		{"event ID", func(p *hookrelay.EnqueueParams) { p.EventID = huge }},
		{"event ID with a bad payload", func(p *hookrelay.EnqueueParams) { p.EventID = huge[:255]; p.Payload = make([]byte, 65) }},
		{"tenant", func(p *hookrelay.EnqueueParams) { p.TenantID = huge }},
		{"destination", func(p *hookrelay.EnqueueParams) { p.DestinationID = huge }},
		{"event type", func(p *hookrelay.EnqueueParams) { p.EventType = huge }},
		{"unknown destination", func(p *hookrelay.EnqueueParams) { p.EventID = huge[:255]; p.DestinationID = huge[:255] }},
		{"another tenant's destination", func(p *hookrelay.EnqueueParams) { p.EventID = huge[:255]; p.TenantID = huge[:255] }},
		{"scope key", func(p *hookrelay.EnqueueParams) { p.Scope = map[string]string{huge: "v"} }},
		{"scope value", func(p *hookrelay.EnqueueParams) { p.Scope = map[string]string{huge[:255]: huge} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newClient(t)
			p := validParams()
			tc.mutate(&p)
			_, err := c.Enqueue(context.Background(), p)
			require.Error(t, err)
			assert.Less(t, len(err.Error()), 400, "%.500s", err)
		})
	}
}

// timeoutSender is a Sender whose attempts are bounded by a timeout.
type timeoutSender struct{ d time.Duration }

func (timeoutSender) Send(context.Context, hookrelay.SendParams) hookrelay.Result {
	return hookrelay.Delivered(200)
}

func (s timeoutSender) SendTimeout(dest hookrelay.Destination) time.Duration {
	if dest.Timeout > 0 {
		return dest.Timeout
	}
	return s.d
}

func TestEnqueueRefusesALeaseShorterThanTheSendTimeout(t *testing.T) {
	plain := hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(200) })
	tests := []struct {
		name     string
		sender   hookrelay.Sender
		leaseFor time.Duration
		dest     time.Duration
		ok       bool
	}{
		{"sender timeout below the lease", timeoutSender{10 * time.Second}, time.Minute, 0, true},
		{"sender timeout over the lease", timeoutSender{10 * time.Second}, 5 * time.Second, 0, false},
		{"sender timeout equal to the lease", timeoutSender{10 * time.Second}, 10 * time.Second, 0, false},
		{"destination timeout over the lease", timeoutSender{time.Second}, 5 * time.Second, 30 * time.Second, false},
		{"destination timeout over the lease, plain sender", plain, 5 * time.Second, 30 * time.Second, false},
		{"destination timeout below the default lease", plain, 0, 30 * time.Second, true},
		{"enqueue-only client: the workers' lease is not its own", nil, 5 * time.Second, 30 * time.Second, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, dests := newStore()
			require.NoError(t, dests.Put(context.Background(), hookrelay.Destination{ID: "slow", URL: "https://slow.example/", Timeout: tc.dest}))
			c, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: dests, Sender: tc.sender, LeaseFor: tc.leaseFor})
			require.NoError(t, err)
			p := validParams()
			p.DestinationID = "slow"
			_, err = c.Enqueue(context.Background(), p)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, hookrelay.ErrInvalidConfig)
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, "LeaseFor", ve.Field)
			_, getErr := s.Get(context.Background(), hookrelay.DeliveryID(p.EventID, p.DestinationID))
			assert.ErrorIs(t, getErr, hookrelay.ErrNotFound, "nothing was stored")
		})
	}
}

func TestPolicyRefusesRetriesWithNoDelay(t *testing.T) {
	p := hookrelay.Policy{Version: "hammer", MaxAttempts: 1000, BaseDelay: 0, MaxDelay: 0}
	err := p.Validate()
	require.ErrorIs(t, err, hookrelay.ErrInvalidPolicy)
	var ve *hookrelay.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "BaseDelay", ve.Field)

	s, dests := newStore()
	_, err = hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: dests, Policy: &p})
	assert.ErrorIs(t, err, hookrelay.ErrInvalidPolicy, "New refuses it as the default policy")

	p.BaseDelay, p.MaxDelay = hookrelay.MinRetryDelay, hookrelay.MinRetryDelay
	assert.NoError(t, p.Validate(), "the floor itself is accepted")
	assert.NoError(t, hookrelay.Policy{Version: "once", MaxAttempts: 1}.Validate(), "a policy that never retries needs no delay")
}

func TestRedriveRefusesABlankActorOrReason(t *testing.T) {
	c, _ := newClient(t)
	for _, tc := range []struct{ actor, reason, field string }{
		{"", "moved", "Actor"},
		{" \t\n", "moved", "Actor"},
		{"ops@example", "   ", "Reason"},
		{"ops@example", "\u00a0", "Reason"},
	} {
		_, err := c.Redrive(context.Background(), hookrelay.RedriveParams{Actor: tc.actor, Reason: tc.reason, RatePerSecond: 1})
		require.ErrorIs(t, err, hookrelay.ErrInvalidRequest, "%q %q", tc.actor, tc.reason)
		var ve *hookrelay.ValidationError
		require.ErrorAs(t, err, &ve)
		assert.Equal(t, tc.field, ve.Field)
	}
	_, err := c.StopRedrive(context.Background(), "rdv_x", "  ")
	assert.ErrorIs(t, err, hookrelay.ErrInvalidRequest)
}

// TestOperatorErrorsQuoteAShortPrefix: the operator API given a 100 KB
// argument answers with a short error.
func TestOperatorErrorsQuoteAShortPrefix(t *testing.T) {
	c, _ := newClient(t)
	huge := strings.Repeat("x", 100<<10)
	ctx := context.Background()
	_, err := c.DeadLetters(ctx, hookrelay.DeadLettersParams{Cursor: huge})
	require.ErrorIs(t, err, hookrelay.ErrInvalidRequest)
	assert.Less(t, len(err.Error()), 400, "%.500s", err)
	err = c.PauseDestination(ctx, huge)
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 400, "%.1000s", err)
	_, err = c.Delivery(ctx, huge)
	require.ErrorIs(t, err, hookrelay.ErrNotFound)
	assert.Less(t, len(err.Error()), 400, "%.1000s", err)
	err = c.EnableDestination(ctx, huge)
	require.ErrorIs(t, err, hookrelay.ErrDestinationNotFound)
	assert.Less(t, len(err.Error()), 400, "EnableDestination: %.1000s", err)
	_, err = c.DestinationStatus(ctx, huge)
	require.ErrorIs(t, err, hookrelay.ErrDestinationNotFound)
	assert.Less(t, len(err.Error()), 400, "DestinationStatus: %.1000s", err)
}

// An OpError names a plain delivery ID as it is, and quotes any other (a
// line break, bytes that are not UTF-8, a space), so an ID cannot split a
// log line or make one invalid text.
func TestOpErrorQuotesADeliveryIDThatIsNotPlain(t *testing.T) {
	e := &hookrelay.OpError{Op: "ledger.get", DeliveryID: "whd_4f2a", Err: errors.New("down")}
	assert.Equal(t, "hookrelay: ledger.get whd_4f2a: down", e.Error())
	for id, want := range map[string]string{
		"whd_1\nlevel=error forged": `"whd_1\nlevel=error forged"`,
		"whd_\xff":                  `"whd_\xff"`,
		"whd 1":                     `"whd 1"`,
	} {
		e.DeliveryID = id
		assert.Equal(t, "hookrelay: ledger.get "+want+": down", e.Error())
	}
}

// TestDeadLetterFilterListsAreBounded: each list of a selection takes
// MaxFilterValues values and no more, whichever list it is and whichever
// operator call gets it; the error names the list.
func TestDeadLetterFilterListsAreBounded(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	values := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "v" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
		}
		return out
	}
	for _, field := range []string{"TenantIDs", "DestinationIDs", "EventTypes", "Reasons"} {
		filter := func(n int) hookrelay.DeadLetterFilter {
			var f hookrelay.DeadLetterFilter
			switch field {
			case "TenantIDs":
				f.TenantIDs = values(n)
			case "DestinationIDs":
				f.DestinationIDs = values(n)
			case "EventTypes":
				f.EventTypes = values(n)
			case "Reasons":
				f.Reasons = values(n)
			}
			return f
		}
		require.NoError(t, filter(hookrelay.MaxFilterValues).Validate(), field)
		_, err := c.PlanRedrive(ctx, filter(hookrelay.MaxFilterValues))
		require.NoError(t, err, "%s at the limit", field)
		_, err = c.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: filter(hookrelay.MaxFilterValues)})
		require.NoError(t, err, "%s at the limit", field)
		for name, call := range map[string]func() error{
			"Validate": func() error { return filter(hookrelay.MaxFilterValues + 1).Validate() },
			"PlanRedrive": func() error {
				_, err := c.PlanRedrive(ctx, filter(hookrelay.MaxFilterValues+1))
				return err
			},
			"DeadLetters": func() error {
				_, err := c.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: filter(hookrelay.MaxFilterValues + 1)})
				return err
			},
			"Redrive": func() error {
				_, err := c.Redrive(ctx, hookrelay.RedriveParams{Filter: filter(hookrelay.MaxFilterValues + 1), Actor: "ops", Reason: "r", RatePerSecond: 1})
				return err
			},
		} {
			err := call()
			require.ErrorIs(t, err, hookrelay.ErrInvalidRequest, "%s with %s over the limit", name, field)
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, "Filter."+field, ve.Field, name)
			assert.Contains(t, ve.Problem, "1001 values, over the 1000-value limit", name)
		}
	}
}

// TestDeadLetterFilterValuesNoRecordHoldsAreRefused: a selection value
// that is not UTF-8 or holds a NUL byte is refused naming the entry, by
// every operator call, whatever the store.
func TestDeadLetterFilterValuesNoRecordHoldsAreRefused(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	for _, tc := range []struct {
		filter hookrelay.DeadLetterFilter
		field  string
	}{
		{hookrelay.DeadLetterFilter{TenantIDs: []string{"tenant_a", "bad\xff"}}, "Filter.TenantIDs[1]"},
		{hookrelay.DeadLetterFilter{DestinationIDs: []string{"nul\x00inside"}}, "Filter.DestinationIDs[0]"},
		{hookrelay.DeadLetterFilter{EventTypes: []string{"a", "b", "\xc3"}}, "Filter.EventTypes[2]"},
		{hookrelay.DeadLetterFilter{Reasons: []string{"\x00"}}, "Filter.Reasons[0]"},
	} {
		for name, call := range map[string]func() error{
			"Validate": tc.filter.Validate,
			"PlanRedrive": func() error {
				_, err := c.PlanRedrive(ctx, tc.filter)
				return err
			},
			"DeadLetters": func() error {
				_, err := c.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: tc.filter})
				return err
			},
			"Redrive": func() error {
				_, err := c.Redrive(ctx, hookrelay.RedriveParams{Filter: tc.filter, Actor: "ops", Reason: "r", RatePerSecond: 1})
				return err
			},
		} {
			err := call()
			require.ErrorIs(t, err, hookrelay.ErrInvalidRequest, "%s %s", name, tc.field)
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tc.field, ve.Field, name)
			assert.True(t, utf8.ValidString(err.Error()), "%s: the error is UTF-8", name)
		}
	}
}

// TestDeadLetterCursorAndTimeBoundsNoRecordHasAreRefused: an edited cursor
// naming an ID no record holds or a time no store encodes, and a DeadSince
// or DeadBefore outside the storable years, are refused naming the field;
// a cursor the client made parses back.
func TestDeadLetterCursorAndTimeBoundsNoRecordHasAreRefused(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 123, time.UTC)
	good := hookrelay.DeadLetterCursor{DeadAt: at, ID: "whd_é"}
	got, err := hookrelay.ParseDeadLetterCursor(good.String())
	require.NoError(t, err)
	assert.True(t, got.DeadAt.Equal(at) && got.ID == good.ID, "%v", got)
	for _, tok := range []string{
		hookrelay.DeadLetterCursor{DeadAt: at, ID: "whd_\xff"}.String(),
		hookrelay.DeadLetterCursor{DeadAt: at, ID: "whd_\x00"}.String(),
		base64.RawURLEncoding.EncodeToString([]byte("-9223372036854775808|whd_1")),
	} {
		_, err := hookrelay.ParseDeadLetterCursor(tok)
		require.ErrorIs(t, err, hookrelay.ErrInvalidRequest, tok)
		_, err = c.DeadLetters(ctx, hookrelay.DeadLettersParams{Cursor: tok})
		var ve *hookrelay.ValidationError
		require.ErrorAs(t, err, &ve, tok)
		assert.Equal(t, "Cursor", ve.Field)
	}
	ancient, far := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		filter hookrelay.DeadLetterFilter
		field  string
	}{
		{hookrelay.DeadLetterFilter{DeadSince: ancient}, "Filter.DeadSince"},
		{hookrelay.DeadLetterFilter{DeadBefore: far}, "Filter.DeadBefore"},
	} {
		_, err := c.PlanRedrive(ctx, tc.filter)
		var ve *hookrelay.ValidationError
		require.ErrorAs(t, err, &ve, tc.field)
		assert.Equal(t, tc.field, ve.Field)
		_, err = c.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: tc.filter})
		require.ErrorIs(t, err, hookrelay.ErrInvalidRequest, tc.field)
	}
	_, err = c.PlanRedrive(ctx, hookrelay.DeadLetterFilter{DeadSince: time.Unix(0, math.MinInt64+1), DeadBefore: time.Unix(0, math.MaxInt64)})
	require.NoError(t, err, "the storable range's ends")
}

// TestPolicyVersionNoStoreHoldsIsRefused: a policy's Version is stored on
// every record it makes, so one that is not UTF-8 or holds a NUL byte is
// refused where the policy is given (Config.Policy, a destination's
// Policy), naming Version, not at each enqueue as an invalid delivery
// (the memory store) or stored changed (a SQL store keeping the
// destination's policy as JSON).
func TestPolicyVersionNoStoreHoldsIsRefused(t *testing.T) {
	for _, v := range []string{"v\xff", "v\x00"} {
		p := hookrelay.DefaultPolicy()
		p.Version = v
		err := p.Validate()
		require.ErrorIs(t, err, hookrelay.ErrInvalidPolicy, "%q", v)
		var ve *hookrelay.ValidationError
		require.ErrorAs(t, err, &ve)
		assert.Equal(t, "Version", ve.Field)

		_, err = hookrelay.New(hookrelay.Config{Queue: memory.NewStore(), Ledger: memory.NewStore(), Destinations: memory.NewDestinations(), Policy: &p})
		assert.ErrorIs(t, err, hookrelay.ErrInvalidPolicy, "Config.Policy %q", v)
		err = memory.NewDestinations().Put(context.Background(), hookrelay.Destination{ID: "dest_1", URL: "https://hooks.example/in", Policy: &p})
		assert.ErrorIs(t, err, hookrelay.ErrInvalidPolicy, "a destination's Policy %q", v)
	}
	p := hookrelay.DefaultPolicy()
	p.Version = strings.Repeat("é", 32) // 64 bytes: at the limit
	assert.NoError(t, p.Validate())
}

// TestDeadLetterFilterRefusesAnEmptyTimeWindow: a DeadSince at or after
// DeadBefore selects nothing whatever is stored, so every operator call
// refuses it naming both fields, rather than answering an empty list or
// a redrive of nothing as if nothing had been dead-lettered.
func TestDeadLetterFilterRefusesAnEmptyTimeWindow(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for name, f := range map[string]hookrelay.DeadLetterFilter{
		"inverted": {DeadSince: at.Add(time.Hour), DeadBefore: at},
		"equal":    {DeadSince: at, DeadBefore: at},
	} {
		for call, run := range map[string]func() error{
			"Validate": f.Validate,
			"PlanRedrive": func() error {
				_, err := c.PlanRedrive(ctx, f)
				return err
			},
			"DeadLetters": func() error {
				_, err := c.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: f})
				return err
			},
			"Redrive": func() error {
				_, err := c.Redrive(ctx, hookrelay.RedriveParams{Filter: f, Actor: "ops", Reason: "r", RatePerSecond: 1})
				return err
			},
		} {
			err := run()
			require.ErrorIs(t, err, hookrelay.ErrInvalidRequest, "%s %s", call, name)
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve, "%s %s", call, name)
			assert.Equal(t, "Filter.DeadSince", ve.Field, "%s %s", call, name)
			assert.Contains(t, err.Error(), "Filter.DeadBefore", "%s %s: the error names both bounds", call, name)
		}
	}
	for _, f := range []hookrelay.DeadLetterFilter{
		{DeadSince: at, DeadBefore: at.Add(time.Nanosecond)},
		{DeadSince: at},
		{DeadBefore: at},
	} {
		assert.NoError(t, f.Validate(), "%v", f)
	}
	// A redrive's own bound (its snapshot) is not the caller's: a window
	// starting after now is valid and moves nothing.
	a, err := c.Redrive(ctx, hookrelay.RedriveParams{Filter: hookrelay.DeadLetterFilter{DeadSince: time.Now().Add(time.Hour)}, Actor: "ops", Reason: "r", RatePerSecond: 1})
	require.NoError(t, err)
	assert.Equal(t, hookrelay.RedriveFinished, a.State)
}

// TestRedriveRefusesARateOutsideItsBound: RatePerSecond must be a
// positive, finite number of at most MaxRedriveRate, whoever calls
// Redrive (RedriveParams.Validate says the same before anything is read).
func TestRedriveRefusesARateOutsideItsBound(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	for _, r := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1), math.Nextafter(hookrelay.MaxRedriveRate, math.Inf(1))} {
		p := hookrelay.RedriveParams{Actor: "ops", Reason: "r", RatePerSecond: r}
		for call, err := range map[string]error{"Validate": p.Validate(), "Redrive": func() error { _, err := c.Redrive(ctx, p); return err }()} {
			require.ErrorIs(t, err, hookrelay.ErrInvalidRequest, "%s rate %v", call, r)
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve, "%s rate %v", call, r)
			assert.Equal(t, "RatePerSecond", ve.Field, "%s rate %v", call, r)
			assert.Contains(t, ve.Problem, "at most 1e+06", "%s rate %v: the bound is named", call, r)
		}
	}
	a, err := c.Redrive(ctx, hookrelay.RedriveParams{Actor: "ops", Reason: "r", RatePerSecond: hookrelay.MaxRedriveRate})
	require.NoError(t, err, "the bound itself is accepted")
	assert.Equal(t, hookrelay.RedriveFinished, a.State)
}
