package hooksql

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deliverAll creates n deliveries, claims them and marks them delivered
// in one batch.
func deliverAll(t *testing.T, s *Store, event string, n int) {
	t.Helper()
	ctx := context.Background()
	ds := make([]hookrelay.Delivery, n)
	for i := range ds {
		ds[i] = newDelivery(fmt.Sprintf("%s_%d", event, i), "dst_1", t0)
	}
	_, err := s.Create(ctx, ds)
	require.NoError(t, err)
	cs := claimAll(t, s, t0)
	require.Len(t, cs, n)
	ws := make([]hookrelay.LedgerWrite, len(cs))
	for i, c := range cs {
		ws[i] = hookrelay.LedgerWrite{Delivered: &hookrelay.MarkDeliveredParams{ID: c.Delivery.ID, Lease: c.Lease,
			Attempt: hookrelay.Attempt{Number: 1, StartedAt: t0, FinishedAt: t0, Outcome: hookrelay.OutcomeAccepted}, Now: t0}}
	}
	errs, err := s.RecordBatch(ctx, ws)
	require.NoError(t, err)
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func stmtQueries(s *Store) []string {
	s.stmtMu.RLock()
	defer s.stmtMu.RUnlock()
	var qs []string
	for q := range s.stmts {
		qs = append(qs, q)
	}
	return qs
}

func TestSQLiteStatementsArePreparedOncePerStoreAndClosedWithIt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookrelay.db")
	open := func(prefix string) *Store {
		s, err := OpenSQLite(ctx, path, Options{TablePrefix: prefix})
		require.NoError(t, err)
		require.NoError(t, s.Migrate(ctx))
		return s
	}
	a, b := open("a_"), open("b_")
	defer b.Close()

	deliverAll(t, a, "evt_a1", 3)
	prepared := stmtQueries(a)
	require.NotEmpty(t, prepared, "the ledger batch's statements are prepared after their first transaction")
	for _, q := range prepared {
		assert.Contains(t, q, "a_", "a Store prepares only statements on its own tables: %s", q)
		assert.NotContains(t, q, "b_", q)
	}
	st := a.prepared(prepared[0])

	// A later transaction runs them through the transaction, wanting none.
	deliverAll(t, a, "evt_a2", 3)
	assert.ElementsMatch(t, prepared, stmtQueries(a), "no statement is prepared twice")
	assert.Same(t, st, a.prepared(prepared[0]))
	err := a.inTx(ctx, "probe", func(q querier) error {
		sq := q.(*stmtQuerier)
		var n int
		if err := sq.QueryRowContext(ctx, a.qp("SELECT COUNT(*) FROM {d} WHERE state = ?"), "delivered").Scan(&n); err != nil {
			return err
		}
		assert.Equal(t, 6, n)
		assert.Len(t, sq.wanted, 1, "a reusable statement not prepared yet is wanted once")
		for _, query := range prepared {
			assert.NotNil(t, sq.stmt(ctx, query, false), "a prepared statement runs on the transaction: %s", query)
		}
		assert.Len(t, sq.wanted, 1)
		return nil
	})
	require.NoError(t, err)
	assert.Len(t, stmtQueries(a), len(prepared)+1)

	// The other Store, on the same file, has statements of its own.
	deliverAll(t, b, "evt_b", 2)
	for _, q := range stmtQueries(b) {
		assert.Contains(t, q, "b_", q)
		assert.NotContains(t, q, "a_", q)
	}

	require.NoError(t, a.Close())
	assert.Empty(t, stmtQueries(a), "Close closes the statements")
	a.prepare(ctx, prepared) // as a transaction ending after Close would
	assert.Empty(t, stmtQueries(a), "none is prepared after Close")
	deliverAll(t, b, "evt_b2", 2)
}

func TestSQLiteStatementsOnAPoolOfOneConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadlock fails instead of hanging
	defer cancel()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "hookrelay.db"), Options{MaxOpenConns: 1})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Migrate(ctx))

	const workers, each = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				d := newDelivery(fmt.Sprintf("evt_%d_%d", w, i), fmt.Sprintf("dst_%d", w), t0)
				if _, err := s.Create(ctx, []hookrelay.Delivery{d}); err != nil {
					errs <- err
					return
				}
				cs, err := s.Claim(ctx, hookrelay.ClaimParams{Now: t0, Limit: 1, LeaseFor: time.Minute, Holder: "test",
					DestinationRoom: map[string]int{d.DestinationID: 1}})
				if err != nil {
					errs <- err
					return
				}
				for _, c := range cs {
					if err := s.MarkDelivered(ctx, hookrelay.MarkDeliveredParams{ID: c.Delivery.ID, Lease: c.Lease,
						Attempt: hookrelay.Attempt{Number: 1, StartedAt: t0, FinishedAt: t0, Outcome: hookrelay.OutcomeAccepted}, Now: t0}); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, ctx.Err())
	var n int
	require.NoError(t, s.db.QueryRowContext(ctx, s.q("SELECT COUNT(*) FROM {d} WHERE state = 'delivered'")).Scan(&n))
	assert.Equal(t, workers*each, n)
	assert.NotEmpty(t, stmtQueries(s))
}

func TestSQLiteStatementsSurviveDroppingAndRecreatingTheTables(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backend{dialect: SQLite}, Options{})
	deliverAll(t, s, "evt_1", 2)
	require.NotEmpty(t, stmtQueries(s))

	require.NoError(t, s.DropTables(ctx), "prepared statements do not hold the tables")
	_, err := s.Create(ctx, []hookrelay.Delivery{newDelivery("evt_x", "dst_1", t0)})
	require.Error(t, err)
	require.NoError(t, s.Migrate(ctx))
	deliverAll(t, s, "evt_2", 2) // the statements are compiled again for the new tables

	// An ALTER TABLE by a later migration likewise recompiles them.
	_, err = s.db.ExecContext(ctx, s.q("ALTER TABLE {d} ADD COLUMN extra_test_column TEXT"))
	require.NoError(t, err)
	deliverAll(t, s, "evt_3", 2)
	for _, q := range stmtQueries(s) {
		assert.False(t, strings.HasPrefix(strings.ToUpper(q), "CREATE") || strings.HasPrefix(strings.ToUpper(q), "ALTER"), "DDL is never prepared: %s", q)
	}
}

func TestStatementsArePreparedOnlyForOpenSQLite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b, Options{})
		deliverAll(t, s, "evt_1", 2)
		if b.dialect == SQLite {
			assert.NotEmpty(t, stmtQueries(s))
			return
		}
		assert.Empty(t, stmtQueries(s), "%s prepares nothing of its own", b.dialect)
	})
	t.Run("sqlite through New", func(t *testing.T) {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "new.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
		require.NoError(t, err)
		defer db.Close()
		s, err := New(db, Options{Dialect: SQLite})
		require.NoError(t, err)
		require.NoError(t, s.Migrate(context.Background()))
		deliverAll(t, s, "evt_1", 2)
		assert.Empty(t, stmtQueries(s), "a caller's pool may not begin immediate transactions")
	})
}
