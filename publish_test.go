package hookrelay_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaymock"
)

// countingLedger counts Create calls and can fail them.
type countingLedger struct {
	hookrelay.Ledger
	creates [][]hookrelay.Delivery
	fail    error
}

func (l *countingLedger) Create(ctx context.Context, ds []hookrelay.Delivery) ([]bool, error) {
	l.creates = append(l.creates, ds)
	if l.fail != nil {
		return nil, l.fail
	}
	return l.Ledger.Create(ctx, ds)
}

func publishClient(t *testing.T) (*hookrelay.Client, *memory.Store, *countingLedger) {
	t.Helper()
	s := memory.NewStore()
	dests := memory.NewDestinations(
		hookrelay.Destination{ID: "acct", TenantID: "tenant_a", EventTypes: []string{"lease.*"}},
		hookrelay.Destination{ID: "crm", TenantID: "tenant_a"},
		hookrelay.Destination{ID: "audit", TenantID: "tenant_a", EventTypes: []string{"*"}},
		hookrelay.Destination{ID: "billing", TenantID: "tenant_a", EventTypes: []string{"invoice.*"}},
	)
	l := &countingLedger{Ledger: s}
	c, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: l, Destinations: dests, MaxPayloadBytes: 64})
	require.NoError(t, err)
	return c, s, l
}

func publishParams() hookrelay.PublishParams {
	return hookrelay.PublishParams{
		EventID: "pay_7319", TenantID: "tenant_a", EventType: "lease.payment_recorded",
		Payload: []byte(`{"amount":1}`),
	}
}

func TestPublishStoresTheFanOutWithOneLedgerCreate(t *testing.T) {
	c, _, l := publishClient(t)
	res, err := c.Publish(context.Background(), publishParams())
	require.NoError(t, err)
	require.Len(t, l.creates, 1, "one Ledger.Create call for the whole fan-out")
	assert.Len(t, l.creates[0], 3)
	var got []string
	for _, d := range res.Deliveries {
		got = append(got, d.DestinationID)
		assert.Equal(t, hookrelay.DeliveryID("pay_7319", d.DestinationID), d.ID)
		assert.True(t, d.Created)
	}
	assert.Equal(t, []string{"acct", "audit", "crm"}, got, "in destination ID order; billing is not subscribed")
}

func TestPublishFailureStoresNothing(t *testing.T) {
	c, s, l := publishClient(t)
	l.fail = errors.New("disk full")
	_, err := c.Publish(context.Background(), publishParams())
	require.ErrorContains(t, err, "disk full")
	require.ErrorContains(t, err, `publish (event "pay_7319")`)
	for _, dest := range []string{"acct", "audit", "crm"} {
		_, err := s.Get(context.Background(), hookrelay.DeliveryID("pay_7319", dest))
		assert.ErrorIs(t, err, hookrelay.ErrNotFound, "no delivery to %s", dest)
	}
	l.fail = nil
	res, err := c.Publish(context.Background(), publishParams())
	require.NoError(t, err, "the same publish, retried, succeeds")
	assert.Len(t, res.Deliveries, 3)
}

func TestPublishRefusesInvalidParamsEvenWithoutSubscribers(t *testing.T) {
	c, _, l := publishClient(t)
	for _, tc := range []struct {
		mutate func(*hookrelay.PublishParams)
		field  string
	}{
		{func(p *hookrelay.PublishParams) { p.EventID = "" }, "EventID"},
		{func(p *hookrelay.PublishParams) { p.TenantID = "" }, "TenantID"},
		{func(p *hookrelay.PublishParams) { p.EventType = "" }, "EventType"},
		{func(p *hookrelay.PublishParams) { p.EventType = "lease.*" }, "EventType"},
		// Not a name any pattern could subscribe to: it would reach the
		// catch-all destinations and silently miss the others.
		{func(p *hookrelay.PublishParams) { p.EventType = "lease.payment_recorded " }, "EventType"},
		{func(p *hookrelay.PublishParams) { p.EventType = "lease.payment_recorded\n" }, "EventType"},
		{func(p *hookrelay.PublishParams) { p.EventType = "lease.\u00a0paid" }, "EventType"},
		{func(p *hookrelay.PublishParams) { p.EventType = "lease..paid" }, "EventType"},
		{func(p *hookrelay.PublishParams) { p.EventType = "lease." }, "EventType"},
		{func(p *hookrelay.PublishParams) { p.EventType = ".lease" }, "EventType"},
		{func(p *hookrelay.PublishParams) { p.EventType = "lease.\xff" }, "EventType"},
		{func(p *hookrelay.PublishParams) { p.Payload = make([]byte, 65) }, "Payload"},
		// No destination of this tenant: still validated.
		{func(p *hookrelay.PublishParams) { p.TenantID = "tenant_z"; p.EventID = "" }, "EventID"},
	} {
		p := publishParams()
		tc.mutate(&p)
		_, err := c.Publish(context.Background(), p)
		require.ErrorIs(t, err, hookrelay.ErrInvalidDelivery, "event type %q", p.EventType)
		var ve *hookrelay.ValidationError
		require.ErrorAs(t, err, &ve)
		assert.Equal(t, tc.field, ve.Field)
		assert.NotContains(t, err.Error(), "params[", "the error speaks of the publish, not of an internal enqueue")
	}
	assert.Empty(t, l.creates)
}

