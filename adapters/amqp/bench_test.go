package hookamqp_test

import (
	"fmt"
	"testing"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/internal/brokerbench"
)

// BenchmarkDeliveries measures deliveries per second end to end (enqueue,
// claim through the broker and the ledger's lease, no-op send, ledger
// write, acknowledge) with the memory ledger. The ceiling, the memory
// store as its own queue, is in the NATS package's benchmark.
func BenchmarkDeliveries(b *testing.B) {
	for _, conc := range []int{16, 64} {
		b.Run(fmt.Sprintf("amqp-memory-ledger/concurrency-%d", conc), func(b *testing.B) {
			brokerbench.Run(b, func(b *testing.B) (hookrelay.Queue, hookrelay.Ledger) {
				ledger := memory.NewStore()
				cfg := testConfig(b)
				cfg.Prefetch = conc
				return newQueue(b, ledger, cfg), ledger
			}, brokerbench.Concurrency(conc))
		})
	}
}
