package memory_test

import (
	"testing"

	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaytest"
)

func TestStatsConformance(t *testing.T) {
	hookrelaytest.RunStats(t, func(t *testing.T) hookrelaytest.Harness {
		s := memory.NewStore()
		return hookrelaytest.Harness{Queue: s, Ledger: s, Destinations: memory.NewDestinations()}
	})
}
