package main

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay/internal/benchenv"
)

// TestMain lets the test binary be the latency mode's worker process, as
// the command is: startChild runs os.Executable with --child.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "--child" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestRunWithoutPostgres runs the throughput mode small on the systems
// that need no server and checks each is measured and summarised. It
// asserts nothing about speed.
func TestRunWithoutPostgres(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), options{
		systems: []string{"ceiling", "memory", "sqlite"}, mode: "all", workers: 4, destinations: 3,
		n: 50, rounds: 2, payloadBytes: 512, latencyRate: 50, latencyFor: time.Second,
	}, &out)
	require.NoError(t, err, out.String())
	for _, want := range []string{"load average at start", "net/http ceiling", "hookrelay memory", "hookrelay SQLite", "summary", "load average at end"} {
		assert.Contains(t, out.String(), want)
	}
	assert.NotContains(t, out.String(), "latency:", "no latency system was selected")
	_, summary, ok := strings.Cut(out.String(), "summary:")
	require.True(t, ok)
	for _, name := range []string{"ceiling", "memory", "sqlite"} {
		f := strings.Fields(strings.TrimPrefix(lineStarting(summary, labels[name]), labels[name]))
		require.Len(t, f, 7, "deliveries/s, min–max, ×ceiling, ×River, CPU µs/delivery, CPU ×ceiling, CPU ×River: %q", f)
		cpu, err := strconv.ParseFloat(f[4], 64)
		require.NoError(t, err)
		assert.Positive(t, cpu, "%s: CPU per delivery", name)
	}
}

// TestRunEverySystem runs both modes small on every system, River and
// hookrelay's PostgreSQL included, and checks every figure is reported,
// nothing went missing, and nothing is left in the database.
func TestRunEverySystem(t *testing.T) {
	dsn := os.Getenv(benchenv.PostgresDSNEnv)
	if dsn == "" {
		t.Skipf("set %s to run River and hookrelay on PostgreSQL", benchenv.PostgresDSNEnv)
	}
	systems, mysqlDSN := append(defaultSystems, "memory-tuned", "sqlite-tuned", "postgres-tuned", "sender", "fasthttp"), os.Getenv(benchenv.MySQLDSNEnv)
	if mysqlDSN != "" {
		systems = allSystems
	}
	var out bytes.Buffer
	err := run(context.Background(), options{
		systems: systems, mode: "all", workers: 4, destinations: 3, postgresDSN: dsn, mysqlDSN: mysqlDSN,
		n: 50, rounds: 1, payloadBytes: 512, latencyRate: 50, latencyFor: 200 * time.Millisecond, latencyWarmup: 100 * time.Millisecond,
	}, &out)
	require.NoError(t, err, out.String())
	for _, name := range systems {
		assert.Contains(t, out.String(), labels[name])
	}
	_, latency, ok := strings.Cut(out.String(), "latency:")
	require.True(t, ok, out.String())
	for _, name := range latencySystems {
		line := lineStarting(latency, labels[name])
		require.NotEmpty(t, line, "latency line for %s", name)
		// enqueued, offered/s, p50, p99, max, missing, warm-up p99 and max
		fields := strings.Fields(strings.TrimPrefix(line, labels[name]))
		require.Len(t, fields, 8, line)
		assert.Equal(t, "10", fields[0], "the measured phase's 200 ms at 50/s: %q", line)
		assert.Equal(t, "0", fields[5], "nothing missing: %q", line)
		assert.NotEqual(t, "-", fields[6], "the warm-up phase ran and is reported: %q", line)
	}

	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	var left int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'peerbench\_' || $1::text || '\_%') +
		(SELECT count(*) FROM pg_tables WHERE tablename LIKE 'peerbench\_' || $1::text || '\_%')`, strconv.Itoa(os.Getpid())).Scan(&left))
	assert.Zero(t, left, "schemas and tables of this run dropped")
}

func lineStarting(text, prefix string) string {
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

func TestRunRefusesBadOptions(t *testing.T) {
	for _, o := range []options{
		{systems: []string{"kafka"}, mode: "all", n: 1, workers: 1, destinations: 1, rounds: 1, latencyRate: 1},
		{systems: []string{"memory"}, mode: "sometimes", n: 1, workers: 1, destinations: 1, rounds: 1, latencyRate: 1},
		{systems: []string{"memory"}, mode: "all", n: 0, workers: 1, destinations: 1, rounds: 1, latencyRate: 1},
		{systems: []string{"river"}, mode: "all", n: 1, workers: 1, destinations: 1, rounds: 1, latencyRate: 1},
		{systems: []string{"mysql"}, mode: "all", n: 1, workers: 1, destinations: 1, rounds: 1, latencyRate: 1},
		{systems: []string{"postgres-tuned"}, mode: "all", n: 1, workers: 1, destinations: 1, rounds: 1, latencyRate: 1},
		{systems: []string{"memory"}, mode: "all", n: 1, workers: 1, destinations: 1, rounds: 1, latencyRate: 1, latencyWarmup: -time.Second},
		{systems: []string{"memory"}, mode: "all", n: 1, workers: 1, destinations: 1, rounds: 1, latencyRate: 1, connLifetime: -time.Second},
	} {
		assert.Error(t, run(context.Background(), o, &bytes.Buffer{}), "%+v", o)
	}
}

func TestMakePayloadIsExactSize(t *testing.T) {
	for _, n := range []int{64, 512, 4096} {
		assert.Len(t, makePayload(n), n)
	}
}

// TestRoundSizeShrinksOnlySlowSystems: a system fast enough for N in the
// limit gets N; a slow one gets what its rate delivers in the limit, never
// fewer than 100.
func TestRoundSizeShrinksOnlySlowSystems(t *testing.T) {
	o := options{n: 2000, roundLimit: 20 * time.Second}
	assert.Equal(t, 2000, roundSize(o, 5000))
	assert.Equal(t, 2000, roundSize(o, 100))
	assert.Equal(t, 500, roundSize(o, 25))
	assert.Equal(t, 100, roundSize(o, 1))
	assert.Equal(t, 2000, roundSize(options{n: 2000}, 1), "no limit")
}
