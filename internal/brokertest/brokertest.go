// Package brokertest holds what the broker queue adapters' tests share: the
// ledgers they run the conformance suite against (memory, SQLite,
// PostgreSQL), the operator-redrive scenario and the recovery of a record
// whose publish was lost (LostPublish).
package brokertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	hooksql "github.com/hookrelay/hookrelay/adapters/sql"
	"github.com/hookrelay/hookrelay/hookrelaytest"
)

// Ledger is a ledger a broker queue can lease from.
type Ledger interface {
	hookrelay.Ledger
	hookrelay.LeaseLedger
}

// LedgerCase builds one kind of fresh, empty ledger per test.
type LedgerCase struct {
	Name string
	New  func(t testing.TB) Ledger
}

// PostgresEnv names the PostgreSQL DSN variable, as the SQL adapter's
// tests do.
const PostgresEnv = "HOOKRELAY_TEST_POSTGRES_DSN"

// Ledgers returns the memory ledger, the SQL store on SQLite, and on
// PostgreSQL (which skips, naming PostgresEnv, when it is unset).
func Ledgers() []LedgerCase {
	return []LedgerCase{
		{"memory", func(testing.TB) Ledger { return memory.NewStore() }},
		{"sqlite", func(t testing.TB) Ledger { return SQLite(t) }},
		{"postgres", func(t testing.TB) Ledger { return Postgres(t) }},
	}
}

// SQLite returns a migrated SQL store on a fresh SQLite file.
func SQLite(t testing.TB) *hooksql.Store {
	t.Helper()
	s, err := hooksql.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), hooksql.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Migrate(context.Background()))
	return s
}

// Postgres returns a migrated SQL store on fresh tables (a random table
// prefix), dropped at cleanup, or skips naming PostgresEnv.
func Postgres(t testing.TB) *hooksql.Store {
	t.Helper()
	dsn := os.Getenv(PostgresEnv)
	if dsn == "" {
		t.Skipf("%s is not set; set it to run the broker tests with the PostgreSQL ledger", PostgresEnv)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "b" + hex.EncodeToString(b[:]) + "_"
	ctx := context.Background()
	s, err := hooksql.Open(ctx, hooksql.Postgres, dsn, hooksql.Options{TablePrefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() {
		defer s.Close()
		rows, err := s.DB().QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name LIKE $1", prefix+"%")
		if err != nil {
			t.Errorf("list tables: %v", err)
			return
		}
		var names []string
		for rows.Next() {
			var n string
			if rows.Scan(&n) == nil {
				names = append(names, n)
			}
		}
		rows.Close()
		for _, n := range names {
			if _, err := s.DB().ExecContext(ctx, `DROP TABLE IF EXISTS "`+n+`" CASCADE`); err != nil {
				t.Errorf("drop %s: %v", n, err)
			}
		}
	})
	require.NoError(t, s.Migrate(ctx))
	return s
}

// Redrive runs the operator redrive through a broker queue: a delivery is
// rejected permanently and dead-lettered; an operator moves its record back
// to pending by hand in the SQL store and enqueues it again through the
// queue; it is delivered under the same delivery ID, and the attempt
// history keeps both attempts. q must lease from store.
func Redrive(t *testing.T, q hookrelay.Queue, store *hooksql.Store) {
	ctx := context.Background()
	dests := memory.NewDestinations()
	require.NoError(t, dests.Put(ctx, hookrelay.Destination{ID: "dest_1", TenantID: "tenant_a", URL: "https://accounting.example/"}))
	rec := &hookrelaytest.Recipient{Script: func(_ hookrelay.Delivery, n int) hookrelaytest.RecipientAnswer {
		if n == 1 {
			return hookrelaytest.Reject(hookrelay.Permanent(hookrelay.ReasonUnprocessable).WithStatus(422))
		}
		return hookrelaytest.Accept() // fixed by the recipient's team
	}}
	c, err := hookrelay.New(hookrelay.Config{
		Queue: q, Ledger: store, Destinations: dests, Sender: rec,
		LeaseFor: time.Second, PollInterval: 20 * time.Millisecond,
	})
	require.NoError(t, err)
	res, err := c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "evt_redrive", TenantID: "tenant_a", DestinationID: "dest_1", EventType: "t", Payload: []byte(`{}`)})
	require.NoError(t, err)
	id := res.ID
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	state := func() hookrelay.State {
		d, err := store.Get(ctx, id)
		require.NoError(t, err)
		return d.State
	}
	require.Eventually(t, func() bool { return state() == hookrelay.StateDead }, 10*time.Second, 10*time.Millisecond)

	// The operator's redrive, by hand: back to pending, next attempt now.
	_, err = store.DB().ExecContext(ctx, "UPDATE "+store.TablePrefix()+"deliveries SET state = 'pending', attempt = attempt + 1, "+
		"next_attempt_at = "+placeholder(store, 1)+", lease_expires_at = NULL WHERE id = "+placeholder(store, 2),
		time.Now().UnixNano(), id)
	require.NoError(t, err)
	d, err := store.Get(ctx, id)
	require.NoError(t, err)
	require.NoError(t, q.Enqueue(ctx, []hookrelay.Delivery{d}), "re-enqueue through the broker")

	require.Eventually(t, func() bool { return state() == hookrelay.StateDelivered }, 10*time.Second, 10*time.Millisecond)
	reqs := rec.RequestsFor(id)
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		assert.Equal(t, id, r.DeliveryID, "the redriven delivery keeps its ID")
	}
	as, err := store.Attempts(ctx, id)
	require.NoError(t, err)
	assert.Len(t, as, 2, "the dead attempt is kept beside the redriven one")
}

