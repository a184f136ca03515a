package hooknats_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay"
	hooknats "github.com/hookrelay/hookrelay/adapters/nats"
)

const envURL = "HOOKRELAY_TEST_NATS_URL"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testDelay is the adapter's longest delay in tests: a mock-clock jump of
// any size is followed within it.
const testDelay = 20 * time.Millisecond

// connectURL returns the test server's URL or skips naming the variable.
func connectURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(envURL)
	if url == "" {
		t.Skipf("set %s (e.g. nats://127.0.0.1:4222) to run the NATS JetStream tests", envURL)
	}
	return url
}

// connect returns a JetStream context on the test server, closed at
// cleanup, or skips naming the variable.
func connect(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(connectURL(t), nats.Name("hookrelay-test"))
	require.NoError(t, err, "connect to %s", envURL)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// testConfig names a fresh stream, dead-letter stream and consumer for one
// test and deletes them at cleanup.
func testConfig(t testing.TB, js jetstream.JetStream) hooknats.Config {
	t.Helper()
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	cfg := hooknats.Config{
		Stream:             "HRTEST_" + id,
		Subject:            "hrtest." + id + ".deliveries",
		MaxRedeliveryDelay: testDelay,
		SkipDelay:          testDelay,
		ParkDelay:          time.Hour,
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = js.DeleteStream(ctx, cfg.Stream)
		_ = js.DeleteStream(ctx, cfg.Stream+"_DEAD")
	})
	return cfg
}

func newQueue(t testing.TB, js jetstream.JetStream, ledger hookrelay.LeaseLedger, cfg hooknats.Config) *hooknats.Queue {
	t.Helper()
	// The test server (NATS 2.9) sometimes fails a stream create with
	// "error creating store for stream" while another test deletes the
	// last stream and it removes the streams directory (10077 in its log).
	// That race is the server's, not the adapter's: try again, a few times.
	var (
		q   *hooknats.Queue
		err error
	)
	for try := range 5 {
		if q, err = hooknats.New(context.Background(), js, ledger, cfg); err == nil || !strings.Contains(err.Error(), "err_code=10049") {
			break
		}
		time.Sleep(time.Duration(try+1) * 50 * time.Millisecond)
	}
	require.NoError(t, err)
	return q
}