func TestPublishWithoutSubscribersIsEmpty(t *testing.T) {
	c, _, l := publishClient(t)
	p := publishParams()
	p.TenantID = "tenant_z"
	res, err := c.Publish(context.Background(), p)
	require.NoError(t, err)
	assert.Empty(t, res.Deliveries)
	assert.Empty(t, res.Skipped)
	assert.Empty(t, l.creates, "nothing to store")
}

func TestPublishNeedsADestinationFinder(t *testing.T) {
	ctrl := gomock.NewController(t)
	s := memory.NewStore()
	c, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: hookrelaymock.NewMockDestinations(ctrl)})
	require.NoError(t, err)
	_, err = c.Publish(context.Background(), publishParams())
	require.ErrorIs(t, err, hookrelay.ErrUnsupported)
	assert.ErrorContains(t, err, "DestinationFinder")
	_, err = c.PreparePublish(context.Background(), publishParams())
	require.ErrorIs(t, err, hookrelay.ErrUnsupported)
}

// A lister that returns another tenant's or an unsubscribed destination
// has a bug; Publish never fans out to those.
func TestPublishIgnoresWhatTheListerShouldNotHaveReturned(t *testing.T) {
	ctrl := gomock.NewController(t)
	lister := hookrelaymock.NewMockDestinationFinder(ctrl)
	lister.EXPECT().DestinationsFor(gomock.Any(), hookrelay.DestinationsForParams{TenantID: "tenant_a", EventType: "lease.payment_recorded"}).
		Return([]hookrelay.Destination{
			{ID: "other_tenant", TenantID: "tenant_b"},
			{ID: "no_tenant"},
			{ID: "invoices", TenantID: "tenant_a", EventTypes: []string{"invoice.*"}},
			{ID: "acct", TenantID: "tenant_a"},
		}, nil)
	s := memory.NewStore()
	c, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: struct {
		hookrelay.Destinations
		hookrelay.DestinationFinder
	}{hookrelaymock.NewMockDestinations(ctrl), lister}})
	require.NoError(t, err)
	res, err := c.Publish(context.Background(), publishParams())
	require.NoError(t, err)
	require.Len(t, res.Deliveries, 1)
	assert.Equal(t, "acct", res.Deliveries[0].DestinationID)
}

func TestPreparedPublishResult(t *testing.T) {
	pp := hookrelay.PreparedPublish{
		Deliveries: []hookrelay.Delivery{{ID: "whd_1", DestinationID: "a"}, {ID: "whd_2", DestinationID: "b"}},
		Skipped:    []hookrelay.SkippedDestination{{ID: "c", Reason: hookrelay.SkipReasonDisabled}},
	}
	assert.Equal(t, hookrelay.PublishResult{
		Deliveries: []hookrelay.EnqueueResult{{ID: "whd_1", DestinationID: "a", Created: true}, {ID: "whd_2", DestinationID: "b"}},
		Skipped:    pp.Skipped,
	}, pp.Result([]bool{true, false}))
	assert.Panics(t, func() { pp.Result([]bool{true}) })
}

