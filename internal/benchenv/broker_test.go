package benchenv

import (
	"context"
	"os"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	hookamqp "github.com/hookrelay/hookrelay/adapters/amqp"
)

func brokerURL(t *testing.T, env string) string {
	t.Helper()
	url := os.Getenv(env)
	if url == "" {
		t.Skipf("set %s to open the broker backend", env)
	}
	return url
}

// TestNATSNamesAreFreshAndCloseDeletesThem opens two NATS stores and
// checks their streams differ, exist while open and are gone after Close.
func TestNATSNamesAreFreshAndCloseDeletesThem(t *testing.T) {
	url := brokerURL(t, NATSURLEnv)
	ctx := context.Background()
	a, err := Open(ctx, "nats", Options{NATSURL: url})
	require.NoError(t, err)
	b, err := Open(ctx, "nats", Options{NATSURL: url})
	require.NoError(t, err)
	require.Len(t, a.created, 2)
	assert.NotEqual(t, a.created, b.created)

	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	for _, s := range []*Store{a, b} {
		for _, name := range s.created {
			_, err := js.Stream(ctx, name)
			require.NoError(t, err, "stream %s exists while the store is open", name)
		}
		require.NoError(t, s.Close())
		for _, name := range s.created {
			_, err := js.Stream(ctx, name)
			assert.ErrorIs(t, err, jetstream.ErrStreamNotFound, "stream %s deleted by Close", name)
		}
	}
}

// TestRabbitMQCloseDeletesQueues checks Close deletes every queue the store
// declared.
func TestRabbitMQCloseDeletesQueues(t *testing.T) {
	url := brokerURL(t, AMQPURLEnv)
	s, err := Open(context.Background(), "rabbitmq", Options{AMQPURL: url, Concurrency: 4})
	require.NoError(t, err)
	conn, err := amqp.Dial(url)
	require.NoError(t, err)
	defer conn.Close()
	// A passive declare of a missing queue closes the channel: one each.
	exists := func(name string) bool {
		ch, err := conn.Channel()
		require.NoError(t, err)
		defer ch.Close()
		_, err = ch.QueueDeclarePassive(name, true, false, false, false, nil)
		return err == nil
	}
	require.Len(t, s.created, 2+len(hookamqp.DefaultDelayBuckets), "work, dead and a wait queue per delay bucket")
	for _, name := range s.created {
		assert.True(t, exists(name), "queue %s exists while the store is open", name)
	}
	require.NoError(t, s.Close())
	for _, name := range s.created {
		assert.False(t, exists(name), "queue %s deleted by Close", name)
	}
}
