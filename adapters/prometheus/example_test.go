package hookprom_test

import (
	"context"
	"fmt"
	"log"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	hookprom "github.com/hookrelay/hookrelay/adapters/prometheus"
)

func Example() {
	store := memory.NewStore()
	reg := prometheus.NewRegistry() // serve it with promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	metrics, err := hookprom.New(hookprom.Config{Registerer: reg, Stats: store})
	if err != nil {
		log.Fatal(err)
	}
	client, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store,
		Destinations: memory.NewDestinations(hookrelay.Destination{ID: "acme", URL: "https://acme.example/hooks"}),
		Observer:     metrics,
	})
	if err != nil {
		log.Fatal(err)
	}
	_, err = client.Enqueue(context.Background(), hookrelay.EnqueueParams{
		EventID: "evt-1", TenantID: "tenant-1", DestinationID: "acme", EventType: "lease.payment_recorded",
	})
	if err != nil {
		log.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg, "hookrelay_pending_deliveries")
	fmt.Println("destinations with pending deliveries:", n, err)
	// Output: destinations with pending deliveries: 1 <nil>
}
