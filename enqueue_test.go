package hookrelay_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

func newStore() (*memory.Store, *memory.Destinations) {
	return memory.NewStore(), memory.NewDestinations(
		hookrelay.Destination{ID: "acct", TenantID: "tenant_a", URL: "https://acct.example/hooks"},
		hookrelay.Destination{ID: "shared", URL: "https://shared.example/hooks"},
	)
}

func newClient(t *testing.T, mutate ...func(*hookrelay.Config)) (*hookrelay.Client, *memory.Store) {
	t.Helper()
	s, dests := newStore()
	cfg := hookrelay.Config{Queue: s, Ledger: s, Destinations: dests, MaxPayloadBytes: 64}
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := hookrelay.New(cfg)
	require.NoError(t, err)
	return c, s
}

func validParams() hookrelay.EnqueueParams {
	return hookrelay.EnqueueParams{
		EventID: "pay_7319", TenantID: "tenant_a", DestinationID: "acct",
		EventType: "lease.payment_recorded", Payload: []byte(`{"amount":1}`),
	}
}

func TestEnqueueRefusesBadInputWithTheFieldNamed(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*hookrelay.EnqueueParams)
		field  string
		is     error
	}{
		{"empty event ID", func(p *hookrelay.EnqueueParams) { p.EventID = "" }, "EventID", hookrelay.ErrInvalidDelivery},
		{"long event ID", func(p *hookrelay.EnqueueParams) { p.EventID = strings.Repeat("e", 256) }, "EventID", hookrelay.ErrInvalidDelivery},
		{"empty tenant", func(p *hookrelay.EnqueueParams) { p.TenantID = "" }, "TenantID", hookrelay.ErrInvalidDelivery},
		{"empty destination", func(p *hookrelay.EnqueueParams) { p.DestinationID = "" }, "DestinationID", hookrelay.ErrInvalidDelivery},
		{"empty event type", func(p *hookrelay.EnqueueParams) { p.EventType = "" }, "EventType", hookrelay.ErrInvalidDelivery},
		{"payload over the limit", func(p *hookrelay.EnqueueParams) { p.Payload = make([]byte, 65) }, "Payload", hookrelay.ErrInvalidDelivery},
		{"unknown envelope version", func(p *hookrelay.EnqueueParams) { p.EnvelopeVersion = hookrelay.EnvelopeVersion + 1 }, "EnvelopeVersion", hookrelay.ErrInvalidDelivery},
		{"another tenant's destination", func(p *hookrelay.EnqueueParams) { p.TenantID = "tenant_b" }, "TenantID", hookrelay.ErrInvalidDelivery},
		{"unknown destination", func(p *hookrelay.EnqueueParams) { p.DestinationID = "nope" }, "", hookrelay.ErrDestinationNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, s := newClient(t)
			p := validParams()
			tc.mutate(&p)
			_, err := c.Enqueue(context.Background(), p)
			require.ErrorIs(t, err, tc.is)
			if tc.field != "" {
				var ve *hookrelay.ValidationError
				require.ErrorAs(t, err, &ve)
				assert.Equal(t, tc.field, ve.Field)
			}
			_, getErr := s.Get(context.Background(), hookrelay.DeliveryID(p.EventID, p.DestinationID))
			assert.ErrorIs(t, getErr, hookrelay.ErrNotFound, "nothing was stored")
		})
	}
}

func TestEnqueueManyRefusesTheWholeBatch(t *testing.T) {
	c, s := newClient(t)
	good := validParams()
	bad := validParams()
	bad.EventID = ""
	_, err := c.EnqueueMany(context.Background(), []hookrelay.EnqueueParams{good, bad})
	require.ErrorIs(t, err, hookrelay.ErrInvalidDelivery)
	assert.Contains(t, err.Error(), "params[1]", "the error says which event")
	_, err = s.Get(context.Background(), hookrelay.DeliveryID(good.EventID, good.DestinationID))
	assert.ErrorIs(t, err, hookrelay.ErrNotFound, "no half-written batch")
}

func TestEnqueueBuildsTheRecord(t *testing.T) {
	c, s := newClient(t)
	p := validParams()
	p.Scope = map[string]string{"property": "prop_204"}
	res, err := c.Enqueue(context.Background(), p)
	require.NoError(t, err)
	assert.True(t, res.Created)
	d, err := s.Get(context.Background(), res.ID)
	require.NoError(t, err)
	assert.Equal(t, hookrelay.DeliveryID("pay_7319", "acct"), d.ID)
	assert.Equal(t, hookrelay.StatePending, d.State)
	assert.Equal(t, 1, d.Attempt)
	assert.Equal(t, "default", d.PolicyVersion)
	assert.Equal(t, hookrelay.EnvelopeVersion, d.EnvelopeVersion)
	assert.Equal(t, p.Payload, d.Payload)
	assert.Equal(t, p.Scope, d.Scope)
	assert.True(t, d.NextAttemptAt.Equal(d.FirstQueuedAt), "claimable at once")

	again, err := c.Enqueue(context.Background(), p)
	require.NoError(t, err)
	assert.False(t, again.Created, "the same event for the same destination is one record")
	assert.Equal(t, res.ID, again.ID)
}

func TestEnqueueRefusesUnstorableTextBeforeLookingUpTheDestination(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*hookrelay.EnqueueParams)
		field  string
	}{
		{"event ID not UTF-8", func(p *hookrelay.EnqueueParams) { p.EventID = "pay_\xff" }, "EventID"},
		{"NUL in event ID", func(p *hookrelay.EnqueueParams) { p.EventID = "pay\x00" }, "EventID"},
		{"tenant not UTF-8", func(p *hookrelay.EnqueueParams) { p.TenantID = "tenant_\xc3" }, "TenantID"},
		{"destination not UTF-8", func(p *hookrelay.EnqueueParams) { p.DestinationID = "acct\xff" }, "DestinationID"},
		{"NUL in destination", func(p *hookrelay.EnqueueParams) { p.DestinationID = "acct\x00" }, "DestinationID"},
		{"NUL in event type", func(p *hookrelay.EnqueueParams) { p.EventType = "lease.\x00paid" }, "EventType"},
		{"scope value not UTF-8", func(p *hookrelay.EnqueueParams) { p.Scope = map[string]string{"lease": "\xff"} }, "Scope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newClient(t)
			p := validParams()
			tc.mutate(&p)
			_, err := c.Prepare(context.Background(), []hookrelay.EnqueueParams{p})
			require.ErrorIs(t, err, hookrelay.ErrInvalidDelivery)
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tc.field, ve.Field)
		})
	}
}