func TestPublishRefusesUnstorableTextEvenWithoutSubscribers(t *testing.T) {
	c, _, l := publishClient(t)
	for _, tc := range []struct {
		mutate func(*hookrelay.PublishParams)
		field  string
	}{
		{func(p *hookrelay.PublishParams) { p.EventID = "pay_\xff" }, "EventID"},
		{func(p *hookrelay.PublishParams) { p.EventID = "pay_\x00" }, "EventID"},
		{func(p *hookrelay.PublishParams) { p.TenantID = "tenant_\xc3" }, "TenantID"},
		{func(p *hookrelay.PublishParams) { p.TenantID = "tenant_\x00" }, "TenantID"},
		{func(p *hookrelay.PublishParams) { p.Scope = map[string]string{"lease": "\xff"} }, "Scope"},
	} {
		for _, tenant := range []string{"tenant_a", "tenant_z"} { // subscribers, none
			p := publishParams()
			p.TenantID = tenant
			tc.mutate(&p)
			_, err := c.Publish(context.Background(), p)
			require.ErrorIs(t, err, hookrelay.ErrInvalidDelivery, "tenant %q, event %q", p.TenantID, p.EventID)
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tc.field, ve.Field)
		}
	}
	assert.Empty(t, l.creates, "nothing reached the ledger")
}

func TestPublishWithACancelledContextFailsEvenWithoutSubscribers(t *testing.T) {
	c, _, l := publishClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tenant := range []string{"tenant_a", "tenant_z"} { // subscribers, none
		p := publishParams()
		p.TenantID = tenant
		_, err := c.Publish(ctx, p)
		require.ErrorIs(t, err, context.Canceled, "tenant %s: as the SQL store answers", tenant)
	}
	assert.Empty(t, l.creates)
}

// changingFinder changes the store's destinations right after listing
// them, as a concurrent Put would between Publish's read and its store.
type changingFinder struct {
	*memory.Destinations
	after func()
}

func (f changingFinder) DestinationsFor(ctx context.Context, p hookrelay.DestinationsForParams) ([]hookrelay.Destination, error) {
	ds, err := f.Destinations.DestinationsFor(ctx, p)
	f.after()
	return ds, err
}

// Publish fans out to the destinations as its one read found them: a
// destination disabled or unsubscribed after that read still gets its
// delivery (which then waits or is dead-lettered like any delivery made
// before the change), and one subscribed after it gets none from this
// publish.
func TestPublishFansOutToTheDestinationsAsOneReadFoundThem(t *testing.T) {
	ctx := context.Background()
	s := memory.NewStore()
	dests := memory.NewDestinations(
		hookrelay.Destination{ID: "acct", TenantID: "tenant_a", EventTypes: []string{"lease.*"}},
		hookrelay.Destination{ID: "crm", TenantID: "tenant_a", EventTypes: []string{"invoice.*"}},
	)
	finder := changingFinder{Destinations: dests, after: func() {
		require.NoError(t, dests.Put(ctx, hookrelay.Destination{ID: "acct", TenantID: "tenant_a", EventTypes: []string{"invoice.*"}, Disabled: true}))
		require.NoError(t, dests.Put(ctx, hookrelay.Destination{ID: "crm", TenantID: "tenant_a", EventTypes: []string{"lease.*"}}))
	}}
	c, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: finder})
	require.NoError(t, err)
	res, err := c.Publish(ctx, publishParams())
	require.NoError(t, err)
	require.Len(t, res.Deliveries, 1)
	assert.Equal(t, "acct", res.Deliveries[0].DestinationID)
	assert.True(t, res.Deliveries[0].Created)
	assert.Empty(t, res.Skipped, "acct was enabled when read")
	d, err := s.Get(ctx, res.Deliveries[0].ID)
	require.NoError(t, err)
	assert.Equal(t, hookrelay.StatePending, d.State)
	_, err = s.Get(ctx, hookrelay.DeliveryID("pay_7319", "crm"))
	assert.ErrorIs(t, err, hookrelay.ErrNotFound, "crm subscribed after the read")
}

// Two entries of one EnqueueMany call naming the same event and
// destination are one delivery: the first entry's record is stored, and
// both are reported with its ID, the second as not created, whatever its
// payload.
func TestEnqueueManyKeepsTheFirstOfTwoEntriesForOneDelivery(t *testing.T) {
	ctx := context.Background()
	c, s, _ := publishClient(t)
	p := hookrelay.EnqueueParams{EventID: "pay_7319", TenantID: "tenant_a", DestinationID: "acct", EventType: "lease.payment_recorded", Payload: []byte(`{"v":1}`)}
	q := p
	q.Payload = []byte(`{"v":2}`)
	res, err := c.EnqueueMany(ctx, []hookrelay.EnqueueParams{p, q})
	require.NoError(t, err)
	require.Len(t, res, 2)
	assert.Equal(t, res[0].ID, res[1].ID)
	assert.Equal(t, []bool{true, false}, []bool{res[0].Created, res[1].Created})
	d, err := s.Get(ctx, res[0].ID)
	require.NoError(t, err)
	assert.Equal(t, p.Payload, d.Payload, "the first entry wins")
}
