package hooknats_test

import (
	"testing"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/brokertest"
)

// redeliveryWithin bounds how long the suite waits for a delayed message
// to come back: the adapter's longest delay (testDelay) plus a generous
// margin for a loaded machine under -race.
const redeliveryWithin = 750 * time.Millisecond

// TestConformanceNATS runs the suite's Queue, Engine and Redrive tests with JetStream as
// the queue and each ledger: memory, SQLite and PostgreSQL.
func TestConformanceNATS(t *testing.T) {
	brokertest.RunConformance(t, redeliveryWithin, func(t *testing.T, ledger brokertest.Ledger) hookrelay.Queue {
		js := connect(t)
		return newQueue(t, js, ledger, testConfig(t, js))
	})
}

func TestOperatorRedriveThroughTheBroker(t *testing.T) {
	js := connect(t)
	store := brokertest.SQLite(t)
	brokertest.Redrive(t, newQueue(t, js, store, testConfig(t, js)), store)
}

// TestLostPublishIsRecovered: a crash between the ledger's create and the
// publish leaves a pending record with no message; the worker publishes it
// again after the grace period, on the SQL ledgers.
func TestLostPublishIsRecovered(t *testing.T) {
	brokertest.LostPublish(t, func(t *testing.T, ledger brokertest.Ledger) hookrelay.Queue {
		js := connect(t)
		return newQueue(t, js, ledger, testConfig(t, js))
	})
}
