package hookrelay_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaymock"
)

// batchReadingDestinations is a Destinations port with the
// DestinationBatchReader ability, both mocked.
type batchReadingDestinations struct {
	*hookrelaymock.MockDestinations
	*hookrelaymock.MockDestinationBatchReader
}

func newBatchReadClient(t *testing.T) (*hookrelay.Client, *memory.Store, *hookrelaymock.MockDestinations, *hookrelaymock.MockDestinationBatchReader) {
	t.Helper()
	ctrl := gomock.NewController(t)
	one, many := hookrelaymock.NewMockDestinations(ctrl), hookrelaymock.NewMockDestinationBatchReader(ctrl)
	s := memory.NewStore()
	c, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: batchReadingDestinations{one, many}})
	require.NoError(t, err)
	return c, s, one, many
}

func fanOut(eventID string, dests ...string) []hookrelay.EnqueueParams {
	var ps []hookrelay.EnqueueParams
	for _, d := range dests {
		ps = append(ps, hookrelay.EnqueueParams{EventID: eventID, TenantID: "tenant_a", DestinationID: d, EventType: "lease.payment_recorded", Payload: []byte(`{}`)})
	}
	return ps
}

func dest(id string) hookrelay.Destination {
	return hookrelay.Destination{ID: id, TenantID: "tenant_a", URL: "https://" + id + ".example/hooks"}
}

// An EnqueueMany naming several destinations reads them with one
// DestinationsByID call, each ID once, and no Destination call.
func TestEnqueueManyReadsItsDestinationsInOneCall(t *testing.T) {
	c, s, _, many := newBatchReadClient(t)
	many.EXPECT().DestinationsByID(gomock.Any(), []string{"d1", "d2", "d3"}).
		Return([]hookrelay.Destination{dest("d3"), dest("d1"), dest("d2")}, nil)
	res, err := c.EnqueueMany(context.Background(), append(fanOut("evt_1", "d1", "d2", "d1", "d3"), fanOut("evt_2", "d2")...))
	require.NoError(t, err)
	require.Len(t, res, 5)
	for _, r := range res {
		_, err := s.Get(context.Background(), r.ID)
		assert.NoError(t, err, "%s stored", r.ID)
	}
}

// A destination the batch did not return is asked for alone, so a missing
// one is refused as before: at the first event naming it, wrapping
// ErrDestinationNotFound, and nothing is stored.
func TestEnqueueManyReportsAMissingDestinationAtItsEvent(t *testing.T) {
	c, s, one, many := newBatchReadClient(t)
	many.EXPECT().DestinationsByID(gomock.Any(), []string{"d1", "gone"}).Return([]hookrelay.Destination{dest("d1")}, nil)
	one.EXPECT().Destination(gomock.Any(), "gone").Return(hookrelay.Destination{}, fmt.Errorf("%w: %q", hookrelay.ErrDestinationNotFound, "gone"))
	_, err := c.EnqueueMany(context.Background(), fanOut("evt_1", "d1", "gone"))
	require.ErrorIs(t, err, hookrelay.ErrDestinationNotFound)
	assert.ErrorContains(t, err, `enqueue params[1] (event "evt_1"): destination "gone"`)
	_, err = s.Get(context.Background(), hookrelay.DeliveryID("evt_1", "d1"))
	assert.ErrorIs(t, err, hookrelay.ErrNotFound, "nothing stored")
}

// What the batch returned is still checked: a destination of another
// tenant is refused.
func TestEnqueueManyChecksTheTenantOfBatchReadDestinations(t *testing.T) {
	c, _, _, many := newBatchReadClient(t)
	other := dest("d2")
	other.TenantID = "tenant_b"
	many.EXPECT().DestinationsByID(gomock.Any(), []string{"d1", "d2"}).Return([]hookrelay.Destination{dest("d1"), other}, nil)
	_, err := c.EnqueueMany(context.Background(), fanOut("evt_1", "d1", "d2"))
	require.ErrorIs(t, err, hookrelay.ErrInvalidDelivery)
	assert.ErrorContains(t, err, `"tenant_a" does not own destination "d2"`)
}

// A failed batch read fails the enqueue, naming the read.
func TestEnqueueManyFailsWhenTheBatchReadFails(t *testing.T) {
	c, _, _, many := newBatchReadClient(t)
	boom := errors.New("connection reset")
	many.EXPECT().DestinationsByID(gomock.Any(), gomock.Any()).Return(nil, boom)
	_, err := c.EnqueueMany(context.Background(), fanOut("evt_1", "d1", "d2"))
	require.ErrorIs(t, err, boom)
	assert.ErrorContains(t, err, "read 2 destinations")
}

// One destination, however many events, is one Destination call: the
// batch read is not used.
func TestEnqueueOfOneDestinationReadsItAlone(t *testing.T) {
	c, _, one, _ := newBatchReadClient(t)
	one.EXPECT().Destination(gomock.Any(), "d1").Return(dest("d1"), nil).Times(1)
	_, err := c.EnqueueMany(context.Background(), append(fanOut("evt_1", "d1"), fanOut("evt_2", "d1")...))
	require.NoError(t, err)
}

// An event refused for its own fields is refused before any destination is
// read: a store failure does not hide the input's error.
func TestEnqueueManyRefusesABadFirstEventWithoutReading(t *testing.T) {
	c, _, _, _ := newBatchReadClient(t) // any read fails the test: none is expected
	ps := fanOut("evt_1", "d1", "d2")
	ps[0].EventType = ""
	_, err := c.EnqueueMany(context.Background(), ps)
	require.ErrorIs(t, err, hookrelay.ErrInvalidDelivery)
	assert.ErrorContains(t, err, "EventType")
}
