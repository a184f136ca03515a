package hookrelay_test

import (
	"context"
	"fmt"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// An operator inspects a dead-lettered payment webhook, counts what a
// redrive would move, corrects the destination and redrives it: same
// delivery ID, old attempt kept, a fresh attempt budget.
func ExampleClient_Redrive() {
	ctx := context.Background()
	store := memory.NewStore()
	dests := memory.NewDestinations(hookrelay.Destination{ID: "accounting", TenantID: "tenant_a", URL: "https://accounting.example/old"})
	client, _ := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: dests,
		Sender: hookrelay.SenderFunc(func(_ context.Context, p hookrelay.SendParams) hookrelay.Result {
			if p.Destination.URL == "https://accounting.example/old" {
				return hookrelay.Permanent(hookrelay.ReasonNotFound).WithStatus(404)
			}
			return hookrelay.Delivered(204)
		}),
	})
	res, _ := client.Enqueue(ctx, hookrelay.EnqueueParams{
		EventID: "pay_7319", TenantID: "tenant_a", DestinationID: "accounting",
		EventType: "lease.payment_recorded", Payload: []byte(`{"payment_id":"pay_7319"}`),
	})
	runDue := func() {
		claims, _ := store.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 10, LeaseFor: time.Minute})
		for _, c := range claims {
			_ = client.Process(ctx, c)
		}
	}
	runDue()

	sel := hookrelay.DeadLetterFilter{DestinationIDs: []string{"accounting"}}
	page, _ := client.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: sel})
	fmt.Println("dead:", len(page.Deliveries), page.Deliveries[0].LastReason)
	plan, _ := client.PlanRedrive(ctx, sel)
	for _, r := range plan.Rows {
		fmt.Println("plan:", r.TenantID, r.DestinationID, r.Reason, r.Count)
	}

	_ = dests.Put(ctx, hookrelay.Destination{ID: "accounting", TenantID: "tenant_a", URL: "https://accounting.example/v2"})
	audit, err := client.Redrive(ctx, hookrelay.RedriveParams{
		Filter: sel, Actor: "ops@example", Reason: "endpoint moved to /v2", RatePerSecond: 5,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("redrive:", audit.State, audit.Matched, "matched,", audit.Redriven, "re-enqueued")
	runDue()

	detail, _ := client.Delivery(ctx, res.ID)
	fmt.Println("delivery:", detail.Delivery.State, detail.Delivery.ID == res.ID)
	for _, a := range detail.Attempts {
		fmt.Println("attempt", a.Number, a.Kind, a.StatusCode)
	}
	// Output:
	// dead: 1 not_found
	// plan: tenant_a accounting not_found 1
	// redrive: finished 1 matched, 1 re-enqueued
	// delivery: delivered true
	// attempt 1 permanent 404
	// attempt 2 delivered 204
}
