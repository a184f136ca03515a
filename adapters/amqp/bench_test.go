package hookamqp_test

import (
	"fmt"
	"testing"

	"github.com/hookrelay/hookrelay"
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
					cfg.Prefetch = conc
					return newQueue(b, ledger, cfg), ledger
				}, brokerbench.Concurrency(conc))
			})
		}
	}
}
