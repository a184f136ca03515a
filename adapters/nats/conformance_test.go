package hooknats_test

import (
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaytest"
	"github.com/hookrelay/hookrelay/internal/brokertest"
)

// redeliveryWithin bounds how long the suite waits for a delayed message
// to come back: the adapter's longest delay (testDelay) plus a generous
// margin for a loaded machine under -race.
const redeliveryWithin = 750 * time.Millisecond

// TestConformanceNATS runs the suite's Queue, Engine and Redrive tests with JetStream as
// the queue and each ledger: memory, SQLite and PostgreSQL.
func TestConformanceNATS(t *testing.T) {
	for _, lc := range brokertest.Ledgers() {
		t.Run(lc.Name, func(t *testing.T) {
			// The ledgers run side by side: the suite mostly waits for the
			// broker's real-time redeliveries.
			t.Parallel()
			newHarness := func(t *testing.T) hookrelaytest.Harness {
				js := connect(t)
				ledger := lc.New(t)
				return hookrelaytest.Harness{
					Queue:            newQueue(t, js, ledger, testConfig(t, js)),
					Ledger:           ledger,
					Destinations:     memory.NewDestinations(),
					RedeliveryWithin: redeliveryWithin,
				}
			}
			t.Run("Queue", func(t *testing.T) { hookrelaytest.RunQueue(t, newHarness) })
			t.Run("Engine", func(t *testing.T) { hookrelaytest.RunEngine(t, newHarness) })
			t.Run("Redrive", func(t *testing.T) { hookrelaytest.RunRedrive(t, newHarness) })
		})
	}
}

func TestOperatorRedriveThroughTheBroker(t *testing.T) {
	js := connect(t)
	store := brokertest.SQLite(t)
	brokertest.Redrive(t, newQueue(t, js, store, testConfig(t, js)), store)
}
