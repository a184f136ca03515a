package hookamqp_test

import (
	"fmt"
	"testing"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/internal/brokerbench"
	"github.com/hookrelay/hookrelay/internal/brokertest"
)

// BenchmarkDeliveries measures deliveries per second end to end (enqueue,
// claim through the broker and the ledger's lease, no-op send, ledger
// write, acknowledge) with each ledger. internal/brokerbench's
// BenchmarkCeiling runs each ledger as its own queue for comparison.
func BenchmarkDeliveries(b *testing.B) {
	for _, lc := range brokertest.Ledgers() {
		for _, conc := range []int{16, 64} {
			b.Run(fmt.Sprintf("%s-ledger/concurrency-%d", lc.Name, conc), func(b *testing.B) {
				brokerbench.Run(b, func(b *testing.B) (hookrelay.Queue, hookrelay.Ledger) {
					ledger := lc.New(b)
					cfg := testConfig(b)
					cfg.Prefetch = hookrelay.ClaimAhead * conc
					return newQueue(b, ledger, cfg), ledger
				}, brokerbench.Concurrency(conc))
			})
		}
	}
}

// BenchmarkDefaultsVsTuned compares, with the memory ledger, the library's
// defaults (only Concurrency set, deliveries spread over 16 destinations,
// the default per-destination limit) with the hand-tuned setting
// (brokerbench.Tuned: one destination, PerDestinationConcurrency equal to
// Concurrency). Run the two in turn, several times, on a quiet machine.
func BenchmarkDefaultsVsTuned(b *testing.B) {
	brokerbench.DefaultsVsTuned(b, func(b *testing.B, conc int) (hookrelay.Queue, hookrelay.Ledger) {
		ledger := memory.NewStore()
		cfg := testConfig(b)
		cfg.Prefetch = hookrelay.ClaimAhead * conc
		return newQueue(b, ledger, cfg), ledger
	})
}
