package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
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
