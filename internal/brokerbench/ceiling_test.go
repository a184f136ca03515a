package brokerbench_test

import (
	"testing"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/brokerbench"
	"github.com/hookrelay/hookrelay/internal/brokertest"
)

// BenchmarkCeiling runs each ledger as its own queue (the store's claim
// instead of a broker): the figure a broker queue over that ledger is
// compared with.
func BenchmarkCeiling(b *testing.B) {
	for _, lc := range brokertest.Ledgers() {
		b.Run(lc.Name+"-as-queue/concurrency-16", func(b *testing.B) {
			brokerbench.Run(b, func(b *testing.B) (hookrelay.Queue, hookrelay.Ledger) {
				l := lc.New(b)
				return l.(hookrelay.Queue), l
			}, brokerbench.Concurrency(16))
		})
	}
}
