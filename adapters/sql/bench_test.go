package hooksql

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/proccpu"
)

// forEachBackendB is forEachBackend for benchmarks.
func forEachBackendB(b *testing.B, f func(b *testing.B, be backend)) {
	for _, be := range backends {
		b.Run(string(be.dialect), func(b *testing.B) {
			be.skipUnlessConfigured(b)
			f(b, be)
		})
	}
}

// BenchmarkClaimAndComplete measures deliveries per second through whole
// workers (claim, ledger write, acknowledge) with a no-op sender: one
// worker with 16 attempts in flight, and four workers sharing the store.
func BenchmarkClaimAndComplete(b *testing.B) {
	forEachBackendB(b, func(b *testing.B, be backend) {
		for _, workers := range []int{1, 4} {
			b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
				ctx := context.Background()
				s := newStore(b, be, Options{})
				for i := range 4 {
					if err := s.Put(ctx, hookrelay.Destination{ID: fmt.Sprintf("dst_%d", i), URL: "https://127.0.0.1/unused"}); err != nil {
						b.Fatal(err)
					}
				}
				ds := make([]hookrelay.Delivery, b.N)
				now := time.Now()
				for i := range ds {
					ds[i] = newDelivery(fmt.Sprintf("evt_%d", i), fmt.Sprintf("dst_%d", i%4), now)
				}
				if _, err := s.Create(ctx, ds); err != nil {
					b.Fatal(err)
				}
				var delivered atomic.Int64
				done := make(chan struct{})
				var once sync.Once
				clients := make([]*hookrelay.Client, workers)
				for w := range clients {
					c, err := hookrelay.New(hookrelay.Config{
						Queue: s, Ledger: s, Destinations: s,
						Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
							return hookrelay.Delivered(204)
						}),
						Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
							if e.Name == hookrelay.EventDelivered && delivered.Add(1) == int64(b.N) {
								once.Do(func() { close(done) })
							}
						}),
						// The library's defaults but for Concurrency: with 4
						// destinations, the default per-destination limit (4)
						// lets all 16 slots work.
						Concurrency: 16,
					})
					if err != nil {
						b.Fatal(err)
					}
					clients[w] = c
				}
				b.ResetTimer()
				start := time.Now()
				for _, c := range clients {
					if err := c.Start(ctx); err != nil {
						b.Fatal(err)
					}
				}
				<-done
				elapsed := time.Since(start)
				b.StopTimer()
				for _, c := range clients {
					if err := c.Stop(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
			})
		}
	})
}

// BenchmarkEnqueue measures Create throughput, one delivery per call, 100
// and 500 per call (one INSERT statement: 500 is a whole chunk, as
// Client.EnqueueMany's callers in peerbench send), and EnqueueTx's
// (tx/…: a transaction of its own around each call, begun and committed
// by the caller as in the outbox pattern). Each delivery carries a
// 512-byte payload. Besides deliveries/s it reports this process's CPU per
// delivery (cpu-ns/delivery, GC included, the deliveries' construction
// too) and, for a server on this machine, the server's
// (server-cpu-ns/delivery).
func BenchmarkEnqueue(b *testing.B) {
	payload := []byte(`{"data":"` + strings.Repeat("x", 512-11) + `"}`)
	forEachBackendB(b, func(b *testing.B, be backend) {
		for _, tc := range []struct {
			name    string
			batch   int
			enqueue func(context.Context, *Store, []hookrelay.Delivery) error
		}{
			{"batch=1", 1, create}, {"batch=100", 100, create}, {"batch=500", 500, create},
			{"tx/batch=1", 1, enqueueTx}, {"tx/batch=100", 100, enqueueTx},
		} {
			batch, enqueue := tc.batch, tc.enqueue
			b.Run(tc.name, func(b *testing.B) {
				ctx := context.Background()
				s := newStore(b, be, Options{})
				now := time.Now()
				ds := make([]hookrelay.Delivery, batch)
				server := serverOfDialect[be.dialect]
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				reportServer := serverCPU(b, server)
				cpu0 := proccpu.Self()
				for i := range b.N {
					for j := range ds {
						ds[j] = newDelivery(fmt.Sprintf("evt_%d_%d", i, j), "dst_1", now)
						ds[j].Payload = payload
					}
					if err := enqueue(ctx, s, ds); err != nil {
						b.Fatal(err)
					}
				}
				cpu := proccpu.Self() - cpu0
				n := float64(b.N * batch)
				reportServer(n, "delivery")
				b.ReportMetric(n/time.Since(start).Seconds(), "deliveries/s")
				b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/delivery")
			})
		}
	})
}

