package hooksql

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay"
)

// BenchmarkPublish measures Client.Publish, one event fanned out to 1, 10
// and 100 subscribed destinations of one tenant, among 1,000 destinations
// of other tenants (so the tenant index matters): one op is one publish,
// i.e. one destination lookup and one Create transaction of subs records.
// No worker runs; this is the producer's side. The enqueue_many baseline
// stores the same records with one EnqueueMany, which looks each
// destination up by ID.
func BenchmarkPublish(b *testing.B) {
	forEachBackendB(b, func(b *testing.B, be backend) {
		ctx := context.Background()
		s := newStore(b, be, Options{})
		for i := range 1000 {
			if err := s.Put(ctx, hookrelay.Destination{
				ID: fmt.Sprintf("other_%04d", i), TenantID: fmt.Sprintf("tenant_%d", i%50), URL: "https://127.0.0.1/unused",
			}); err != nil {
				b.Fatal(err)
			}
		}
		client, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: s})
		if err != nil {
			b.Fatal(err)
		}
		payload := bytes.Repeat([]byte("x"), 512)
		added, seq := 0, 0 // seq keeps event IDs new across -count runs
		for _, subs := range []int{1, 10, 100} {
			for ; added < subs; added++ {
				if err := s.Put(ctx, hookrelay.Destination{
					ID: fmt.Sprintf("sub_%03d", added), TenantID: "publisher", URL: "https://127.0.0.1/unused",
					EventTypes: []string{"lease.*"},
				}); err != nil {
					b.Fatal(err)
				}
			}
			// The baseline is the fan-out a user writes without Publish: one
			// EnqueueMany naming every destination.
			for _, mode := range []string{"publish", "enqueue_many"} {
				b.Run(fmt.Sprintf("subscribers=%d/%s", subs, mode), func(b *testing.B) {
					eps := make([]hookrelay.EnqueueParams, subs)
					b.ResetTimer()
					start := time.Now()
					for range b.N {
						seq++
						var res []hookrelay.EnqueueResult
						if mode == "publish" {
							r, err := client.Publish(ctx, hookrelay.PublishParams{
								EventID: fmt.Sprintf("evt_%d", seq), TenantID: "publisher",
								EventType: "lease.payment_recorded", Payload: payload,
							})
							if err != nil {
								b.Fatal(err)
							}
							res = r.Deliveries
						} else {
							for j := range eps {
								eps[j] = hookrelay.EnqueueParams{
									EventID: fmt.Sprintf("evt_%d", seq), TenantID: "publisher", DestinationID: fmt.Sprintf("sub_%03d", j),
									EventType: "lease.payment_recorded", Payload: payload,
								}
							}
							res, err = client.EnqueueMany(ctx, eps)
							if err != nil {
								b.Fatal(err)
							}
						}
						if len(res) != subs || !res[0].Created {
							b.Fatalf("%d deliveries, want %d new ones", len(res), subs)
						}
					}
					elapsed := time.Since(start).Seconds()
					b.ReportMetric(float64(b.N)/elapsed, "events/s")
					b.ReportMetric(float64(b.N*subs)/elapsed, "deliveries/s")
				})
			}
		}
	})
}
