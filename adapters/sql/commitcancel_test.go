package hooksql

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/sqlitefile"
)

// cancelAtCommitKey's value in a context is that context's cancel
// function, which the drivers of TestWriteCancelledOnceItsCommitIsSent
// call as soon as the commit of a transaction run under the context has
// been sent to the database.
type cancelAtCommitKey struct{}

// cancelledAtCommit is a context that is cancelled once its transaction's
// commit has been sent.
func cancelledAtCommit() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	return context.WithValue(ctx, cancelAtCommitKey{}, cancel)
}

func cancelAtCommit(ctx context.Context) {
	if cancel, ok := ctx.Value(cancelAtCommitKey{}).(context.CancelFunc); ok {
		cancel()
	}
}

// TestWriteCancelledOnceItsCommitIsSent cancels each kind of write the
// Store commits (a Create, a claim, a lease taken, a single ledger write,
// a ledger batch) just after its commit has been sent: the write has
// happened, so the call reports success, never a cancellation the caller
// would take to mean nothing was written. On SQLite the driver commits
// first and the context is cancelled then; on PostgreSQL the context is
// cancelled once the commit (a pipeline's Sync, or COMMIT) is on the wire,
// and the driver is made to notice before it reads the answer.
func TestWriteCancelledOnceItsCommitIsSent(t *testing.T) {
	stores := map[string]func(t *testing.T) *Store{
		"sqlite":                    func(t *testing.T) *Store { return commitCancellingSQLiteStore(t, true) },
		"sqlite_without_statements": func(t *testing.T) *Store { return commitCancellingSQLiteStore(t, false) },
		"postgres":                  func(t *testing.T) *Store { return commitCancellingPostgresStore(t, false) },
		"postgres_another_driver":   func(t *testing.T) *Store { return commitCancellingPostgresStore(t, true) },
	}
	for _, name := range []string{"sqlite", "sqlite_without_statements", "postgres", "postgres_another_driver"} {
		t.Run(name, func(t *testing.T) {
			s := stores[name](t)
			n := 0
			// fresh creates a due delivery, and claims it when claimed.
			fresh := func(claimed bool) hookrelay.Claim {
				n++
				d := newDelivery(fmt.Sprintf("evt_%d", n), "dst_1", t0)
				_, err := s.Create(context.Background(), []hookrelay.Delivery{d})
				require.NoError(t, err)
				if !claimed {
					return hookrelay.Claim{Delivery: d}
				}
				c, err := s.AcquireLease(context.Background(), hookrelay.AcquireLeaseParams{ID: d.ID, Holder: "w", Now: t0, LeaseFor: time.Hour})
				require.NoError(t, err)
				return c
			}
			delivered := func(c hookrelay.Claim) hookrelay.MarkDeliveredParams {
				return hookrelay.MarkDeliveredParams{ID: c.Delivery.ID, Lease: c.Lease, Now: t0.Add(time.Second),
					Attempt: hookrelay.Attempt{Number: 1, StartedAt: t0, FinishedAt: t0.Add(time.Second),
						Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 204}}
			}
			state := func(id string) (string, int64, bool) {
				var st string
				var token int64
				var leased bool
				require.NoError(t, s.db.QueryRowContext(context.Background(),
					s.q("SELECT state, lease_token, lease_expires_at IS NOT NULL FROM {d} WHERE id = ?"), id).Scan(&st, &token, &leased))
				return st, token, leased
			}
			writes := []struct {
				name  string
				write func(ctx context.Context) error
			}{
				{"create", func(ctx context.Context) error {
					n++
					// Not due before the year's end: the claim below claims
					// its own delivery only.
					d := newDelivery(fmt.Sprintf("evt_%d", n), "dst_1", t0.Add(365*24*time.Hour))
					created, err := s.Create(ctx, []hookrelay.Delivery{d})
					if err == nil {
						assert.Equal(t, []bool{true}, created)
						st, _, _ := state(d.ID)
						assert.Equal(t, "pending", st)
					}
					return err
				}},
				{"claim", func(ctx context.Context) error {
					d := fresh(false).Delivery
					claims, err := s.Claim(ctx, hookrelay.ClaimParams{Now: t0, Limit: 10, LeaseFor: time.Hour, Holder: "w"})
					if err == nil {
						require.Len(t, claims, 1)
						_, token, leased := state(d.ID)
						assert.True(t, leased)
						assert.Equal(t, token, claims[0].Lease.Token)
					}
					return err
				}},
				{"acquire lease", func(ctx context.Context) error {
					d := fresh(false).Delivery
					c, err := s.AcquireLease(ctx, hookrelay.AcquireLeaseParams{ID: d.ID, Holder: "w", Now: t0, LeaseFor: time.Hour})
					if err == nil {
						_, token, leased := state(d.ID)
						assert.True(t, leased)
						assert.Equal(t, token, c.Lease.Token)
					}
					return err
				}},
				{"mark delivered", func(ctx context.Context) error {
					c := fresh(true)
					err := s.MarkDelivered(ctx, delivered(c))
					if err == nil {
						st, _, _ := state(c.Delivery.ID)
						assert.Equal(t, "delivered", st)
					}
					return err
				}},
				{"record batch", func(ctx context.Context) error {
					c := fresh(true)
					errs, err := s.RecordBatch(ctx, []hookrelay.LedgerWrite{{Delivered: new(delivered(c))}})
					if err == nil {
						assert.Equal(t, []error{nil}, errs)
						st, _, _ := state(c.Delivery.ID)
						assert.Equal(t, "delivered", st)
					}
					return err
				}},
			}
			for _, w := range writes {
				ctx := cancelledAtCommit()
				err := w.write(ctx)
				require.Error(t, ctx.Err(), "%s: the driver cancelled the context at the commit", w.name)
				assert.NoError(t, err, "%s: a write whose commit was sent reports success", w.name)
			}
		})
	}
}

