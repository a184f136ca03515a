package hookrelaytest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// RunPublish runs the hookrelay.DestinationFinder contract tests and the
// whole-engine Client.Publish scenarios. They skip when the harness's
// Destinations does not implement hookrelay.DestinationFinder (an optional
// ability); the check that Publish then refuses with ErrUnsupported runs
// always.
//
// The lister cases check that EventTypes round-trip, that Put refuses a
// malformed pattern naming it, and which destinations each (tenant, event
// type) selects. The scenarios publish through a Client over the harness:
// the fan-out by pattern, republishing (nothing new except for a
// destination subscribed since), disabled destinations skipped, paused ones
// waiting, every delivery sent once with its own ID, concurrent publishes of
// one event (each delivery created once, by one caller's whole fan-out,
// every caller told the same IDs), a republish after the deliveries were
// delivered or dead-lettered (nothing created, changed or sent) and after
// retention removed them (a new delivery under the same ID, sent again;
// skipped when the Ledger is not a hookrelay.HistoryCleaner).
func RunPublish(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()

	t.Run("PutRefusesAMalformedPatternAndNamesIt", func(t *testing.T) {
		h := newHarness(t)
		lister(t, h)
		err := h.Destinations.Put(ctx, hookrelay.Destination{
			ID: "dest_bad", TenantID: "tenant_a", URL: "https://bad.example/",
			EventTypes: []string{"lease.*", "lease..paid"},
		})
		require.ErrorIs(t, err, hookrelay.ErrInvalidDestination)
		assert.ErrorContains(t, err, "EventTypes[1]")
		_, err = h.Destinations.Destination(ctx, "dest_bad")
		assert.ErrorIs(t, err, hookrelay.ErrDestinationNotFound, "a refused destination is not stored")
	})

	t.Run("EventTypesRoundTripAndAPutReplacesThem", func(t *testing.T) {
		h := newHarness(t)
		lister(t, h)
		d := hookrelay.Destination{
			ID: "dest_1", TenantID: "tenant_a", URL: "https://accounting.example/webhooks",
			EventTypes: []string{"lease.payment_recorded", "invoice.*"},
		}
		require.NoError(t, h.Destinations.Put(ctx, d))
		got, err := h.Destinations.Destination(ctx, "dest_1")
		require.NoError(t, err)
		assert.Equal(t, d.EventTypes, got.EventTypes)

		d.EventTypes = nil
		require.NoError(t, h.Destinations.Put(ctx, d))
		got, err = h.Destinations.Destination(ctx, "dest_1")
		require.NoError(t, err)
		assert.Empty(t, got.EventTypes, "every type again")
		assert.Equal(t, []string{"dest_1"}, listed(t, h, "tenant_a", "invoice.paid"))
	})

	t.Run("ListsByTenantAndEventType", func(t *testing.T) {
		h := newHarness(t)
		lister(t, h)
		putSubscribers(t, h)
		for _, tc := range []struct {
			tenant, eventType string
			want              []string
		}{
			{"tenant_a", "lease.payment_recorded", []string{"a_all", "a_disabled", "a_exact", "a_lease", "a_paused", "a_star"}},
			{"tenant_a", "lease.ended", []string{"a_all", "a_disabled", "a_lease", "a_star"}},
			{"tenant_a", "invoice.paid", []string{"a_all", "a_invoice", "a_star"}},
			{"tenant_a", "order.created", []string{"a_all", "a_star"}},
			{"tenant_a", "", []string{"a_all", "a_disabled", "a_exact", "a_invoice", "a_lease", "a_paused", "a_star"}},
			{"tenant_b", "lease.payment_recorded", []string{"b_lease"}},
			{"tenant_c", "lease.payment_recorded", []string{}},
			{"", "lease.payment_recorded", []string{"a_all", "a_disabled", "a_exact", "a_lease", "a_paused", "a_star", "b_lease", "no_tenant"}},
		} {
			assert.Equal(t, tc.want, listed(t, h, tc.tenant, tc.eventType), "tenant %q, event type %q", tc.tenant, tc.eventType)
		}
		ds, err := lister(t, h).DestinationsFor(ctx, hookrelay.DestinationsForParams{TenantID: "tenant_a", EventType: "lease.payment_recorded"})
		require.NoError(t, err)
		flags := map[string][2]bool{}
		for _, d := range ds {
			flags[d.ID] = [2]bool{d.Paused, d.Disabled}
			assert.Equal(t, "tenant_a", d.TenantID)
		}
		assert.Equal(t, [2]bool{true, false}, flags["a_paused"], "listed with its paused flag")
		assert.Equal(t, [2]bool{false, true}, flags["a_disabled"], "listed with its disabled flag")
	})

	t.Run("PublishFansOutToEverySubscribedDestination", func(t *testing.T) {
		e := publishEngine(t, newHarness(t))
		putSubscribers(t, e.h)
		res := e.publish("pay_7319", "lease.payment_recorded")
		// dest_1 (the engine's own destination) subscribes to every type.
		want := []string{"a_all", "a_exact", "a_lease", "a_paused", "a_star", "dest_1"}
		require.Equal(t, want, destinationIDs(res))
		assert.Equal(t, []hookrelay.SkippedDestination{{ID: "a_disabled", Reason: hookrelay.SkipReasonDisabled, Detail: "recipient answered 410"}}, res.Skipped)
		for _, r := range res.Deliveries {
			assert.True(t, r.Created, r.DestinationID)
			assert.Equal(t, hookrelay.DeliveryID("pay_7319", r.DestinationID), r.ID)
			d := e.get(r.ID)
			assert.Equal(t, hookrelay.StatePending, d.State)
			assert.Equal(t, "pay_7319", d.EventID)
			assert.Equal(t, "tenant_a", d.TenantID)
			assert.Equal(t, r.DestinationID, d.DestinationID)
			assert.Equal(t, "lease.payment_recorded", d.EventType)
			assert.Equal(t, []byte(`{"event":"pay_7319"}`), d.Payload)
			assert.Equal(t, map[string]string{"property": "prop_204"}, d.Scope)
			assert.Equal(t, 1, d.Attempt)
		}
		for _, other := range []string{"a_invoice", "b_lease", "no_tenant", "a_disabled"} {
			_, err := e.h.Ledger.Get(ctx, hookrelay.DeliveryID("pay_7319", other))
			assert.ErrorIs(t, err, hookrelay.ErrNotFound, "no delivery to %s", other)
		}

		// Every delivery but the paused destination's is sent once, with its
		// own ID.
		for _, r := range res.Deliveries {
			if r.DestinationID == "a_paused" {
				continue
			}
			assert.Equal(t, hookrelay.StateDelivered, e.run(r.ID).State, r.DestinationID)
			e.assertOneEffect(r.ID)
		}
	})

	t.Run("RepublishCreatesNothingNewExceptForANewSubscriber", func(t *testing.T) {
		e := publishEngine(t, newHarness(t))
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_2", TenantID: "tenant_a", URL: "https://crm.example/", EventTypes: []string{"lease.*"}}))
		first := e.publish("pay_7319", "lease.payment_recorded")
		require.Equal(t, []string{"dest_1", "dest_2"}, destinationIDs(first))

		again := e.publish("pay_7319", "lease.payment_recorded")
		assert.Equal(t, first.Deliveries[0].ID, again.Deliveries[0].ID)
		for _, r := range again.Deliveries {
			assert.False(t, r.Created, "%s: published again, nothing new", r.DestinationID)
		}

		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_3", TenantID: "tenant_a", URL: "https://bi.example/", EventTypes: []string{"*"}}))
		third := e.publish("pay_7319", "lease.payment_recorded")
		require.Equal(t, []string{"dest_1", "dest_2", "dest_3"}, destinationIDs(third))
		assert.Equal(t, []bool{false, false, true}, createdFlags(third), "only the new subscriber gets a new delivery")

		// Each destination is sent the event once.
		for _, r := range third.Deliveries {
			assert.Equal(t, hookrelay.StateDelivered, e.run(r.ID).State)
			assert.Len(t, e.rec.RequestsFor(r.ID), 1, r.DestinationID)
		}
	})

	t.Run("PausedDestinationGetsTheDeliveryAndItWaits", func(t *testing.T) {
		e := publishEngine(t, newHarness(t))
		require.NoError(t, e.client.PauseDestination(ctx, "dest_1"))
		res := e.publish("pay_7319", "lease.payment_recorded")
		require.Equal(t, []string{"dest_1"}, destinationIDs(res))
		assert.Empty(t, res.Skipped)
		id := res.Deliveries[0].ID
		for range 3 {
			e.step()
			e.clock.Add(10 * time.Second)
		}
		assert.Empty(t, e.rec.RequestsFor(id), "nothing is sent while paused")
		assert.Equal(t, 1, e.get(id).Attempt, "no attempt is spent")
		require.NoError(t, e.client.ResumeDestination(ctx, "dest_1"))
		assert.Equal(t, hookrelay.StateDelivered, e.run(id).State)
		e.assertOneEffect(id)
	})

	t.Run("DisabledDestinationGetsNothingUntilReenabled", func(t *testing.T) {
		e := publishEngine(t, newHarness(t))
		gone := hookrelay.Destination{ID: "dest_1", TenantID: "tenant_a", URL: "https://accounting.example/webhooks", Disabled: true, DisabledReason: "gone"}
		require.NoError(t, e.h.Destinations.Put(ctx, gone))
		res := e.publish("pay_7319", "lease.payment_recorded")
		assert.Empty(t, res.Deliveries)
		assert.Equal(t, []hookrelay.SkippedDestination{{ID: "dest_1", Reason: hookrelay.SkipReasonDisabled, Detail: "gone"}}, res.Skipped)
		_, err := e.h.Ledger.Get(ctx, hookrelay.DeliveryID("pay_7319", "dest_1"))
		assert.ErrorIs(t, err, hookrelay.ErrNotFound)

		gone.Disabled, gone.DisabledReason = false, ""
		require.NoError(t, e.h.Destinations.Put(ctx, gone))
		res = e.publish("pay_7319", "lease.payment_recorded")
		assert.Equal(t, []bool{true}, createdFlags(res), "re-enabled, it gets the event on the next publish")
	})

	t.Run("PublishToManyDestinationsIsOneFanOut", func(t *testing.T) {
		e := publishEngine(t, newHarness(t))
		const n = 60
		for i := range n {
			types := []string{"lease.*"}
			if i%3 == 0 {
				types = []string{"invoice.*"}
			}
			require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{
				ID: fmt.Sprintf("sub_%03d", i), TenantID: "tenant_a", URL: "https://many.example/", EventTypes: types,
			}))
		}
		res := e.publish("pay_7319", "lease.payment_recorded")
		require.Len(t, res.Deliveries, n-n/3+1) // the subscribers and dest_1
		for _, r := range res.Deliveries {
			assert.True(t, r.Created)
			assert.Equal(t, hookrelay.StatePending, e.get(r.ID).State)
		}
	})

	t.Run("ConcurrentPublishesOfOneEventCreateEachDeliveryOnce", func(t *testing.T) {
		e := publishEngine(t, newHarness(t))
		require.NoError(t, e.h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_2", TenantID: "tenant_a", URL: "https://crm.example/", EventTypes: []string{"lease.*"}}))
		const callers = 8
		results := make([]hookrelay.PublishResult, callers)
		errs := make([]error, callers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				<-start
				results[i], errs[i] = e.client.Publish(ctx, hookrelay.PublishParams{
					EventID: "pay_7319", TenantID: "tenant_a", EventType: "lease.payment_recorded",
					Payload: fmt.Appendf(nil, `{"caller":%d}`, i),
				})
			})
		}
		close(start)
		wg.Wait()
		created := map[string]int{}
		winners := map[int]bool{}
		for i := range callers {
			require.NoError(t, errs[i], "caller %d", i)
			require.Equal(t, []string{"dest_1", "dest_2"}, destinationIDs(results[i]), "caller %d", i)
			for _, r := range results[i].Deliveries {
				assert.Equal(t, hookrelay.DeliveryID("pay_7319", r.DestinationID), r.ID, "caller %d", i)
				if r.Created {
					created[r.DestinationID]++
					winners[i] = true
				}
			}
		}
		assert.Equal(t, map[string]int{"dest_1": 1, "dest_2": 1}, created, "each delivery is created by exactly one caller")
		require.Len(t, winners, 1, "one caller's Create stored the whole fan-out")
		for i := range winners {
			for _, r := range results[i].Deliveries {
				d := e.get(r.ID)
				assert.Equal(t, hookrelay.StatePending, d.State)
				assert.Equal(t, 1, d.Attempt)
				assert.Equal(t, fmt.Appendf(nil, `{"caller":%d}`, i), d.Payload, "the record holds the creating caller's payload")
				assert.Empty(t, e.attempts(r.ID))
			}
		}
		for _, r := range results[0].Deliveries {
			assert.Equal(t, hookrelay.StateDelivered, e.run(r.ID).State)
			assert.Len(t, e.rec.RequestsFor(r.ID), 1, "%s is sent once", r.DestinationID)
		}
	})

	t.Run("RepublishAfterTheDeliveryEndedCreatesNothing", func(t *testing.T) {
		e := publishEngine(t, newHarness(t))
		delivered := e.publish("pay_1", "lease.payment_recorded").Deliveries[0].ID
		require.Equal(t, hookrelay.StateDelivered, e.run(delivered).State)
		dead := e.publish("pay_2", "lease.payment_recorded").Deliveries[0].ID
		cs := claimDue(t, e.h, e.clock.Now(), 10)
		require.Len(t, cs, 1)
		require.NoError(t, kill(t, e.h, cs[0], hookrelay.ReasonBadRequest, e.clock.Now()))

		for id, ev := range map[string]string{delivered: "pay_1", dead: "pay_2"} {
			before := e.get(id)
			res := e.publish(ev, "lease.payment_recorded")
			require.Equal(t, []string{"dest_1"}, destinationIDs(res))
			assert.Equal(t, id, res.Deliveries[0].ID)
			assert.False(t, res.Deliveries[0].Created, "%s: a %s record is kept as it is", ev, before.State)
			assertSameDelivery(t, before, e.get(id))
		}
		assert.Empty(t, claimDue(t, e.h, e.clock.Now().Add(time.Hour), 10), "neither is claimable again")
		assert.Len(t, e.rec.RequestsFor(delivered), 1, "the delivered one is not sent again")
		assert.Empty(t, e.rec.RequestsFor(dead), "the dead one is not sent")
	})

	t.Run("RepublishAfterRetentionRemovedTheRecordIsANewDelivery", func(t *testing.T) {
		e := publishEngine(t, newHarness(t))
		hc := historyCleaner(t, e.h)
		id := e.publish("pay_7319", "lease.payment_recorded").Deliveries[0].ID
		require.Equal(t, hookrelay.StateDelivered, e.run(id).State)
		e.clock.Add(time.Hour)
		clean(t, hc, e.clock.Now(), hookrelay.RetentionPolicy{}, 100)
		assertGone(t, e.h, id, "a zero retention removes the delivered record")

		res := e.publish("pay_7319", "lease.payment_recorded")
		require.Equal(t, []string{"dest_1"}, destinationIDs(res))
		assert.Equal(t, id, res.Deliveries[0].ID, "the same delivery ID")
		assert.True(t, res.Deliveries[0].Created, "a removed record no longer makes the publish idempotent")
		d := e.get(id)
		assert.Equal(t, hookrelay.StatePending, d.State)
		assert.Equal(t, 1, d.Attempt)
		assert.Equal(t, e.clock.Now(), d.FirstQueuedAt.In(e.clock.Now().Location()))
		assert.Empty(t, e.attempts(id), "no attempt of the removed record shows in the new one")
		assert.Equal(t, hookrelay.StateDelivered, e.run(id).State)
		assert.Len(t, e.attempts(id), 1)
		assert.Len(t, e.rec.RequestsFor(id), 2, "sent again, with the same ID")
	})

	t.Run("ErrorsWhenDestinationsLackTheAbility", func(t *testing.T) {
		e := newEngine(t, newHarness(t)) // its Destinations wrapper hides optional abilities
		_, err := e.client.Publish(ctx, hookrelay.PublishParams{
			EventID: "pay_7319", TenantID: "tenant_a", EventType: "lease.payment_recorded",
		})
		require.ErrorIs(t, err, hookrelay.ErrUnsupported)
		assert.ErrorContains(t, err, "DestinationFinder")
	})
}

