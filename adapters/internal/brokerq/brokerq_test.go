package brokerq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/internal/brokerq"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeBroker is an in-process broker with real-time delays: enough to run
// the conformance suite on brokerq without a server.
type fakeBroker struct {
	mu   sync.Mutex
	seq  int
	msgs map[int]*fakeMsg
	dead []string // reasons
}

type fakeMsg struct {
	id      int
	body    []byte
	readyAt time.Time
	out     bool // handed out, not yet acked or redelivered
}

func newFakeBroker() *fakeBroker { return &fakeBroker{msgs: map[int]*fakeMsg{}} }

func (b *fakeBroker) Publish(_ context.Context, ds []hookrelay.Delivery) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range ds {
		body, err := hookrelay.MarshalEnvelope(d)
		if err != nil {
			return err
		}
		b.seq++
		b.msgs[b.seq] = &fakeMsg{id: b.seq, body: body}
	}
	return nil
}

func (b *fakeBroker) Fetch(_ context.Context, n int, _ time.Duration) ([]*fakeMsg, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*fakeMsg
	for id := 1; id <= b.seq && len(out) < n; id++ {
		if m, ok := b.msgs[id]; ok && !m.out && !time.Now().Before(m.readyAt) {
			m.out = true
			out = append(out, m)
		}
	}
	return out, nil
}

func (b *fakeBroker) Body(m *fakeMsg) []byte { return m.body }
func (b *fakeBroker) Stale(*fakeMsg) bool    { return false }

func (b *fakeBroker) Ack(_ context.Context, m *fakeMsg) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.msgs, m.id)
	return nil
}

func (b *fakeBroker) Redeliver(_ context.Context, m *fakeMsg, delay time.Duration, _ *hookrelay.Delivery) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m.out, m.readyAt = false, time.Now().Add(delay)
	return nil
}

func (b *fakeBroker) DeadLetter(_ context.Context, m *fakeMsg, _ *hookrelay.Delivery, reason string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dead = append(b.dead, reason)
	delete(b.msgs, m.id)
	return nil
}

func (b *fakeBroker) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.msgs)
}

const maxDelay = 10 * time.Millisecond

func newQueue(t *testing.T, b *fakeBroker, ledger hookrelay.LeaseLedger) *brokerq.Queue[*fakeMsg] {
	t.Helper()
	q, err := brokerq.New[*fakeMsg](b, ledger, brokerq.Config{
		MaxDelay: maxDelay, SkipDelay: maxDelay, ParkDelay: time.Hour, ErrorDelay: maxDelay,
	})
	require.NoError(t, err)
	return q
}

// TestConformance runs the suite (Queue, Engine, Redrive) on brokerq over the fake broker: the
// claim, lease and transition logic both broker adapters share, checked
// with no server.
func TestConformance(t *testing.T) {
	newHarness := func(t *testing.T) hookrelaytest.Harness {
		ledger := memory.NewStore()
		return hookrelaytest.Harness{
			Queue: newQueue(t, newFakeBroker(), ledger), Ledger: ledger, Destinations: memory.NewDestinations(),
			RedeliveryWithin: 500 * time.Millisecond,
		}
	}
	t.Run("Queue", func(t *testing.T) { hookrelaytest.RunQueue(t, newHarness) })
	t.Run("Engine", func(t *testing.T) { hookrelaytest.RunEngine(t, newHarness) })
	t.Run("Redrive", func(t *testing.T) { hookrelaytest.RunRedrive(t, newHarness) })
}