func placeholder(s *hooksql.Store, n int) string {
	if s.Dialect() == hooksql.Postgres {
		return "$" + string(rune('0'+n))
	}
	return "?"
}

// Secret is the destination secret of NewClient's destination; tests check
// it never reaches the broker.
const Secret = "whsec_c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1sZWFr"

// NewClient is a worker on the wall clock over q and ledger, with one
// destination whose URL and secret must never reach the broker.
func NewClient(t *testing.T, q hookrelay.Queue, ledger hookrelay.Ledger, sender hookrelay.Sender, opts ...func(*hookrelay.Config)) *hookrelay.Client {
	t.Helper()
	dests := memory.NewDestinations()
	require.NoError(t, dests.Put(context.Background(), hookrelay.Destination{
		ID: "dest_1", TenantID: "tenant_a", URL: "https://user:pass@accounting.example/webhooks", Secrets: []string{Secret},
	}))
	cfg := hookrelay.Config{
		Queue: q, Ledger: ledger, Destinations: dests, Sender: sender,
		LeaseFor: time.Second, PollInterval: 20 * time.Millisecond, Random: hookrelaytest.FixedRandom(0.5),
		Policy: &hookrelay.Policy{Version: "fast", MaxAttempts: 3, BaseDelay: 20 * time.Millisecond, MaxDelay: 50 * time.Millisecond},
	}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := hookrelay.New(cfg)
	require.NoError(t, err)
	return c
}

// ClaimOne records a due delivery id in ledger, enqueues it on q and
// claims it: the one claim a test of a broker step (dead-letter, release)
// starts from.
func ClaimOne(t *testing.T, q hookrelay.Queue, ledger hookrelay.Ledger, id string) hookrelay.Claim {
	t.Helper()
	ctx := context.Background()
	d := hookrelay.Delivery{ID: id, EventID: "evt", DestinationID: "dest_1", Attempt: 1, NextAttemptAt: time.Now()}
	_, err := ledger.Create(ctx, []hookrelay.Delivery{d})
	require.NoError(t, err)
	require.NoError(t, q.Enqueue(ctx, []hookrelay.Delivery{d}))
	cs, err := q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Minute, Holder: "w"})
	require.NoError(t, err)
	require.Len(t, cs, 1)
	return cs[0]
}

// Enqueue enqueues one payment event for NewClient's destination.
func Enqueue(t *testing.T, c *hookrelay.Client, eventID string) string {
	t.Helper()
	res, err := c.Enqueue(context.Background(), hookrelay.EnqueueParams{
		EventID: eventID, TenantID: "tenant_a", DestinationID: "dest_1",
		EventType: "lease.payment_recorded", Payload: []byte(`{"payment_id":"pay_7319"}`),
	})
	require.NoError(t, err)
	return res.ID
}

