package hooksql

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// TestPublishTx shows the outbox pattern for a fan-out: the business write
// and every delivery of the event commit or roll back together.
func TestPublishTx(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		payments := s.prefix + "payments"
		_, err := s.DB().ExecContext(ctx, "CREATE TABLE "+payments+" (id VARCHAR(64) NOT NULL PRIMARY KEY)")
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = s.DB().ExecContext(context.Background(), "DROP TABLE "+payments) })
		for _, d := range []hookrelay.Destination{
			{ID: "acct", TenantID: "tenant_1", EventTypes: []string{"lease.*"}},
			{ID: "crm", TenantID: "tenant_1", EventTypes: []string{"lease.payment_recorded"}},
			{ID: "gone", TenantID: "tenant_1", Disabled: true, DisabledReason: "410"},
			{ID: "invoices", TenantID: "tenant_1", EventTypes: []string{"invoice.*"}},
		} {
			d.URL = "https://127.0.0.1/" + d.ID
			require.NoError(t, s.Put(ctx, d))
		}
		mock := clock.NewMock()
		mock.Set(t0)
		client, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: s, Clock: mock})
		require.NoError(t, err)

		recordPayment := func(id string, commit bool) hookrelay.PublishResult {
			t.Helper()
			pp, err := client.PreparePublish(ctx, hookrelay.PublishParams{
				EventID: "evt_" + id, TenantID: "tenant_1", EventType: "lease.payment_recorded",
				Payload: []byte(`{"payment":"` + id + `"}`),
			})
			require.NoError(t, err)
			tx, err := s.DB().BeginTx(ctx, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(ctx, s.q("INSERT INTO "+payments+" (id) VALUES (?)"), id)
			require.NoError(t, err)
			res, err := s.PublishTx(ctx, tx, pp)
			require.NoError(t, err)
			if commit {
				require.NoError(t, tx.Commit())
			} else {
				require.NoError(t, tx.Rollback())
			}
			return res
		}
		countPayments := func(id string) int {
			var n int
			require.NoError(t, s.DB().QueryRowContext(ctx, s.q("SELECT COUNT(*) FROM "+payments+" WHERE id = ?"), id).Scan(&n))
			return n
		}

		t.Run("rollback leaves nothing", func(t *testing.T) {
			res := recordPayment("p1", false)
			assert.Len(t, res.Deliveries, 2)
			assert.Equal(t, 0, countPayments("p1"))
			for _, dest := range []string{"acct", "crm"} {
				_, err := s.Get(ctx, hookrelay.DeliveryID("evt_p1", dest))
				require.ErrorIs(t, err, hookrelay.ErrNotFound)
			}
			assert.Empty(t, claimAll(t, s, t0))
		})

		t.Run("commit makes every delivery claimable", func(t *testing.T) {
			res := recordPayment("p2", true)
			assert.Equal(t, 1, countPayments("p2"))
			require.Len(t, res.Deliveries, 2)
			assert.Equal(t, hookrelay.EnqueueResult{ID: hookrelay.DeliveryID("evt_p2", "acct"), DestinationID: "acct", Created: true}, res.Deliveries[0])
			assert.Equal(t, hookrelay.EnqueueResult{ID: hookrelay.DeliveryID("evt_p2", "crm"), DestinationID: "crm", Created: true}, res.Deliveries[1])
			assert.Equal(t, []hookrelay.SkippedDestination{{ID: "gone", Reason: hookrelay.SkipReasonDisabled, Detail: "410"}}, res.Skipped)
			var claimed []string
			for _, c := range claimAll(t, s, t0) {
				claimed = append(claimed, c.Delivery.DestinationID)
				assert.Equal(t, []byte(`{"payment":"p2"}`), c.Delivery.Payload)
			}
			slices.Sort(claimed)
			assert.Equal(t, []string{"acct", "crm"}, claimed)
		})

		t.Run("publishing again in a new transaction creates nothing", func(t *testing.T) {
			pp, err := client.PreparePublish(ctx, hookrelay.PublishParams{
				EventID: "evt_p2", TenantID: "tenant_1", EventType: "lease.payment_recorded", Payload: []byte(`{"edited":true}`),
			})
			require.NoError(t, err)
			tx, err := s.DB().BeginTx(ctx, nil)
			require.NoError(t, err)
			res, err := s.PublishTx(ctx, tx, pp)
			require.NoError(t, err)
			require.NoError(t, tx.Commit())
			for _, r := range res.Deliveries {
				assert.False(t, r.Created, r.DestinationID)
			}
			d, err := s.Get(ctx, hookrelay.DeliveryID("evt_p2", "acct"))
			require.NoError(t, err)
			assert.Equal(t, []byte(`{"payment":"p2"}`), d.Payload, "the first record is kept")
		})

		t.Run("a nil transaction is refused", func(t *testing.T) {
			_, err := s.PublishTx(ctx, nil, hookrelay.PreparedPublish{})
			require.ErrorContains(t, err, "hooksql: PublishTx: tx is nil")
		})
	})
}

