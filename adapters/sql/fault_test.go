package hooksql

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkerSurvivesTerminatedConnections kills the worker's PostgreSQL
// sessions (pg_terminate_backend) again and again while it runs: the worker
// reports the failures, backs off and resumes, and in the end every
// delivery is delivered once in the ledger.
func TestWorkerSurvivesTerminatedConnections(t *testing.T) {
	b := requirePostgres(t)
	ctx := context.Background()
	admin := newStore(t, b, Options{})
	app := "hookrelay_fault_" + strings.TrimSuffix(admin.prefix, "_")
	dsn := os.Getenv(b.envVar)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	db, err := sql.Open("pgx", dsn+sep+"application_name="+app)
	require.NoError(t, err)
	defer db.Close()
	s, err := New(db, Options{Dialect: Postgres, TablePrefix: admin.prefix})
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, hookrelay.Destination{ID: "dst_fault", URL: "https://127.0.0.1/unused"}))
	const n = 400 // enough work that terminations land mid-transaction
	ids := seedDeliveries(t, s, "dst_fault", n, time.Now())

	var (
		mu    sync.Mutex
		sends = map[string]int{}
	)
	var workerErrors atomic.Int64
	policy := hookrelay.Policy{Version: "mp", MaxAttempts: 50, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}
	client, err := hookrelay.New(hookrelay.Config{
		Queue: s, Ledger: s, Destinations: s, Policy: &policy,
		Sender: hookrelay.SenderFunc(func(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
			mu.Lock()
			sends[p.Delivery.ID]++
			mu.Unlock()
			return hookrelay.Delivered(200)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventWorkerError {
				workerErrors.Add(1)
			}
		}),
		Concurrency: 4, BatchSize: 2, PollInterval: 10 * time.Millisecond,
		// A delivery whose ledger write was cut off is claimed again soon.
		LeaseFor: time.Second,
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	defer func() { require.NoError(t, client.Stop(context.Background())) }()

	terminated := 0
	require.Eventually(t, func() bool {
		var k int
		require.NoError(t, admin.db.QueryRow(
			"SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&k))
		terminated += k
		return workerErrors.Load() >= 3 || countState(t, admin, "delivered") == n
	}, 60*time.Second, 5*time.Millisecond, "terminations reach the worker")
	t.Logf("terminated %d sessions; worker reported %d errors", terminated, workerErrors.Load())
	assert.Positive(t, workerErrors.Load(), "the worker reported the lost connections")

	require.Eventually(t, func() bool { return countState(t, admin, "delivered") == n }, 60*time.Second, 20*time.Millisecond,
		"the worker resumed and delivered everything")
	requireDeliveredOnce(t, admin, ids)
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, sends, n)
}
