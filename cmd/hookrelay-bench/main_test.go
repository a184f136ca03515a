package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay/internal/benchenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunReportsEveryFigure runs the whole benchmark small, on the memory
// backend, and checks that it reports each figure. It asserts nothing about
// speed.
func TestRunReportsEveryFigure(t *testing.T) {
	for _, sender := range []string{"hookhttp", "plain"} {
		t.Run(sender, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), options{
				backends: []string{"memory"}, n: 200, workers: 4, destinations: 2, payloadBytes: 256,
				latencyRate: 0.5, latencyFor: 200 * time.Millisecond, pending: 500, rounds: 2, sender: sender,
			}, &out)
			require.NoError(t, err, out.String())
			for _, want := range []string{"ceiling/s", "summary", "per delivery:", "bytes per pending delivery", "worker draining them"} {
				assert.Contains(t, out.String(), want)
			}
		})
	}
}

// TestRunBrokers runs the benchmark small on each broker backend whose
// server is named by its variable, and skips naming the variable otherwise.
func TestRunBrokers(t *testing.T) {
	for _, tc := range []struct{ backend, env string }{
		{"nats", benchenv.NATSURLEnv},
		{"rabbitmq", benchenv.AMQPURLEnv},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			url := os.Getenv(tc.env)
			if url == "" {
				t.Skipf("set %s to run the benchmark on the %s backend", tc.env, tc.backend)
			}
			var out bytes.Buffer
			err := run(context.Background(), options{
				backends: []string{tc.backend}, n: 200, workers: 4, destinations: 2, payloadBytes: 256,
				latencyRate: 0.5, latencyFor: 200 * time.Millisecond, rounds: 1, sender: "hookhttp",
				natsURL: url, amqpURL: url,
			}, &out)
			require.NoError(t, err, out.String())
			for _, want := range []string{"ceiling/s", "summary", "per delivery:", "memory.Store"} {
				assert.Contains(t, out.String(), want)
			}
		})
	}
}

func TestRunRefusesBadOptions(t *testing.T) {
	for _, o := range []options{
		{backends: []string{"oracle"}, n: 1, workers: 1, destinations: 1, rounds: 1, sender: "plain"},
		{backends: []string{"memory"}, n: 1, workers: 1, destinations: 1, rounds: 1, sender: "carrier-pigeon"},
		{backends: []string{"memory"}, n: 0, workers: 1, destinations: 1, rounds: 1, sender: "plain"},
	} {
		assert.Error(t, run(context.Background(), o, &bytes.Buffer{}))
	}
}

func TestMakePayloadIsExactSize(t *testing.T) {
	for _, n := range []int{64, 512, 4096} {
		assert.Len(t, makePayload(n), n)
	}
}
