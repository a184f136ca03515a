package hooksql_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hookrelay/hookrelay"
	hooksql "github.com/hookrelay/hookrelay/adapters/sql"
)

// The embedded default: a SQLite file holds the ledger, the queue and the
// destinations; enqueueing the same event twice makes one delivery.
func ExampleOpenSQLite() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "hookrelay-example")
	defer os.RemoveAll(dir)

	store, err := hooksql.OpenSQLite(ctx, filepath.Join(dir, "hookrelay.db"), hooksql.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if err := store.Put(ctx, hookrelay.Destination{ID: "acct", TenantID: "tenant_1", URL: "https://accounting.example/hooks"}); err != nil {
		fmt.Println(err)
		return
	}
	client, err := hookrelay.New(hookrelay.Config{Queue: store, Ledger: store, Destinations: store})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		res, err := client.Enqueue(ctx, hookrelay.EnqueueParams{
			EventID: "pay_7319", TenantID: "tenant_1", DestinationID: "acct",
			EventType: "lease.payment_recorded", Payload: []byte(`{"amountCents":125000}`),
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		d, _ := store.Get(ctx, res.ID)
		fmt.Println("created:", res.Created, "state:", d.State, "attempt:", d.Attempt)
	}
	// Output:
	// created: true state: pending attempt: 1
	// created: false state: pending attempt: 1
}
