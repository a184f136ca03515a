package hookamqp_test

import (
	"testing"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/brokertest"
)

// redeliveryWithin bounds how long the suite waits for a delayed message
// to come back: the largest test bucket plus a generous margin for a
// loaded machine under -race.
const redeliveryWithin = 750 * time.Millisecond

// TestConformanceAMQP runs the suite's Queue, Engine and Redrive tests with RabbitMQ as
// the queue and each ledger: memory, SQLite and PostgreSQL.
func TestConformanceAMQP(t *testing.T) {
	brokertest.RunConformance(t, redeliveryWithin, func(t *testing.T, ledger brokertest.Ledger) hookrelay.Queue {
		return newQueue(t, ledger, testConfig(t))
	})
}

func TestOperatorRedriveThroughTheBroker(t *testing.T) {
	store := brokertest.SQLite(t)
	brokertest.Redrive(t, newQueue(t, store, testConfig(t)), store)
}

// TestLostPublishIsRecovered: a crash between the ledger's create and the
// publish leaves a pending record with no message; the worker publishes it
// again after the grace period, on the SQL ledgers.
func TestLostPublishIsRecovered(t *testing.T) {
	brokertest.LostPublish(t, func(t *testing.T, ledger brokertest.Ledger) hookrelay.Queue {
		return newQueue(t, ledger, testConfig(t))
	})
}
