package hookamqp_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay"
	hookamqp "github.com/hookrelay/hookrelay/adapters/amqp"
)

const envURL = "HOOKRELAY_TEST_AMQP_URL"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testBuckets are the wait queues in tests: a mock-clock jump of any size
// is followed within the largest.
var testBuckets = []time.Duration{5 * time.Millisecond, 20 * time.Millisecond}

func brokerURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(envURL)
	if url == "" {
		t.Skipf("set %s (e.g. amqp://guest:guest@127.0.0.1:5672/) to run the RabbitMQ tests", envURL)
	}
	return url
}

// testConfig names fresh queues for one test and deletes them at cleanup.
func testConfig(t testing.TB) hookamqp.Config {
	t.Helper()
	url := brokerURL(t)
	cfg := hookamqp.Config{
		Name:         "hrtest." + strings.ReplaceAll(uuid.NewString(), "-", "")[:12],
		DelayBuckets: testBuckets,
		SkipDelay:    5 * time.Millisecond,
		ClaimWait:    50 * time.Millisecond,
		// Above the most the suite holds unacknowledged at once (its
		// engine claims up to 100 in one step).
		Prefetch: 128,
	}
	t.Cleanup(func() {
		conn, err := amqp.Dial(url)
		if err != nil {
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		names := []string{cfg.Name + ".work", cfg.Name + ".dead"}
		for _, d := range testBuckets {
			names = append(names, cfg.Name+".wait."+d.String())
		}
		for _, n := range names {
			_, _ = ch.QueueDelete(n, false, false, false)
		}
	})
	return cfg
}

func newQueue(t testing.TB, ledger hookrelay.LeaseLedger, cfg hookamqp.Config) *hookamqp.Queue {
	t.Helper()
	q, err := hookamqp.New(context.Background(), brokerURL(t), ledger, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, q.Close()) })
	return q
}
