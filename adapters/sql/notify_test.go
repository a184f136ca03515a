package hooksql

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// A worker in another process (here: another Store with its own pool on the
// same tables) starts on a delivery as soon as it is committed, whether
// enqueued through Create or in the producer's own transaction (EnqueueTx),
// instead of at its next poll — which in this test is an hour away.
func TestWorkerInAnotherProcessIsWokenByTheCommit(t *testing.T) {
	b := backend{dialect: Postgres, envVar: "HOOKRELAY_TEST_POSTGRES_DSN"}
	b.skipUnlessConfigured(t)
	ctx := context.Background()
	producerStore := newStore(t, b, Options{})
	workerStore, err := Open(ctx, Postgres, os.Getenv(b.envVar), Options{TablePrefix: producerStore.TablePrefix()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = workerStore.Close() })
	require.NoError(t, producerStore.Put(ctx, hookrelay.Destination{ID: "acct", TenantID: "t", URL: "https://accounting.example/hook"}))

	delivered := make(chan string, 4)
	worker, err := hookrelay.New(hookrelay.Config{
		Queue: workerStore, Ledger: workerStore, Destinations: workerStore, PollInterval: time.Hour,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventDelivered {
				delivered <- e.Delivery.EventID
			}
		}),
	})
	require.NoError(t, err)
	producer, err := hookrelay.New(hookrelay.Config{Queue: producerStore, Ledger: producerStore, Destinations: producerStore})
	require.NoError(t, err)
	require.NoError(t, worker.Start(ctx))
	t.Cleanup(func() { _ = worker.Stop(context.Background()) })
	// The first poll happens at Start; a delivery that arrives after it
	// can only be found by an announcement.
	time.Sleep(200 * time.Millisecond) // let the first, empty claim pass: not a speed check

	wait := func(want string) {
		t.Helper()
		select {
		case got := <-delivered:
			assert.Equal(t, want, got)
		case <-time.After(20 * time.Second): // an hour's poll would miss this; 20 s is a hang guard
			t.Fatalf("%s was not delivered: the worker was not woken", want)
		}
	}
	_, err = producer.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "evt_create", TenantID: "t", DestinationID: "acct", EventType: "x", Payload: []byte("{}")})
	require.NoError(t, err)
	wait("evt_create")

	ds, err := producer.Prepare(ctx, []hookrelay.EnqueueParams{{EventID: "evt_tx", TenantID: "t", DestinationID: "acct", EventType: "x", Payload: []byte("{}")}})
	require.NoError(t, err)
	tx, err := producerStore.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = producerStore.EnqueueTx(ctx, tx, ds)
	require.NoError(t, err)
	select {
	case got := <-delivered:
		t.Fatalf("%s delivered before its transaction committed", got)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, tx.Commit())
	wait("evt_tx")
}

// A worker's first claim on a Store opened by Open opens several of the
// pool's connections at once, so the worker's first deliveries do not each
// wait for a new server connection; later claims open none. A caller's own
// pool (New) and SQLite's are left alone.
func TestFirstClaimWarmsThePool(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		tables := newStore(t, b, Options{})
		s := tables
		if b.dialect != SQLite {
			var err error
			s, err = Open(ctx, b.dialect, os.Getenv(b.envVar), Options{TablePrefix: tables.TablePrefix()})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
		}
		claim := func() {
			_, err := s.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 5, LeaseFor: time.Minute, Holder: "w"})
			require.NoError(t, err)
		}
		claim()
		open := s.DB().Stats().OpenConnections
		if b.dialect == SQLite {
			assert.LessOrEqual(t, open, 2, "SQLite's pool is not warmed")
		} else {
			assert.GreaterOrEqual(t, open, warmConns, "the first claim opened the connections a worker starts with")
			assert.Equal(t, open, s.DB().Stats().Idle, "and left them idle in the pool")
		}
		for range 3 {
			claim()
		}
		assert.Equal(t, open, s.DB().Stats().OpenConnections, "later claims open none")
		if b.dialect != SQLite {
			assert.Equal(t, warmConns, s.warmPool(ctx), "each warmed connection ran its read of the tables")
		}

		if b.dialect != SQLite {
			// A pool of the caller's (New): one claim, one connection.
			db, err := openDB(b.dialect, os.Getenv(b.envVar))
			require.NoError(t, err)
			defer db.Close()
			own, err := New(db, Options{Dialect: b.dialect, TablePrefix: tables.TablePrefix()})
			require.NoError(t, err)
			_, err = own.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 5, LeaseFor: time.Minute, Holder: "w"})
			require.NoError(t, err)
			assert.Equal(t, 1, db.Stats().OpenConnections, "a caller's pool is not warmed")
		}
	})
}

// Open sizes the pool for a worker: every connection it may open is kept
// idle between uses, so no query pays for a new connection.
func TestOpenKeepsThePoolIdle(t *testing.T) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, t.TempDir()+"/pool.db", Options{})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, DefaultMaxOpenConns, s.DB().Stats().MaxOpenConnections)
	// database/sql keeps 2 idle connections unless told otherwise: open
	// more at once and see they all stay.
	conns := make([]interface{ Close() error }, 0, 6)
	for range 6 {
		c, err := s.DB().Conn(ctx)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
	assert.Equal(t, 6, s.DB().Stats().Idle, "connections stay open between uses")

	s2, err := OpenSQLite(ctx, t.TempDir()+"/pool2.db", Options{MaxOpenConns: 3})
	require.NoError(t, err)
	defer s2.Close()
	assert.Equal(t, 3, s2.DB().Stats().MaxOpenConnections)
	_, err = OpenSQLite(ctx, t.TempDir()+"/pool3.db", Options{MaxOpenConns: -1})
	assert.ErrorContains(t, err, "MaxOpenConns")
}
