package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
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
