package benchenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookrelay/hookrelay"
	hookamqp "github.com/hookrelay/hookrelay/adapters/amqp"
	"github.com/hookrelay/hookrelay/adapters/memory"
	hooknats "github.com/hookrelay/hookrelay/adapters/nats"
)

// NATSURLEnv and AMQPURLEnv name the brokers' URL variables, the same ones
// the broker adapters' tests read.
const (
	NATSURLEnv = "HOOKRELAY_TEST_NATS_URL"
	AMQPURLEnv = "HOOKRELAY_TEST_AMQP_URL"
)

// DefaultNATSURL and DefaultAMQPURL are the brokers on this machine, used
// when Options leaves the URL empty.
const (
	DefaultNATSURL = "nats://127.0.0.1:4222"
	DefaultAMQPURL = "amqp://guest:guest@127.0.0.1:5672/"
)

// EnvOr returns the environment variable's value, or def when it is unset.
func EnvOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// brokerNote says what a broker backend is made of: the broker is only the
// Queue.
const brokerNote = "queue on the broker; ledger and destinations a fresh memory.Store and memory.Destinations"

// leaseFor is the worker's lease as the harness sets it (hookrelay's
// default when zero).
func (o Options) leaseFor() time.Duration {
	if o.LeaseFor > 0 {
		return o.LeaseFor
	}
	return 2 * time.Minute
}

// runID names this run's streams or queues: the process and 6 random bytes.
func runID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%d_%s", os.Getpid(), hex.EncodeToString(b[:]))
}

// openNATS returns a JetStream queue on fresh streams and a fresh consumer,
// leasing from a memory ledger. Close deletes both streams (and with them
// the consumer) and closes the connection.
func openNATS(ctx context.Context, name string, o Options) (*Store, error) {
	url := o.NATSURL
	if url == "" {
		url = DefaultNATSURL
	}
	nc, err := nats.Connect(url, nats.Name("hookrelay-bench"))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s (set %s or pass --nats-url): %w", url, NATSURLEnv, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	id := runID()
	cfg := hooknats.Config{
		Stream:  "HRBENCH_" + id,
		Subject: "hrbench." + id + ".deliveries",
		// The adapter refuses a claim whose lease is not below AckWait.
		AckWait: 2 * o.leaseFor(),
	}
	cfg.DeadLetterStream = cfg.Stream + "_DEAD"
	drop := func() error {
		var errs []error
		for _, s := range []string{cfg.Stream, cfg.DeadLetterStream} {
			if err := js.DeleteStream(context.Background(), s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				errs = append(errs, fmt.Errorf("delete stream %s: %w", s, err))
			}
		}
		nc.Close()
		return errors.Join(errs...)
	}
	ledger, dests := memory.NewStore(), memory.NewDestinations()
	q, err := hooknats.New(ctx, js, ledger, cfg)
	if err != nil {
		return nil, errors.Join(err, drop())
	}
	return &Store{
		Name: name, Note: brokerNote, Queue: q, Ledger: ledger, Destinations: dests,
		Put: dests.Put, Close: drop, created: []string{cfg.Stream, cfg.DeadLetterStream},
	}, nil
}

// openRabbitMQ returns a RabbitMQ queue on fresh queues, leasing from a
// memory ledger, with the prefetch at eight times the worker's
// concurrency. Close closes the queue's connection and deletes every queue
// it declared.
func openRabbitMQ(ctx context.Context, name string, o Options) (*Store, error) {
	url := o.AMQPURL
	if url == "" {
		url = DefaultAMQPURL
	}
	cfg := hookamqp.Config{
		Name:         "hrbench." + runID(),
		DelayBuckets: hookamqp.DefaultDelayBuckets,
		// The adapter's advice: what the worker claims ahead (zero: the
		// adapter's default, for the worker's default Concurrency).
		Prefetch: hookrelay.ClaimAhead * o.Concurrency,
	}
	queues := []string{cfg.Name + ".work", cfg.Name + ".dead"}
	for _, d := range cfg.DelayBuckets {
		queues = append(queues, fmt.Sprintf("%s.wait.%dms", cfg.Name, d.Milliseconds()))
	}
	drop := func() error {
		conn, err := amqp.Dial(url)
		if err != nil {
			return fmt.Errorf("delete queues %s.*: %w", cfg.Name, err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return fmt.Errorf("delete queues %s.*: %w", cfg.Name, err)
		}
		var errs []error
		for _, n := range queues {
			if _, err := ch.QueueDelete(n, false, false, false); err != nil {
				errs = append(errs, fmt.Errorf("delete queue %s: %w", n, err))
				break // an error closes the channel
			}
		}
		return errors.Join(errs...)
	}
	ledger, dests := memory.NewStore(), memory.NewDestinations()
	q, err := hookamqp.New(ctx, url, ledger, cfg)
	if err != nil {
		// New may have declared the queues before it failed.
		_ = drop()
		return nil, fmt.Errorf("RabbitMQ at %s (set %s or pass --amqp-url): %w", redactAMQP(url), AMQPURLEnv, err)
	}
	return &Store{
		Name: name, Note: brokerNote, Queue: q, Ledger: ledger, Destinations: dests,
		Put: dests.Put, Close: func() error { return errors.Join(q.Close(), drop()) }, created: queues,
	}, nil
}

// redactAMQP hides the password in an AMQP URL.
func redactAMQP(url string) string {
	u, err := amqp.ParseURI(url)
	if err != nil {
		return "(unparsable URL)"
	}
	u.Password = "xxxxx"
	return u.String()
}