// RunConformance runs the suite's Queue, Engine, Redrive and Publish tests
// with the broker queue newQueue builds over each ledger (memory, SQLite,
// PostgreSQL). The ledgers run side by side: the suite mostly waits for the
// broker's real-time redeliveries, for at most redeliveryWithin each.
func RunConformance(t *testing.T, redeliveryWithin time.Duration, newQueue func(t *testing.T, ledger Ledger) hookrelay.Queue) {
	for _, lc := range Ledgers() {
		t.Run(lc.Name, func(t *testing.T) {
			t.Parallel()
			newHarness := func(t *testing.T) hookrelaytest.Harness {
				ledger := lc.New(t)
				return hookrelaytest.Harness{
					Queue:            newQueue(t, ledger),
					Ledger:           ledger,
					Destinations:     memory.NewDestinations(),
					RedeliveryWithin: redeliveryWithin,
				}
			}
			t.Run("Queue", func(t *testing.T) { hookrelaytest.RunQueue(t, newHarness) })
			t.Run("Engine", func(t *testing.T) { hookrelaytest.RunEngine(t, newHarness) })
			t.Run("Redrive", func(t *testing.T) { hookrelaytest.RunRedrive(t, newHarness) })
			t.Run("Publish", func(t *testing.T) { hookrelaytest.RunPublish(t, newHarness) })
		})
	}
}

// RetryAndDeadLetter runs a worker over q and ledger on two deliveries: one
// that fails twice (503) and then is accepted, one rejected permanently
// (422). It returns once the first is delivered and the second dead, with
// the worker still running so the caller can let the broker settle before
// stopping it.
func RetryAndDeadLetter(t *testing.T, q hookrelay.Queue, ledger hookrelay.Ledger) (c *hookrelay.Client, rec *hookrelaytest.Recipient, retried, dead string) {
	t.Helper()
	ctx := context.Background()
	rec = &hookrelaytest.Recipient{Script: func(d hookrelay.Delivery, n int) hookrelaytest.RecipientAnswer {
		switch {
		case d.EventID == "evt_retry" && n >= 3:
			return hookrelaytest.Accept()
		case d.EventID == "evt_retry":
			return hookrelaytest.Reject(hookrelay.Retryable(hookrelay.ReasonServiceUnavailable).WithStatus(503))
		}
		return hookrelaytest.Reject(hookrelay.Permanent(hookrelay.ReasonUnprocessable).WithStatus(422))
	}}
	c = NewClient(t, q, ledger, rec)
	retried = Enqueue(t, c, "evt_retry")
	dead = Enqueue(t, c, "evt_dead")
	require.NoError(t, c.Start(ctx))
	require.Eventually(t, func() bool {
		a, _ := ledger.Get(ctx, retried)
		b, _ := ledger.Get(ctx, dead)
		return a.State == hookrelay.StateDelivered && b.State == hookrelay.StateDead
	}, 15*time.Second, 10*time.Millisecond)
	return c, rec, retried, dead
}

// losesFirstPublish is a broker queue whose process dies between the
// ledger's create and the publish, once: its first Enqueue publishes
// nothing.
type losesFirstPublish struct {
	hookrelay.Queue
	lost atomic.Bool
}

func (q *losesFirstPublish) Enqueue(ctx context.Context, ds []hookrelay.Delivery) error {
	if q.lost.CompareAndSwap(false, true) {
		return errors.New("brokertest: injected crash between the ledger's create and the publish")
	}
	return q.Queue.Enqueue(ctx, ds)
}

