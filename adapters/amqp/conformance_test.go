package hookamqp_test

import (
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaytest"
)

// redeliveryWithin bounds how long the suite waits for a delayed message
// to come back: the largest test bucket plus a generous margin for a
// loaded machine under -race.
const redeliveryWithin = 750 * time.Millisecond

func TestConformanceMemoryLedger(t *testing.T) {
	newHarness := func(t *testing.T) hookrelaytest.Harness {
		ledger := memory.NewStore()
		return hookrelaytest.Harness{
			Queue:            newQueue(t, ledger, testConfig(t)),
			Ledger:           ledger,
			Destinations:     memory.NewDestinations(),
			RedeliveryWithin: redeliveryWithin,
		}
	}
	t.Run("Queue", func(t *testing.T) { hookrelaytest.RunQueue(t, newHarness) })
	t.Run("Engine", func(t *testing.T) { hookrelaytest.RunEngine(t, newHarness) })
}
