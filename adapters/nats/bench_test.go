package hooknats_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/internal/brokerbench"
)

// BenchmarkDeliveries measures deliveries per second end to end (enqueue,
// claim through the broker and the ledger's lease, no-op send, ledger
// write, acknowledge) with the memory ledger. The "ceiling" case runs the
// same worker with the memory store as its own queue.
func BenchmarkDeliveries(b *testing.B) {
	for _, conc := range []int{16, 64} {
		b.Run(fmt.Sprintf("ceiling-memory-queue/concurrency-%d", conc), func(b *testing.B) {
			brokerbench.Run(b, func(b *testing.B) (hookrelay.Queue, hookrelay.Ledger) {
				s := memory.NewStore()
				return s, s
			}, brokerbench.Concurrency(conc))
		})
		b.Run(fmt.Sprintf("nats-memory-ledger/concurrency-%d", conc), func(b *testing.B) {
			brokerbench.Run(b, func(b *testing.B) (hookrelay.Queue, hookrelay.Ledger) {
				js := connect(b)
				ledger := memory.NewStore()
				cfg := testConfig(b, js)
				cfg.MaxRedeliveryDelay = time.Second
				return newQueue(b, js, ledger, cfg), ledger
			}, brokerbench.Concurrency(conc))
		})
	}
}
