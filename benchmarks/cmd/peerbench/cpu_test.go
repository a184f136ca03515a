package main

import (
	"context"
	"crypto/sha256"
	"net"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay/internal/benchenv"
)

// TestSpanCountsThisProcessCPU: work done inside a span shows up as this
// process's CPU time.
func TestSpanCountsThisProcessCPU(t *testing.T) {
	sp := beginSpan()
	sum := sha256.Sum256(nil)
	for range 200_000 {
		sum = sha256.Sum256(sum[:])
	}
	m := sp.end()
	assert.Positive(t, m.self, "hashing 200,000 times takes some CPU")
	alone, _ := m.cpuPer(1, "")
	assert.Positive(t, alone)
	assert.Positive(t, m.elapsed)
}

// TestSpanCountsTheLocalServersCPU: a query that keeps a PostgreSQL
// backend busy shows up as server CPU time, not as this process's.
func TestSpanCountsTheLocalServersCPU(t *testing.T) {
	dsn := os.Getenv(benchenv.PostgresDSNEnv)
	if dsn == "" {
		t.Skipf("set %s to check the server's CPU time is read", benchenv.PostgresDSNEnv)
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, pool.Ping(context.Background()))
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	if ip := net.ParseIP(cfg.Host); cfg.Host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		t.Skipf("the server (%s) may run on another machine, where its CPU time cannot be read", cfg.Host)
	}
	_, found := readCPU().server["postgres"]
	require.True(t, found, "the server is on this machine: its processes must be found")
	sp := beginSpan()
	var n int64
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM generate_series(1, 5000000)").Scan(&n))
	m := sp.end()
	require.EqualValues(t, 5000000, n)
	withServer, seen := m.cpuPer(1, "postgres")
	assert.True(t, seen)
	assert.GreaterOrEqual(t, m.server["postgres"], m.self, "counting 5,000,000 rows is the server's work")
	assert.Positive(t, m.server["postgres"])
	alone, _ := m.cpuPer(1, "")
	assert.Greater(t, withServer, alone, "a system on PostgreSQL is charged the server's CPU")
}
