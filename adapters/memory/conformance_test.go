package memory_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformanceMemory(t *testing.T) {
	hookrelaytest.Run(t, func(t *testing.T) hookrelaytest.Harness {
		s := memory.NewStore()
		return hookrelaytest.Harness{Queue: s, Ledger: s, Destinations: memory.NewDestinations()}
	})
}