// LostPublish runs the broker outbox recovery scenario on each SQL ledger
// (SQLite and PostgreSQL): the producer's process dies after the ledger
// created the record and before the broker confirmed its message, so the
// record is pending with no message; a worker with a short
// RecoverUnpublishedAfter publishes it again once it has gone unleased for
// that long, and it is delivered once, within the grace period plus one
// poll (and the broker's hand-over). newQueue builds the broker queue over
// the ledger.
func LostPublish(t *testing.T, newQueue func(t *testing.T, ledger Ledger) hookrelay.Queue) {
	for _, lc := range Ledgers()[1:] {
		t.Run(lc.Name, func(t *testing.T) {
			const grace = 500 * time.Millisecond
			ctx := context.Background()
			ledger := lc.New(t)
			rec := &hookrelaytest.Recipient{}
			var republished atomic.Int64
			q := &losesFirstPublish{Queue: newQueue(t, ledger)}
			c := NewClient(t, q, ledger, rec, func(cfg *hookrelay.Config) {
				cfg.RecoverUnpublishedAfter = grace
				cfg.Observer = hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
					if e.Name == hookrelay.EventRepublished {
						republished.Add(1)
					}
				})
			})
			_, err := c.Enqueue(ctx, hookrelay.EnqueueParams{
				EventID: "evt_lost", TenantID: "tenant_a", DestinationID: "dest_1",
				EventType: "lease.payment_recorded", Payload: []byte(`{"payment_id":"pay_7319"}`),
			})
			require.Error(t, err, "the producer saw the crash")
			id := hookrelay.DeliveryID("evt_lost", "dest_1")
			d, err := ledger.Get(ctx, id)
			require.NoError(t, err, "the record was created before the crash")
			require.Equal(t, hookrelay.StatePending, d.State)

			start := time.Now()
			require.NoError(t, c.Start(ctx))
			defer func() { require.NoError(t, c.Stop(ctx)) }()
			delivered := func() bool { ok, _ := ledger.WasDelivered(ctx, id); return ok }
			// The grace period counts from the record's due time, on the
			// client's (wall) clock; allow one poll (20 ms) and a loaded
			// machine's broker hand-over on top.
			require.Eventually(t, delivered, grace+5*time.Second, 5*time.Millisecond, "the lost record is delivered")
			took := time.Since(start)
			assert.GreaterOrEqual(t, took, grace-50*time.Millisecond, "not republished before the grace period")
			assert.Len(t, rec.RequestsFor(id), 1, "sent once")
			assert.EqualValues(t, 1, republished.Load(), "one recovery reported")
			t.Logf("delivered %s after the worker started (grace %s)", took, grace)
		})
	}
}

// OversizedPayload checks a broker queue with the hookrelay.MessageLimit
// ability: a payload whose envelope is over q's MaxEnvelopeBytes is refused
// at enqueue, naming Payload, before anything is stored (stored, it could
// never be published, and the client would publish it again in vain on
// every later enqueue); one a little under is stored, published and
// claimed. The client's MaxPayloadBytes is raised above the limit, so the
// queue's limit is the one that refuses.
func OversizedPayload(t *testing.T, q hookrelay.Queue, ledger Ledger) {
	t.Helper()
	ctx := context.Background()
	ml, ok := hookrelay.As[hookrelay.MessageLimit](q)
	require.True(t, ok, "the queue has the MessageLimit ability")
	limit := ml.MaxEnvelopeBytes()
	require.Positive(t, limit)
	c := NewClient(t, q, ledger, &hookrelaytest.Recipient{}, func(cfg *hookrelay.Config) { cfg.MaxPayloadBytes = 2 * limit })
	enqueue := func(eventID string, n int) error {
		_, err := c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: eventID, TenantID: "tenant_a", DestinationID: "dest_1", EventType: "t", Payload: make([]byte, n)})
		return err
	}
	// The envelope carries the payload in base64: 4 bytes for every 3.
	err := enqueue("evt_big", limit/4*3+1024)
	var ve *hookrelay.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "Payload", ve.Field)
	assert.ErrorContains(t, err, "over the")
	_, err = ledger.Get(ctx, hookrelay.DeliveryID("evt_big", "dest_1"))
	assert.ErrorIs(t, err, hookrelay.ErrNotFound, "nothing is stored")

	require.NoError(t, enqueue("evt_fits", limit/4*3-2048))
	var cs []hookrelay.Claim
	require.Eventually(t, func() bool {
		cs, err = q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Minute, Holder: "w"})
		require.NoError(t, err)
		return len(cs) == 1
	}, 10*time.Second, 10*time.Millisecond, "the one under the limit was published")
	assert.Equal(t, hookrelay.DeliveryID("evt_fits", "dest_1"), cs[0].Delivery.ID)
}
