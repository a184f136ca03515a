package hooksql

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
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
			db, err := openDB(b.dialect, os.Getenv(b.envVar), 0)
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

// A PostgreSQL pool from Open retires each connection at an age of its own
// between 3/4 of ConnMaxLifetime and ConnMaxLifetime, so the connections a
// worker opened together are not all closed and opened again together.
func TestOpenRetiresPostgresConnectionsOneByOne(t *testing.T) {
	b := backend{dialect: Postgres, envVar: "HOOKRELAY_TEST_POSTGRES_DSN"}
	b.skipUnlessConfigured(t)
	ctx := context.Background()
	tables := newStore(t, b, Options{})
	lifetime := time.Hour
	s, err := Open(ctx, Postgres, os.Getenv(b.envVar), Options{TablePrefix: tables.TablePrefix(), ConnMaxLifetime: lifetime})
	require.NoError(t, err)
	defer s.Close()

	// The ages at which the warmed connections retire: spread, not one.
	start := time.Now()
	require.Equal(t, warmConns, s.warmPool(ctx))
	conns := make([]*sql.Conn, warmConns)
	retire := map[time.Duration]bool{}
	for i := range conns {
		conns[i], err = s.DB().Conn(ctx)
		require.NoError(t, err)
		require.NoError(t, conns[i].Raw(func(dc any) error {
			at, ok := dc.(*stdlib.Conn).Conn().PgConn().CustomData()[retireAtKey].(time.Time)
			require.True(t, ok, "every connection has its retirement time")
			age := at.Sub(start)
			assert.Greater(t, age, 3*lifetime/4-time.Minute)
			assert.LessOrEqual(t, age, lifetime)
			retire[age.Truncate(time.Second)] = true
			return nil
		}))
	}
	assert.Greater(t, len(retire), warmConns/2, "the connections retire at different ages")

	// A connection past its time is closed when next taken, not reused.
	pid := func(c *sql.Conn) (n int) {
		require.NoError(t, c.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&n))
		return n
	}
	first := pid(conns[0])
	require.NoError(t, conns[0].Raw(func(dc any) error {
		dc.(*stdlib.Conn).Conn().PgConn().CustomData()[retireAtKey] = time.Now().Add(-time.Second)
		return nil
	}))
	for _, c := range conns[1:] {
		require.NoError(t, c.Close())
	}
	require.NoError(t, conns[0].Close()) // the most recently returned: taken first
	c, err := s.DB().Conn(ctx)
	require.NoError(t, err)
	defer c.Close()
	assert.NotEqual(t, first, pid(c), "the retired connection was closed, another taken")
	assert.Equal(t, warmConns-1, s.DB().Stats().OpenConnections, "and not kept")
}

// retirementAge spans (3/4 lifetime, lifetime].
func TestRetirementAge(t *testing.T) {
	assert.Equal(t, time.Hour, retirementAge(time.Hour, 0))
	assert.Equal(t, 52*time.Minute+30*time.Second, retirementAge(time.Hour, 0.5))
	assert.Greater(t, retirementAge(time.Hour, 0.999999), 45*time.Minute)
}

