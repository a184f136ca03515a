package hookamqp_test

import (
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaytest"
	"github.com/hookrelay/hookrelay/internal/brokertest"
)

// redeliveryWithin bounds how long the suite waits for a delayed message
// to come back: the largest test bucket plus a generous margin for a
// loaded machine under -race.
const redeliveryWithin = 750 * time.Millisecond

// TestConformanceAMQP runs the suite's Queue, Engine and Redrive tests with RabbitMQ as
// the queue and each ledger: memory, SQLite and PostgreSQL.
func TestConformanceAMQP(t *testing.T) {
	for _, lc := range brokertest.Ledgers() {
		t.Run(lc.Name, func(t *testing.T) {
			// The ledgers run side by side: the suite mostly waits for the
			// broker's real-time redeliveries.
			t.Parallel()
			newHarness := func(t *testing.T) hookrelaytest.Harness {
				ledger := lc.New(t)
				return hookrelaytest.Harness{
					Queue:            newQueue(t, ledger, testConfig(t)),
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
	store := brokertest.SQLite(t)
	brokertest.Redrive(t, newQueue(t, store, testConfig(t)), store)
}
