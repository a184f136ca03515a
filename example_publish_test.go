package hookrelay_test

import (
	"context"
	"fmt"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// A property manager's payment is published once; every destination of
// that tenant subscribed to the event type gets its own delivery. The
// second publish of the same event creates nothing new.
func ExampleClient_Publish() {
	ctx := context.Background()
	store := memory.NewStore()
	dests := memory.NewDestinations(
		hookrelay.Destination{ID: "accounting", TenantID: "prop_mgmt_co", URL: "https://accounting.example/hooks",
			EventTypes: []string{"lease.payment_recorded"}},
		hookrelay.Destination{ID: "crm", TenantID: "prop_mgmt_co", URL: "https://crm.example/hooks",
			EventTypes: []string{"lease.*"}},
		hookrelay.Destination{ID: "invoicing", TenantID: "prop_mgmt_co", URL: "https://invoicing.example/hooks",
			EventTypes: []string{"invoice.*"}},
		hookrelay.Destination{ID: "old_bi", TenantID: "prop_mgmt_co", URL: "https://bi.example/hooks",
			Disabled: true, DisabledReason: "recipient answered 410 Gone"},
		hookrelay.Destination{ID: "other_tenant", TenantID: "other_co", URL: "https://other.example/hooks"},
	)
	client, err := hookrelay.New(hookrelay.Config{Queue: store, Ledger: store, Destinations: dests})
	if err != nil {
		fmt.Println(err)
		return
	}
	params := hookrelay.PublishParams{
		EventID: "pay_7319", TenantID: "prop_mgmt_co", EventType: "lease.payment_recorded",
		Payload: []byte(`{"payment_id":"pay_7319","amount_cents":125000}`),
	}
	for range 2 {
		res, err := client.Publish(ctx, params)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, d := range res.Deliveries {
			fmt.Printf("%s created=%t same ID=%t\n", d.DestinationID, d.Created, d.ID == hookrelay.DeliveryID("pay_7319", d.DestinationID))
		}
		for _, s := range res.Skipped {
			fmt.Printf("%s skipped: %s (%s)\n", s.ID, s.Reason, s.Detail)
		}
	}
	// Output:
	// accounting created=true same ID=true
	// crm created=true same ID=true
	// old_bi skipped: destination_disabled (recipient answered 410 Gone)
	// accounting created=false same ID=true
	// crm created=false same ID=true
	// old_bi skipped: destination_disabled (recipient answered 410 Gone)
}