// Create and EnqueueTx announce, in the commit's notification, the
// earliest due time of the deliveries they created, and nothing when they
// created none: a repeated enqueue wakes no worker, and a duplicate's due
// time (it was not stored) does not move the wake-up. A zero due time is
// "now" (an empty payload). It holds through pgx (Create: one pipelined
// statement per chunk; EnqueueTx: the same statement in the caller's
// transaction) and through another driver (single statements).
func TestCreateAnnouncesTheEarliestDeliveryItCreated(t *testing.T) {
	b := postgresBackend(t)
	dsn := os.Getenv(b.envVar)
	other, err := sql.Open("hookrelay-other-postgres", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	for _, tc := range []struct {
		name string
		db   *sql.DB
		tx   bool
	}{{"Create/pgx", nil, false}, {"Create/another driver", other, false}, {"EnqueueTx/pgx", nil, true}, {"EnqueueTx/another driver", other, true}} {
		db := tc.db
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var s *Store
			if db == nil {
				s = newStore(t, b, Options{})
			} else {
				s, err = New(db, Options{Dialect: Postgres, TablePrefix: randomPrefix()})
				require.NoError(t, err)
				require.NoError(t, s.Migrate(ctx))
				t.Cleanup(func() { dropTables(t, s) })
			}
			listener, err := pgx.Connect(ctx, dsn)
			require.NoError(t, err)
			t.Cleanup(func() { _ = listener.Close(context.Background()) })
			_, err = listener.Exec(ctx, "LISTEN "+pgx.Identifier{s.dueChannel()}.Sanitize())
			require.NoError(t, err)
			next := func() string {
				t.Helper()
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second) // a hang guard, not a speed check
				defer cancel()
				n, err := listener.WaitForNotification(wctx)
				require.NoError(t, err, "no announcement")
				return n.Payload
			}
			at := func(d time.Duration) string { return strconv.FormatInt(t0.Add(d).UnixNano(), 10) }
			create := func(ds ...hookrelay.Delivery) {
				t.Helper()
				if !tc.tx {
					_, err := s.Create(ctx, ds)
					require.NoError(t, err)
					return
				}
				tx, err := s.DB().BeginTx(ctx, nil)
				require.NoError(t, err)
				_, err = s.EnqueueTx(ctx, tx, ds)
				require.NoError(t, err)
				require.NoError(t, tx.Commit())
			}

			a, c := newDelivery("evt_a", "dst_1", t0.Add(2*time.Second)), newDelivery("evt_c", "dst_1", t0.Add(time.Second))
			create(a, c)
			assert.Equal(t, at(time.Second), next(), "the earliest of the new deliveries")

			early := a
			early.NextAttemptAt = t0 // a duplicate: not stored, so not announced
			create(early, newDelivery("evt_d", "dst_1", t0.Add(3*time.Second)))
			assert.Equal(t, at(3*time.Second), next(), "the earliest of what was created, not of the input")

			create(a, c) // nothing new: no announcement, so the next one is evt_e's
			create(newDelivery("evt_e", "dst_1", t0.Add(4*time.Second)))
			assert.Equal(t, at(4*time.Second), next(), "a repeated enqueue announced work")

			now := newDelivery("evt_f", "dst_1", t0.Add(5*time.Second))
			now.NextAttemptAt = time.Time{}
			create(now)
			assert.Equal(t, "", next(), "a zero due time is announced as now")
		})
	}
}

// An announcement made while no listener listens is lost — before the
// listener first listens, or while it reconnects after its connection was
// cut (here: the server terminates it) — so ListenDue announces "look
// now" once each time it starts listening: a delivery created in the gap
// waits for that, not for the worker's next poll.
func TestListenDueAnnouncesOnceListeningSoTheGapIsNotMissed(t *testing.T) {
	b := postgresBackend(t)
	ctx := context.Background()
	s := newStore(t, b, Options{})
	heard := make(chan time.Time, 16)
	listen := func() (ended func() error, stop func() error) {
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.ListenDue(lctx, func(at time.Time) { heard <- at }) }()
		ended = func() error {
			select {
			case err := <-done:
				return err
			case <-time.After(20 * time.Second): // a hang guard, not a speed check
				cancel()
				<-done
				return nil
			}
		}
		return ended, func() error { cancel(); return <-done }
	}
	next := func(what string) time.Time {
		t.Helper()
		select {
		case at := <-heard:
			return at
		case <-time.After(20 * time.Second): // a hang guard, not a speed check
			t.Fatalf("no announcement: %s", what)
			return time.Time{}
		}
	}

	ended, _ := listen()
	assert.True(t, next("when it started listening").IsZero(), "once listening: look now")

	// The server cuts the listener off; a delivery is created before it
	// listens again, so its own announcement reaches no one.
	var n int
	require.NoError(t, serverDB(t, b).QueryRowContext(ctx,
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1",
		"LISTEN "+pgx.Identifier{s.dueChannel()}.Sanitize()).Scan(&n))
	require.Equal(t, 1, n, "the listener's backend")
	require.Error(t, ended(), "ListenDue returns the lost connection's error")
	_, err := s.Create(ctx, []hookrelay.Delivery{newDelivery("evt_gap", "dst_1", t0)})
	require.NoError(t, err)
	select {
	case at := <-heard:
		t.Fatalf("announcement %v with no listener", at)
	default:
	}

	_, stop := listen()
	defer func() { assert.NoError(t, stop()) }()
	assert.True(t, next("when it listened again").IsZero(), "listening again: look now, for what was announced in the gap")
}

