package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay/internal/benchenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWithAppName(t *testing.T) {
	assert.Equal(t, "postgres://postgres@127.0.0.1:5432/test?application_name=w&sslmode=disable",
		withAppName("postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "w"))
	assert.Equal(t, "host=127.0.0.1 user=postgres application_name=w", withAppName("host=127.0.0.1 user=postgres", "w"))
}

// A worker that exited by itself is explained by how its log ends: the
// panic and its stack, or the error it returned, not the errors it survived.
func TestLogEnding(t *testing.T) {
	survived := "2026-12-03T18:18:34Z worker_error delivery=: hookrelay: queue.claim: terminated\n"
	assert.Equal(t, []string{"hookrelay-soak: migrate: connection refused"},
		logEnding(survived+survived+"hookrelay-soak: migrate: connection refused\n", 5))
	assert.Equal(t, []string{"panic: close of closed channel", "", "goroutine 7 [running]:", "main.f()"},
		logEnding(survived+"panic: close of closed channel\n\ngoroutine 7 [running]:\nmain.f()\n"+survived, 2))
	assert.Equal(t, []string{"fatal error: concurrent map writes", "x"},
		logEnding("fatal error: concurrent map writes\nx\n", 5))
	assert.Equal(t, []string{strings.TrimSuffix(survived, "\n")}, logEnding(survived+survived, 1),
		"a log of survived errors only still shows its last line")
}

// A worker that cannot open its store tries again, logging each failure,
// and gives the error back after its last try; one that can opens at once.
func TestOpenRetrying(t *testing.T) {
	ctx := context.Background()
	var log bytes.Buffer
	// Port 1 on loopback: nothing listens, the connection is refused.
	_, err := openRetrying(ctx, benchenv.Options{PostgresDSN: "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5"}, 3, time.Millisecond, &log)
	require.Error(t, err)
	assert.Equal(t, 2, strings.Count(log.String(), " startup_error "), "the two failures before the last are logged: %s", log.String())
	assert.Contains(t, log.String(), "try=2")

	dsn := os.Getenv(benchenv.PostgresDSNEnv)
	if dsn == "" {
		t.Skipf("set %s to open a store that answers", benchenv.PostgresDSNEnv)
	}
	log.Reset()
	store, err := openRetrying(ctx, benchenv.Options{PostgresDSN: dsn, TablePrefix: "soak_retry_test_", Drop: true}, 3, time.Millisecond, &log)
	require.NoError(t, err)
	require.NoError(t, store.Close())
	assert.Empty(t, log.String())
}
