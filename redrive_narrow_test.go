package hookrelay_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// A redrive narrowed to some tenants as it starts (RedriveParams.
// NarrowTenants, the console's operator scoped to a tenant) counts, is
// authorized for and moves only those: a selection spanning two tenants
// narrowed to one is a single-tenant redrive, the other tenant's dead
// letter stays dead, and one narrowed to none moves nothing, as a
// selection matching nothing.
func TestRedriveNarrowedToSomeTenantsMovesOnlyThose(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	store := memory.NewStore()
	dests := memory.NewDestinations(
		hookrelay.Destination{ID: "accounting", TenantID: "tenant_a", URL: "https://accounting.example/"},
		hookrelay.Destination{ID: "shipping", TenantID: "tenant_b", URL: "https://shipping.example/"},
	)
	client, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: dests, Clock: clk,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			return hookrelay.Permanent(hookrelay.ReasonAuthRejected).WithStatus(401)
		}),
	})
	require.NoError(t, err)
	ids := map[string]string{}
	for tenant, dest := range map[string]string{"tenant_a": "accounting", "tenant_b": "shipping"} {
		res, err := client.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "ev_" + tenant, TenantID: tenant, DestinationID: dest, EventType: "t", Payload: []byte(`{}`)})
		require.NoError(t, err)
		ids[tenant] = res.ID
	}
	claims, err := store.Claim(ctx, hookrelay.ClaimParams{Now: clk.Now(), Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	for _, c := range claims {
		require.NoError(t, client.Process(ctx, c))
	}
	state := func(tenant string) hookrelay.State {
		d, err := store.Get(ctx, ids[tenant])
		require.NoError(t, err)
		return d.State
	}
	require.Equal(t, hookrelay.StateDead, state("tenant_a"))
	require.Equal(t, hookrelay.StateDead, state("tenant_b"))

	var spanned [][]string
	var asked []hookrelay.RedriveAuthorization
	redrive := func(keep ...string) hookrelay.RedriveAudit {
		t.Helper()
		spanned, asked = nil, nil
		a, err := client.Redrive(ctx, hookrelay.RedriveParams{
			Filter: hookrelay.DeadLetterFilter{EventTypes: []string{"t"}}, Actor: "alice", Reason: "r", RatePerSecond: 5,
			NarrowTenants: func(_ context.Context, ts []string) []string {
				spanned = append(spanned, ts)
				return keep
			},
			Authorizer: hookrelay.AuthorizerFunc(func(_ context.Context, req hookrelay.RedriveAuthorization) error {
				asked = append(asked, req)
				return nil
			}),
		})
		require.NoError(t, err, "a selection narrowed to one tenant is no cross-tenant redrive")
		return a
	}

	a := redrive()
	assert.Equal(t, [][]string{{"tenant_a", "tenant_b"}}, spanned, "NarrowTenants is given the tenants the selection spans")
	require.Len(t, asked, 1)
	assert.Empty(t, asked[0].Tenants, "narrowed to none, it is authorized as a selection matching nothing")
	assert.Empty(t, a.Tenants)
	assert.Zero(t, a.Matched)
	assert.Equal(t, hookrelay.RedriveFinished, a.State)
	assert.Equal(t, hookrelay.StateDead, state("tenant_a"))
	assert.Equal(t, hookrelay.StateDead, state("tenant_b"))

	// A tenant the selection does not span is not added by naming it:
	// tenant_z has no dead letter of the selection.
	a = redrive("tenant_a", "tenant_z")
	require.Len(t, asked, 1)
	assert.Equal(t, []string{"tenant_a"}, asked[0].Tenants)
	assert.EqualValues(t, 1, asked[0].Plan.Total)
	assert.Equal(t, []string{"tenant_a"}, a.Tenants)
	assert.EqualValues(t, 1, a.Matched)
	assert.EqualValues(t, 1, a.Redriven)
	assert.Equal(t, []string{"t"}, a.Filter.EventTypes)
	assert.Empty(t, a.Filter.TenantIDs, "the selection is recorded as given")
	assert.Equal(t, hookrelay.StatePending, state("tenant_a"))
	assert.Equal(t, hookrelay.StateDead, state("tenant_b"), "a tenant left out was moved")
}