func create(ctx context.Context, s *Store, ds []hookrelay.Delivery) error {
	_, err := s.Create(ctx, ds)
	return err
}

func enqueueTx(ctx context.Context, s *Store, ds []hookrelay.Delivery) error {
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := s.EnqueueTx(ctx, tx, ds); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// seeded caches stores filled by seedPending across a benchmark's runs.
var (
	seededMu sync.Mutex
	seeded   = map[string]*Store{}
)

// seedPending returns a store holding n pending deliveries due at
// base+i nanoseconds, written with one INSERT … SELECT.
func seedPending(b *testing.B, be backend, n int) *Store {
	key := fmt.Sprintf("%s/%d", be.dialect, n)
	seededMu.Lock()
	defer seededMu.Unlock()
	if s, ok := seeded[key]; ok {
		return s
	}
	ctx := context.Background()
	var s *Store
	if be.dialect == SQLite {
		// Outlives the benchmark run that made it; removed at exit.
		dir, err := os.MkdirTemp("", "hookrelay-bench")
		if err != nil {
			b.Fatal(err)
		}
		if s, err = OpenSQLite(ctx, dir+"/bench.db", Options{}); err != nil {
			b.Fatal(err)
		}
		benchCleanups = append(benchCleanups, func() { _ = s.Close(); _ = os.RemoveAll(dir) })
	} else {
		var err error
		if s, err = New(serverDB(b, be), Options{Dialect: be.dialect, TablePrefix: randomPrefix()}); err != nil {
			b.Fatal(err)
		}
		benchCleanups = append(benchCleanups, func() { dropTables(b, s) })
	}
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	digits := "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
		" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	var from, num []string
	for i, scale := 0, 1; scale < n; i, scale = i+1, scale*10 {
		from = append(from, fmt.Sprintf("%s d%d", digits, i))
		num = append(num, fmt.Sprintf("%d*d%d.d", scale, i))
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	start := time.Now()
	_, err := s.db.ExecContext(ctx, s.q(fmt.Sprintf(`INSERT INTO {d} (`+insertDeliveryCols+`)
		SELECT CONCAT('bench_', n), CONCAT('evt_', n), 'tenant_1', 'null', CONCAT('dst_', n %% 10), 'bench.event',
			NULL, 1, 1, %[1]d, %[1]d + n, 'default', 'pending', '', '', %[1]d, 0
		FROM (SELECT %[2]s AS n FROM %[3]s) nums`, base, strings.Join(num, "+"), strings.Join(from, ", "))))
	if err != nil {
		b.Fatal(err)
	}
	analyze := "ANALYZE " + s.prefix + "deliveries"
	if be.dialect == MySQL {
		analyze = "ANALYZE TABLE " + s.prefix + "deliveries"
	}
	if _, err := s.db.ExecContext(ctx, analyze); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d pending deliveries on %s in %v", n, be.dialect, time.Since(start).Round(time.Millisecond))
	seeded[key] = s
	return s
}

var benchCleanups []func()

// BenchmarkClaimLatency measures one claim of 10 due deliveries among 1,000
// pending rows and among 1,000,000 (set HOOKRELAY_BENCH_LARGE=1 for the
// latter: seeding takes a while). The claimed rows are released between
// iterations, outside the timer, so the pending count stays constant.
func BenchmarkClaimLatency(b *testing.B) {
	b.Cleanup(func() {
		seededMu.Lock()
		defer seededMu.Unlock()
		for _, f := range benchCleanups {
			f()
		}
		benchCleanups, seeded = nil, map[string]*Store{}
	})
	forEachBackendB(b, func(b *testing.B, be backend) {
		for _, n := range []int{1_000, 1_000_000} {
			b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
				if n > 1_000 && os.Getenv("HOOKRELAY_BENCH_LARGE") == "" {
					b.Skip("set HOOKRELAY_BENCH_LARGE=1 to seed 1,000,000 rows")
				}
				ctx := context.Background()
				s := seedPending(b, be, n)
				now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
				b.ResetTimer()
				for range b.N {
					cs, err := s.Claim(ctx, hookrelay.ClaimParams{Now: now, Limit: 10, LeaseFor: time.Minute, Holder: "bench"})
					if err != nil || len(cs) != 10 {
						b.Fatalf("claim: %d claims, %v", len(cs), err)
					}
					b.StopTimer()
					for _, c := range cs {
						// Back into the queue at its old place.
						if err := s.Release(ctx, hookrelay.ReleaseParams{ID: c.Delivery.ID, Lease: c.Lease, At: c.Delivery.NextAttemptAt, Now: now}); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
				}
			})
		}
	})
}

// BenchmarkClaimAndRecordBatch measures the store's own work per delivery
// on a worker's hot path, without a worker: one claim of about 50 due
// deliveries (512-byte payloads, scope, rooms for 10 destinations, and a
// limit that changes from claim to claim, as a worker claims) and one
// RecordBatch marking them delivered. It reports the CPU per delivery of
// both and of the claims alone, and on PostgreSQL or MySQL running on this
// machine the server's CPU per delivery (server-cpu-ns/delivery: every
// process of that server, so run it on a server nothing else uses). Run
// it with -benchmem: its allocations are the adapter's (and its driver's)
// share of the worker's garbage.
func BenchmarkClaimAndRecordBatch(b *testing.B) {
	forEachBackendB(b, func(b *testing.B, be backend) { benchClaimAndRecordBatch(b, be, 50) })
}

// BenchmarkClaimAndRecordBatchSize is BenchmarkClaimAndRecordBatch with
// claims of about 10, 50 and 200: the CPU per delivery falls with the size
// as each statement's own cost is shared by more rows, so two sizes give
// the cost per statement and the cost per row apart (docs/benchmarks.md,
// 2026-12-05, fourteenth session).
func BenchmarkClaimAndRecordBatchSize(b *testing.B) {
	forEachBackendB(b, func(b *testing.B, be backend) {
		for _, per := range []int{10, 50, 200} {
			b.Run(fmt.Sprintf("claim=%d", per), func(b *testing.B) { benchClaimAndRecordBatch(b, be, per) })
		}
	})
}

// benchClaimAndRecordBatch runs b.N claims of per±5 due deliveries, each
// followed by one RecordBatch marking them delivered.
func benchClaimAndRecordBatch(b *testing.B, be backend, per int) {
	const dests = 10
	ctx := context.Background()
	s := newStore(b, be, Options{})
	now := time.Now()
	payload := []byte(`{"data":"` + strings.Repeat("x", 500) + `"}`)
	ds := make([]hookrelay.Delivery, 0, 500)
	total := b.N*per + per // the claims' limits vary around per (below)
	for i := range total {
		d := newDelivery(fmt.Sprintf("evt_%d", i), fmt.Sprintf("dst_%d", i%dests), now.Add(time.Duration(i)))
		d.Payload = payload
		if ds = append(ds, d); len(ds) == cap(ds) || i == total-1 {
			if _, err := s.Create(ctx, ds); err != nil {
				b.Fatal(err)
			}
			ds = ds[:0]
		}
	}
	claimAt := now.Add(time.Hour)
	finished := claimAt
	writes := make([]hookrelay.LedgerWrite, 0, per+5)
	// Room for 40 per destination: more than a claim of 205 over 10
	// destinations takes, so the claim's size, not a room, limits it.
	const room = 40
	server := serverOfDialect[be.dialect]
	b.ReportAllocs()
	b.ResetTimer()
	var claimCPU time.Duration
	claimed := 0
	reportServer := serverCPU(b, server)
	cpu0 := proccpu.Self()
	for i := range b.N {
		rooms := make(map[string]int, dests)
		for d := range dests {
			rooms[fmt.Sprintf("dst_%d", d)] = room
		}
		// A worker asks for what it has free, so the limit changes
		// from one claim to the next: per-5 … per+5 here.
		limit := per - 5 + i%11
		claim0 := proccpu.Self()
		cs, err := s.Claim(ctx, hookrelay.ClaimParams{Now: claimAt, Limit: limit, LeaseFor: time.Minute, Holder: "bench",
			DestinationRoom: rooms, DefaultDestinationRoom: room})
		if err != nil || len(cs) != limit {
			b.Fatalf("claim: %d claims for a limit of %d, %v", len(cs), limit, err)
		}
		claimCPU += proccpu.Self() - claim0
		claimed += len(cs)
		writes = writes[:0]
		for _, c := range cs {
			// Each attempt finishes at its own time, later than the
			// last, as a worker's do.
			finished = finished.Add(time.Microsecond)
			writes = append(writes, hookrelay.LedgerWrite{Delivered: &hookrelay.MarkDeliveredParams{
				ID: c.Delivery.ID, Lease: c.Lease, Now: finished,
				Attempt: hookrelay.Attempt{DeliveryID: c.Delivery.ID, Number: c.Delivery.Attempt, StartedAt: claimAt,
					FinishedAt: finished, Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 204},
			}})
		}
		errs, err := s.RecordBatch(ctx, writes)
		if err != nil {
			b.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu := proccpu.Self() - cpu0
	reportServer(float64(claimed), "delivery")
	b.StopTimer()
	// The server's CPU is not this process's: cpu-ns/delivery is the
	// Go side alone (GC included).
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(claimed), "cpu-ns/delivery")
	b.ReportMetric(float64(claimCPU.Nanoseconds())/float64(claimed), "claim-cpu-ns/delivery")
}

// serverOfDialect is the proccpu.ServerOf kind of a dialect's server;
// SQLite has none (its work is this process's).
var serverOfDialect = map[Dialect]string{Postgres: "postgres", MySQL: "mysql"}

// BenchmarkClaimVaryingRooms is PostgreSQL claims with rooms for about 300
// destinations whose number changes from claim to claim (over 20 values),
// as a worker serving many destinations makes them, on a pool of one
// connection. ns/op is per claim (of 5); it also reports the claim
// statements the server holds prepared for the connection afterwards and
// how much the server process's memory grew (pg_backend_memory_contexts).
// A claim text with a placeholder per room had left one statement per
// number of rooms, each with its plan (TestPostgresClaimIsOneStatementWhateverTheRooms).
func BenchmarkClaimVaryingRooms(b *testing.B) {
	be := backends[1]
	be.skipUnlessConfigured(b)
	ctx := context.Background()
	db, err := openDB(Postgres, os.Getenv(be.envVar), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	s, err := New(db, Options{Dialect: Postgres, TablePrefix: randomPrefix()})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	defer dropTables(b, s)
	const dests, per = 300, 5
	queueSpread(b, s, b.N*per, dests)
	memory := func() (kb int64) {
		if err := db.QueryRowContext(ctx, "SELECT CAST(sum(total_bytes) / 1024 AS BIGINT) FROM pg_backend_memory_contexts").Scan(&kb); err != nil {
			b.Fatal(err)
		}
		return kb
	}
	before := memory()
	b.ResetTimer()
	for i := range b.N {
		rooms := make(map[string]int, dests)
		for d := range dests - i%20 {
			rooms[fmt.Sprintf("dest_%d", d)] = 1 + (i+d)%5
		}
		cs, err := s.Claim(ctx, hookrelay.ClaimParams{Now: t0.Add(time.Hour), Limit: per, LeaseFor: time.Hour, Holder: "bench",
			DefaultDestinationRoom: 2, DestinationRoom: rooms})
		if err != nil || len(cs) != per {
			b.Fatalf("claim %d: %d claims, %v", i, len(cs), err)
		}
	}
	b.StopTimer()
	var prepared int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE position($1 in statement) > 0",
		"UPDATE "+s.prefix+"deliveries SET lease_token").Scan(&prepared); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(prepared), "prepared-claim-statements")
	b.ReportMetric(float64(memory()-before), "server-memory-KB")
}

// BenchmarkAcquireLease is a broker worker's lease of one delivery it was
// handed (LeaseLedger.AcquireLease), one after another on one goroutine:
// ns/op is one lease, round trips included.
func BenchmarkAcquireLease(b *testing.B) {
	forEachBackendB(b, func(b *testing.B, be backend) {
		ctx := context.Background()
		s := newStore(b, be, Options{})
		now := time.Now()
		ids := make([]string, 0, b.N)
		ds := make([]hookrelay.Delivery, 0, 500)
		for i := range b.N {
			d := newDelivery(fmt.Sprintf("evt_%d", i), fmt.Sprintf("dst_%d", i%10), now.Add(time.Duration(i)))
			ids = append(ids, d.ID)
			if ds = append(ds, d); len(ds) == cap(ds) || i == b.N-1 {
				if _, err := s.Create(ctx, ds); err != nil {
					b.Fatal(err)
				}
				ds = ds[:0]
			}
		}
		at := now.Add(time.Hour)
		b.ReportAllocs()
		b.ResetTimer()
		for _, id := range ids {
			c, err := s.AcquireLease(ctx, hookrelay.AcquireLeaseParams{ID: id, Now: at, LeaseFor: time.Minute, Holder: "bench"})
			if err != nil || c.Lease.Token == 0 {
				b.Fatalf("acquire lease %s: %v", id, err)
			}
		}
	})
}

// BenchmarkPostgresRowWrites times, inside PostgreSQL, the row writes a
// delivery needs whatever the statements around them: a claim's lease
// update, a ledger batch's update to delivered, and a candidate's row lock.
// Each op is one PL/pgSQL block of 200 statements of 50 rows over 10,000
// leased deliveries (512-byte payloads, every index of the schema), in a
// transaction rolled back, so nothing is parsed, planned again or sent per
// statement. server-cpu-ns/row is the server's CPU per row written; the
// "slice" case is the block with no statement (reading the IDs, cutting
// them into arrays), to subtract from the others. docs/benchmarks.md
// ("The floor of PostgreSQL's row writes") has the figures.
func BenchmarkPostgresRowWrites(b *testing.B) {
	be := backends[1]
	be.skipUnlessConfigured(b)
	ctx := context.Background()
	s := newStore(b, be, Options{})
	const rows, per = 10000, 50
	now := time.Now()
	payload := []byte(`{"data":"` + strings.Repeat("x", 500) + `"}`)
	ds := make([]hookrelay.Delivery, 0, 500)
	for i := range rows {
		d := newDelivery(fmt.Sprintf("evt_%d", i), fmt.Sprintf("dst_%d", i%10), now.Add(time.Duration(i)))
		d.Payload = payload
		if ds = append(ds, d); len(ds) == cap(ds) {
			if _, err := s.Create(ctx, ds); err != nil {
				b.Fatal(err)
			}
			ds = ds[:0]
		}
	}
	for leased := 0; leased < rows; {
		cs, err := s.Claim(ctx, hookrelay.ClaimParams{Now: now.Add(time.Hour), Limit: 500, LeaseFor: time.Hour, Holder: "bench"})
		if err != nil || len(cs) == 0 {
			b.Fatalf("claim after %d of %d: %d claims, %v", leased, rows, len(cs), err)
		}
		leased += len(cs)
	}
	for _, c := range []struct{ name, stmt string }{
		{"slice", "NULL;"},
		{"lease_update", "UPDATE {d} SET lease_token = lease_token + 1, lease_expires_at = lease_expires_at + 1 WHERE id = ANY(x);"},
		{"delivered_update", "UPDATE {d} SET state = 'delivered', updated_at = updated_at + 1, lease_expires_at = NULL WHERE id = ANY(x);"},
		{"row_lock", "PERFORM 1 FROM {d} WHERE id = ANY(x) FOR UPDATE;"},
	} {
		block := s.q(fmt.Sprintf("DO $$ DECLARE ids text[]; x text[]; j int; BEGIN"+
			" SELECT array_agg(id ORDER BY seq) INTO ids FROM {d};"+
			" FOR j IN 0..%d LOOP x := ids[j*%d+1:(j+1)*%d]; %s END LOOP; END $$", rows/per-1, per, per, c.stmt))
		b.Run(c.name, func(b *testing.B) {
			reportServer := serverCPU(b, "postgres")
			for range b.N {
				tx, err := s.DB().BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := tx.ExecContext(ctx, block); err != nil {
					b.Fatal(err)
				}
				if err := tx.Rollback(); err != nil {
					b.Fatal(err)
				}
			}
			reportServer(float64(b.N*rows), "row")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
		})
	}
}

// serverCPU starts timing the CPU of the local database server's processes
// (proccpu.Servers; server is a key of it, "" for none). The function it
// returns reads that CPU again and reports what was used since, per n
// units, as server-cpu-ns/<unit>; it reports nothing when the server's
// processes were not seen both times (a remote server, or none).
func serverCPU(b *testing.B, server string) func(n float64, unit string) {
	cpu0, seen0 := proccpu.Servers()[server]
	return func(n float64, unit string) {
		cpu1, seen1 := proccpu.Servers()[server]
		if server != "" && seen0 && seen1 {
			b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/n, "server-cpu-ns/"+unit)
		}
	}
}