// commitCancellingSQLiteStore is a Store on a new SQLite file whose
// driver cancels a transaction's context (cancelAtCommitKey) once it has
// committed it. With stmts its transactions run prepared statements on a
// *sql.Tx, as a Store made by OpenSQLite does; without, they are BEGIN
// IMMEDIATE and COMMIT on a connection, as on a pool given to New.
func commitCancellingSQLiteStore(t *testing.T, stmts bool) *Store {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("hookrelay-commit-cancelling-sqlite", sqlitefile.URI(filepath.Join(t.TempDir(), "hookrelay.db"))+"?"+q.Encode())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	s, err := New(db, Options{Dialect: SQLite})
	require.NoError(t, err)
	s.txStmts = stmts
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Migrate(context.Background()))
	return s
}

func init() { sql.Register("hookrelay-commit-cancelling-sqlite", commitCancellingSQLite{}) }

// commitCancellingSQLite is modernc's SQLite driver whose connections call
// cancelAtCommit after a COMMIT.
type commitCancellingSQLite struct{}

func (commitCancellingSQLite) Open(name string) (driver.Conn, error) {
	c, err := (&sqlite.Driver{}).Open(name)
	if err != nil {
		return nil, err
	}
	return commitCancellingSQLiteConn{c.(sqliteConn)}, nil
}

// sqliteConn is what database/sql uses of a modernc SQLite connection.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.SessionResetter
	driver.Validator
	driver.Pinger
}

type commitCancellingSQLiteConn struct{ sqliteConn }

func (c commitCancellingSQLiteConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.sqliteConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return commitCancellingTx{Tx: tx, ctx: ctx}, nil
}

func (c commitCancellingSQLiteConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.sqliteConn.ExecContext(ctx, query, args)
	if strings.EqualFold(query, "COMMIT") {
		cancelAtCommit(ctx)
	}
	return r, err
}

