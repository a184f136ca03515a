package hookrelay_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
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

// limitedQueue is the memory store as a Queue whose broker carries
// envelopes of at most max bytes (hookrelay.MessageLimit).
type limitedQueue struct {
	*memory.Store
	max int
}

func (q limitedQueue) MaxEnvelopeBytes() int { return q.max }

// A delivery whose envelope is over the Queue's MessageLimit is refused,
// naming Payload, and nothing of its call is stored; one whose envelope is
// exactly at the limit is taken. The limit counts the envelope, not the
// payload: the payload travels in base64 beside the delivery's fields.
func TestEnqueueRefusesAnEnvelopeOverTheQueuesMessageLimit(t *testing.T) {
	ctx := context.Background()
	p := validParams()
	p.Payload = []byte(strings.Repeat("x", 3000))
	small := validParams()
	small.EventID = "pay_small"
	at := clock.NewMock() // the envelope's times, so its size, are fixed
	at.Set(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	unlimited, _ := newClient(t, func(cfg *hookrelay.Config) { cfg.Clock, cfg.MaxPayloadBytes = at, 1<<20 })
	ds, err := unlimited.Prepare(ctx, []hookrelay.EnqueueParams{p})
	require.NoError(t, err)
	body := largestEnvelope(t, ds[0])
	for _, tc := range []struct {
		name  string
		slack int // the limit minus the envelope's size
		ok    bool
	}{{"AtTheLimit", 0, true}, {"OneByteOver", -1, false}, {"FarUnder", 1 << 20, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c, store := newClient(t, func(cfg *hookrelay.Config) {
				cfg.Clock, cfg.MaxPayloadBytes = at, 1<<20
				cfg.Queue = limitedQueue{Store: cfg.Ledger.(*memory.Store), max: len(body) + tc.slack}
			})
			_, err := c.EnqueueMany(ctx, []hookrelay.EnqueueParams{small, p})
			if tc.ok {
				require.NoError(t, err)
				_, err = store.Get(ctx, ds[0].ID)
				assert.NoError(t, err)
				return
			}
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, "Payload", ve.Field)
			assert.ErrorContains(t, err, fmt.Sprintf("envelope of up to %d bytes", len(body)))
			_, err = store.Get(ctx, hookrelay.DeliveryID(small.EventID, small.DestinationID))
			assert.ErrorIs(t, err, hookrelay.ErrNotFound, "nothing of the call is stored")
		})
	}
}

func TestEnqueueRefusesAnEnvelopeThatWouldOutgrowTheLimitOnARetry(t *testing.T) {
	// A retry republishes the envelope with a larger attempt number and a
	// next-attempt time that may carry nanoseconds and an offset: an
	// envelope exactly at the limit when enqueued would then be over it,
	// and the broker would refuse every retry.
	ctx := context.Background()
	p := validParams()
	p.Payload = []byte(strings.Repeat("x", 3000))
	at := clock.NewMock()
	at.Set(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	unlimited, _ := newClient(t, func(cfg *hookrelay.Config) { cfg.Clock, cfg.MaxPayloadBytes = at, 1<<20 })
	ds, err := unlimited.Prepare(ctx, []hookrelay.EnqueueParams{p})
	require.NoError(t, err)
	first, err := hookrelay.MarshalEnvelope(ds[0])
	require.NoError(t, err)
	retried := ds[0]
	retried.Attempt = 12
	retried.NextAttemptAt = at.Now().Add(1500*time.Millisecond + 123456789).In(time.FixedZone("NPT", 5*3600+45*60))
	later, err := hookrelay.MarshalEnvelope(retried)
	require.NoError(t, err)
	require.Greater(t, len(later), len(first), "the retry's envelope is the larger")
	worst := largestEnvelope(t, ds[0])

	for _, tc := range []struct {
		name  string
		limit int
		ok    bool
	}{{"AtTheFirstEnvelopesSize", len(first), false}, {"AtTheLargestARetryCanHave", len(worst), true}} {
		t.Run(tc.name, func(t *testing.T) {
			c, store := newClient(t, func(cfg *hookrelay.Config) {
				cfg.Clock, cfg.MaxPayloadBytes = at, 1<<20
				cfg.Queue = limitedQueue{Store: cfg.Ledger.(*memory.Store), max: tc.limit}
			})
			_, err := c.Enqueue(ctx, p)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, "Payload", ve.Field)
			_, err = store.Get(ctx, ds[0].ID)
			assert.ErrorIs(t, err, hookrelay.ErrNotFound, "nothing is stored")
		})
	}
}

// largestEnvelope is d's envelope as large as any retry can make it: the
// largest attempt number, and a next-attempt time with nanoseconds and an
// offset in the last storable year.
func largestEnvelope(t *testing.T, d hookrelay.Delivery) []byte {
	t.Helper()
	d.Attempt = math.MaxInt
	d.NextAttemptAt = time.Date(2262, 4, 11, 23, 47, 16, 854775807, time.FixedZone("", -(9*3600+30*60)))
	body, err := hookrelay.MarshalEnvelope(d)
	require.NoError(t, err)
	return body
}