func TestMessagesTheLedgerRefuses(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	ledger := memory.NewStore()
	b := newFakeBroker()
	q := newQueue(t, b, ledger)
	claim := func(at time.Time) []hookrelay.Claim {
		cs, err := q.Claim(ctx, hookrelay.ClaimParams{Now: at, Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		return cs
	}
	d := hookrelay.Delivery{ID: "whd_1", EventID: "e", DestinationID: "dest", Attempt: 1, FirstQueuedAt: now, NextAttemptAt: now}
	_, err := ledger.Create(ctx, []hookrelay.Delivery{d})
	require.NoError(t, err)
	require.NoError(t, b.Publish(ctx, []hookrelay.Delivery{d, d})) // a duplicate message

	cs := claim(now)
	require.Len(t, cs, 1, "the duplicate is refused while the first holds the lease")
	assert.Equal(t, 2, b.pending(), "and kept for later, not dropped")
	assert.Equal(t, 1, q.InFlight())

	assert.ErrorIs(t, q.Acknowledge(ctx, hookrelay.AckParams{ID: d.ID, Lease: hookrelay.Lease{Token: 99}, Now: now}),
		hookrelay.ErrLeaseLost, "a lease this process does not hold")
	require.NoError(t, ledger.MarkDelivered(ctx, hookrelay.MarkDeliveredParams{ID: d.ID, Lease: cs[0].Lease,
		Attempt: hookrelay.Attempt{DeliveryID: d.ID, Number: 1, Kind: hookrelay.KindDelivered}, Now: now}))
	require.NoError(t, q.Acknowledge(ctx, hookrelay.AckParams{ID: d.ID, Lease: cs[0].Lease, Now: now}))
	require.NoError(t, q.Acknowledge(ctx, hookrelay.AckParams{ID: d.ID, Lease: cs[0].Lease, Now: now}), "acknowledging twice is harmless")

	require.Eventually(t, func() bool { return len(claim(now.Add(time.Hour))) == 0 && b.pending() == 0 },
		5*time.Second, 5*time.Millisecond, "the duplicate comes back, finds the delivery done and is acknowledged")
	assert.Zero(t, q.InFlight())
	assert.Empty(t, b.dead)
}

func TestBucketRoundsUp(t *testing.T) {
	bs := []time.Duration{time.Second, 5 * time.Second, time.Minute}
	for _, tc := range []struct{ in, want time.Duration }{
		{0, time.Second}, {500 * time.Millisecond, time.Second}, {time.Second, time.Second},
		{1001 * time.Millisecond, 5 * time.Second}, {time.Minute, time.Minute}, {time.Hour, time.Minute},
	} {
		assert.Equal(t, tc.want, brokerq.Bucket(bs, tc.in), "delay %s", tc.in)
	}
}

// fetchFailsAfter is a broker whose next fetch delivers its messages and
// then fails (a JetStream pull that got some messages before the
// connection dropped): the messages come with the error.
type fetchFailsAfter struct {
	*fakeBroker
	failNext bool
}

func (b *fetchFailsAfter) Fetch(ctx context.Context, n int, wait time.Duration) ([]*fakeMsg, error) {
	msgs, err := b.fakeBroker.Fetch(ctx, n, wait)
	if b.failNext && err == nil {
		b.failNext = false
		return msgs, errors.New("connection lost after the messages")
	}
	return msgs, err
}

// Messages a fetch returned together with an error are the worker's: they
// are claimed like any others, not left handed out until the broker's ack
// wait brings them back.
func TestMessagesThatCameWithAFetchErrorAreClaimed(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	ledger := memory.NewStore()
	b := &fetchFailsAfter{fakeBroker: newFakeBroker(), failNext: true}
	q, err := brokerq.New[*fakeMsg](b, ledger, brokerq.Config{
		MaxDelay: maxDelay, SkipDelay: maxDelay, ParkDelay: time.Hour, ErrorDelay: maxDelay,
	})
	require.NoError(t, err)
	var ds []hookrelay.Delivery
	for _, id := range []string{"whd_1", "whd_2"} {
		ds = append(ds, hookrelay.Delivery{ID: id, EventID: id, DestinationID: "dest", Attempt: 1, FirstQueuedAt: now, NextAttemptAt: now})
	}
	_, err = ledger.Create(ctx, ds)
	require.NoError(t, err)
	require.NoError(t, b.Publish(ctx, ds))

	cs, err := q.Claim(ctx, hookrelay.ClaimParams{Now: now, Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err, "claims were made: the fetch error is not the caller's")
	var got []string
	for _, c := range cs {
		got = append(got, c.Delivery.ID)
	}
	assert.ElementsMatch(t, []string{"whd_1", "whd_2"}, got)
	assert.Equal(t, 2, q.InFlight(), "held under their leases")
}