// TestDestinationsStoredBeforeMigration3SubscribeToEveryType upgrades
// tables at schema version 2 that hold a destination: it keeps working and
// receives every event type.
func TestDestinationsStoredBeforeMigration3SubscribeToEveryType(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{}) // the pool (and, for SQLite, the file) to share
		old, err := New(s.db, Options{Dialect: b.dialect, TablePrefix: randomPrefix()})
		require.NoError(t, err)
		t.Cleanup(func() { dropTables(t, old) })
		ms, err := old.migrations()
		require.NoError(t, err)
		ms = slices.DeleteFunc(ms, func(m migration) bool { return m.version > 2 })
		if b.dialect == MySQL {
			require.NoError(t, old.applyMigrations(ctx, old.db, ms))
		} else {
			require.NoError(t, old.inTx(ctx, "migrate to 2", func(q querier) error { return old.applyMigrations(ctx, q, ms) }))
		}
		_, err = old.db.ExecContext(ctx, old.q(`INSERT INTO {dst} (id, tenant_id, url, secrets, headers, policy,
			max_concurrency, timeout_ns, paused, disabled, disabled_reason) VALUES (?,?,?,?,?,?,?,?,?,?,?)`),
			"acct", "tenant_1", "https://acct.example/", "[]", "null", "null", 0, 0, 0, 0, "")
		require.NoError(t, err)

		require.NoError(t, old.Migrate(ctx))
		d, err := old.Destination(ctx, "acct")
		require.NoError(t, err)
		assert.Empty(t, d.EventTypes)
		ds, err := old.DestinationsFor(ctx, hookrelay.DestinationsForParams{TenantID: "tenant_1", EventType: "lease.payment_recorded"})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		assert.Equal(t, "acct", ds[0].ID)
	})
}

// TestDestinationsForUsesTheTenantIndex checks, on SQLite's planner, that a
// tenant's publish reads that tenant's rows through the index rather than
// scanning every destination.
func TestDestinationsForUsesTheTenantIndex(t *testing.T) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "hookrelay.db"), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Migrate(ctx))
	rows, err := s.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+s.q("SELECT "+destinationCols+" FROM {dst} WHERE tenant_id = ?"), "tenant_1")
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	assert.Contains(t, strings.Join(plan, "\n"), fmt.Sprintf("USING INDEX %sdestinations_tenant (tenant_id=?)", s.prefix))
}

func TestPutRefusesAMalformedPatternBeforeWriting(t *testing.T) {
	s := newStore(t, backends[0], Options{})
	err := s.Put(context.Background(), hookrelay.Destination{ID: "acct", URL: "https://u:secret_pw@acct.example/", EventTypes: []string{"lease*"}})
	require.ErrorIs(t, err, hookrelay.ErrInvalidDestination)
	assert.ErrorContains(t, err, `EventTypes[0]`)
	assert.NotContains(t, err.Error(), "secret_pw")
}