type commitCancellingTx struct {
	driver.Tx
	ctx context.Context
}

func (t commitCancellingTx) Commit() error {
	err := t.Tx.Commit()
	cancelAtCommit(t.ctx)
	return err
}

// commitCancellingPostgresStore is a Store on new tables in the test
// PostgreSQL database, through pgx's stdlib driver (or, with another, the
// same hidden from the Store: otherPostgresDriver), whose connections
// cancel a transaction's context (cancelAtCommitKey) as soon as its commit
// is written to the server, and then, when pgx watches that context, wait
// until pgx has cut the connection's reads short for it.
func commitCancellingPostgresStore(t *testing.T, another bool) *Store {
	b := postgresBackend(t)
	cfg, err := pgx.ParseConfig(os.Getenv(b.envVar))
	require.NoError(t, err)
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &commitCancellingConn{Conn: c, deadline: make(chan struct{}, 1)}, nil
	}
	cfg.Tracer = commitTracer{}
	var db *sql.DB
	if another {
		name := stdlib.RegisterConnConfig(cfg)
		t.Cleanup(func() { stdlib.UnregisterConnConfig(name) })
		db, err = sql.Open("hookrelay-other-postgres", name)
		require.NoError(t, err)
	} else {
		db = stdlib.OpenDB(*cfg)
	}
	t.Cleanup(func() { _ = db.Close() })
	s, err := New(db, Options{Dialect: Postgres, TablePrefix: randomPrefix()})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(context.Background()))
	t.Cleanup(func() { dropTables(t, s) })
	return s
}

// commitTracer arms a connection's cancellation (commitCancellingConn)
// when pgx starts a pipeline, which is its own transaction, or a COMMIT,
// under a context with a cancelAtCommitKey.
type commitTracer struct{}

func (commitTracer) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.EqualFold(strings.TrimSpace(d.SQL), "commit") {
		armCancelAtCommit(ctx, c)
	}
	return ctx
}

func (commitTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (commitTracer) TraceBatchStart(ctx context.Context, c *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	armCancelAtCommit(ctx, c)
	return ctx
}

func (commitTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (commitTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func armCancelAtCommit(ctx context.Context, c *pgx.Conn) {
	cancel, ok := ctx.Value(cancelAtCommitKey{}).(context.CancelFunc)
	if !ok {
		return
	}
	nc := c.PgConn().Conn().(*commitCancellingConn)
	select {
	case <-nc.deadline: // an earlier cancellation's
	default:
	}
	nc.armed.Store(&armedCancel{cancel: cancel, watched: ctx.Done() != nil})
}

type armedCancel struct {
	cancel func()
	// watched: pgx watches the context (it can be cancelled), and cuts
	// the connection's reads short by a deadline when it is.
	watched bool
}

// commitCancellingConn is a connection to PostgreSQL that, once armed,
// cancels the context after the write that sends the statements to run (an
// Execute message, or a simple query such as COMMIT): the pipeline's Sync
// goes with them.
type commitCancellingConn struct {
	net.Conn
	armed    atomic.Pointer[armedCancel]
	deadline chan struct{} // a deadline was set (pgx noticed a cancellation)
}

// executeMsg is the protocol's Execute message for the unnamed portal,
// all rows.
var executeMsg = []byte{'E', 0, 0, 0, 9, 0, 0, 0, 0, 0}

func (c *commitCancellingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	a := c.armed.Load()
	if a != nil && err == nil && len(b) > 0 && (b[0] == 'Q' || bytes.Contains(b, executeMsg)) && c.armed.CompareAndSwap(a, nil) {
		a.cancel()
		if a.watched {
			<-c.deadline
		}
	}
	return n, err
}

func (c *commitCancellingConn) SetDeadline(t time.Time) error {
	err := c.Conn.SetDeadline(t)
	if !t.IsZero() {
		select {
		case c.deadline <- struct{}{}:
		default:
		}
	}
	return err
}