// lister returns the harness's DestinationFinder or skips the test.
func lister(t *testing.T, h Harness) hookrelay.DestinationFinder {
	t.Helper()
	l, ok := h.Destinations.(hookrelay.DestinationFinder)
	if !ok {
		t.Skip("the Destinations do not implement hookrelay.DestinationFinder (an optional ability)")
	}
	return l
}

func listed(t *testing.T, h Harness, tenant, eventType string) []string {
	t.Helper()
	ds, err := lister(t, h).DestinationsFor(context.Background(), hookrelay.DestinationsForParams{TenantID: tenant, EventType: eventType})
	require.NoError(t, err)
	out := []string{}
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// putSubscribers stores destinations of two tenants (and one without a
// tenant) with every kind of pattern.
func putSubscribers(t *testing.T, h Harness) {
	t.Helper()
	for _, d := range []hookrelay.Destination{
		{ID: "a_exact", TenantID: "tenant_a", EventTypes: []string{"lease.payment_recorded"}},
		{ID: "a_lease", TenantID: "tenant_a", EventTypes: []string{"lease.*"}},
		{ID: "a_star", TenantID: "tenant_a", EventTypes: []string{"*"}},
		{ID: "a_all", TenantID: "tenant_a"},
		{ID: "a_invoice", TenantID: "tenant_a", EventTypes: []string{"invoice.*", "lease.payment_recorded.v2"}},
		{ID: "a_paused", TenantID: "tenant_a", EventTypes: []string{"lease.payment_recorded"}, Paused: true},
		{ID: "a_disabled", TenantID: "tenant_a", EventTypes: []string{"lease.*"}, Disabled: true, DisabledReason: "recipient answered 410"},
		{ID: "b_lease", TenantID: "tenant_b", EventTypes: []string{"lease.*"}},
		{ID: "no_tenant", EventTypes: []string{"*"}},
	} {
		d.URL = "https://" + d.ID + ".example/webhooks"
		require.NoError(t, h.Destinations.Put(context.Background(), d))
	}
}

// publishEngine is an engine whose client uses the harness's adapters
// directly, so their optional abilities are visible.
func publishEngine(t *testing.T, h Harness) *engine {
	t.Helper()
	lister(t, h)
	return newEngine(t, h, func(c *hookrelay.Config) {
		c.Queue, c.Ledger, c.Destinations = h.Queue, h.Ledger, h.Destinations
	})
}

func (e *engine) publish(eventID, eventType string) hookrelay.PublishResult {
	e.t.Helper()
	res, err := e.client.Publish(context.Background(), hookrelay.PublishParams{
		EventID: eventID, TenantID: "tenant_a", EventType: eventType,
		Scope: map[string]string{"property": "prop_204"}, Payload: []byte(`{"event":"` + eventID + `"}`),
	})
	require.NoError(e.t, err)
	return res
}

func destinationIDs(r hookrelay.PublishResult) []string {
	out := []string{}
	for _, d := range r.Deliveries {
		out = append(out, d.DestinationID)
	}
	return out
}

func createdFlags(r hookrelay.PublishResult) []bool {
	out := []bool{}
	for _, d := range r.Deliveries {
		out = append(out, d.Created)
	}
	return out
}