// Several workers sharing one Store (each Client runs its own listener)
// leave the pool the connections their claims need: only as many of them
// listen as leave minListenPool-1 connections free, the others poll. On a
// pool of 4 with 4 workers, every listener held a connection and no claim
// could get one, so nothing was delivered.
func TestWorkersSharingASmallPoolDoNotListenAwayItsConnections(t *testing.T) {
	b := postgresBackend(t)
	ctx := context.Background()
	producer := newStore(t, b, Options{})
	require.NoError(t, producer.Put(ctx, hookrelay.Destination{ID: "acct", TenantID: "t", URL: "https://accounting.example/hook"}))
	s, err := Open(ctx, Postgres, os.Getenv(b.envVar), Options{TablePrefix: producer.TablePrefix(), MaxOpenConns: minListenPool})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	delivered := make(chan string, 1)
	for range minListenPool {
		w, err := hookrelay.New(hookrelay.Config{
			Queue: s, Ledger: s, Destinations: s, PollInterval: 100 * time.Millisecond,
			Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
			Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
				if e.Name == hookrelay.EventDelivered {
					delivered <- e.Delivery.EventID
				}
			}),
		})
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		t.Cleanup(func() { _ = w.StopAndCancel(context.Background()) })
	}
	// Let every worker's listener start (or decide to poll): not a speed check.
	time.Sleep(500 * time.Millisecond)

	producerClient, err := hookrelay.New(hookrelay.Config{Queue: producer, Ledger: producer, Destinations: producer})
	require.NoError(t, err)
	_, err = producerClient.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "evt_1", TenantID: "t", DestinationID: "acct", EventType: "x", Payload: []byte("{}")})
	require.NoError(t, err)
	select {
	case got := <-delivered:
		assert.Equal(t, "evt_1", got)
	case <-time.After(20 * time.Second): // a hang guard, not a speed check
		t.Fatalf("not delivered: the pool's connections are all held (%+v)", s.DB().Stats())
	}
}

// A listener refused a pool connection (listenSlot: the pool had no room
// for one more) polls meanwhile but listens as soon as a slot frees — here
// another listener's worker stops — instead of polling for the rest of its
// life. On a pool of minListenPool+1, two listen; the third waited for its
// ctx and never heard an announcement even after one of the two stopped.
func TestListenDueRefusedASlotListensOnceOneFrees(t *testing.T) {
	b := postgresBackend(t)
	ctx := context.Background()
	producer := newStore(t, b, Options{})
	s, err := Open(ctx, Postgres, os.Getenv(b.envVar), Options{TablePrefix: producer.TablePrefix(), MaxOpenConns: minListenPool + 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	type listener struct {
		heard chan time.Time
		stop  func() error
	}
	listen := func() listener {
		lctx, cancel := context.WithCancel(ctx)
		heard := make(chan time.Time, 16)
		done := make(chan error, 1)
		go func() { done <- s.ListenDue(lctx, func(at time.Time) { heard <- at }) }()
		l := listener{heard: heard, stop: sync.OnceValue(func() error { cancel(); return <-done })}
		t.Cleanup(func() { _ = l.stop() })
		return l
	}
	heard := func(l listener, what string) time.Time {
		t.Helper()
		select {
		case at := <-l.heard:
			return at
		case <-time.After(20 * time.Second): // a hang guard, not a speed check
			t.Fatalf("no announcement: %s", what)
			return time.Time{}
		}
	}
	silent := func(l listener, what string) {
		t.Helper()
		select {
		case at := <-l.heard:
			t.Fatalf("announcement %v: %s", at, what)
		case <-time.After(300 * time.Millisecond):
		}
	}

	first, second := listen(), listen()
	heard(first, "the first listener started")
	heard(second, "the second listener started")
	refused := listen()
	_, err = producer.Create(ctx, []hookrelay.Delivery{newDelivery("evt_1", "dst_1", t0)})
	require.NoError(t, err)
	heard(first, "evt_1")
	heard(second, "evt_1")
	silent(refused, "the pool has no slot for a third listener")

	require.NoError(t, first.stop())
	assert.True(t, heard(refused, "a slot freed: the refused listener listens").IsZero(), "once listening: look now")
	_, err = producer.Create(ctx, []hookrelay.Delivery{newDelivery("evt_2", "dst_1", t0)})
	require.NoError(t, err)
	heard(refused, "evt_2, to the listener that was refused")
	heard(second, "evt_2")
}
