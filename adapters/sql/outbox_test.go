package hooksql

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/hookrelay/hookrelay"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEnqueueTx shows the outbox pattern: the business write and the
// delivery record commit or roll back together.
func TestEnqueueTx(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		orders := s.prefix + "orders"
		_, err := s.DB().ExecContext(ctx, "CREATE TABLE "+orders+" (id VARCHAR(64) NOT NULL PRIMARY KEY)")
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = s.DB().ExecContext(context.Background(), "DROP TABLE "+orders) })
		require.NoError(t, s.Put(ctx, hookrelay.Destination{ID: "dst_acct", TenantID: "tenant_1", URL: "https://127.0.0.1/hook"}))
		mock := clock.NewMock()
		mock.Set(t0)
		client, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: s, Clock: mock})
		require.NoError(t, err)

		placeOrder := func(id string, commit bool) []bool {
			t.Helper()
			ds, err := client.Prepare(ctx, []hookrelay.EnqueueParams{{
				EventID: "evt_" + id, TenantID: "tenant_1", DestinationID: "dst_acct",
				EventType: "order.placed", Payload: []byte(`{"order":"` + id + `"}`),
			}})
			require.NoError(t, err)
			tx, err := s.DB().BeginTx(ctx, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(ctx, s.q("INSERT INTO "+orders+" (id) VALUES (?)"), id)
			require.NoError(t, err)
			created, err := s.EnqueueTx(ctx, tx, ds)
			require.NoError(t, err)
			if commit {
				require.NoError(t, tx.Commit())
			} else {
				require.NoError(t, tx.Rollback())
			}
			return created
		}
		countOrders := func(id string) int {
			var n int
			require.NoError(t, s.DB().QueryRowContext(ctx, s.q("SELECT COUNT(*) FROM "+orders+" WHERE id = ?"), id).Scan(&n))
			return n
		}

		t.Run("rollback leaves nothing", func(t *testing.T) {
			assert.Equal(t, []bool{true}, placeOrder("o1", false))
			assert.Equal(t, 0, countOrders("o1"))
			_, err := s.Get(ctx, hookrelay.DeliveryID("evt_o1", "dst_acct"))
			require.ErrorIs(t, err, hookrelay.ErrNotFound)
			assert.Empty(t, claimAll(t, s, t0.Add(time.Hour)))
		})

		t.Run("commit makes it claimable", func(t *testing.T) {
			assert.Equal(t, []bool{true}, placeOrder("o2", true))
			assert.Equal(t, 1, countOrders("o2"))
			cs := claimAll(t, s, t0)
			require.Len(t, cs, 1)
			assert.Equal(t, hookrelay.DeliveryID("evt_o2", "dst_acct"), cs[0].Delivery.ID)
			assert.Equal(t, []byte(`{"order":"o2"}`), cs[0].Delivery.Payload)
		})

		t.Run("a repeated enqueue is a no-op", func(t *testing.T) {
			ds, err := client.Prepare(ctx, []hookrelay.EnqueueParams{{
				EventID: "evt_o2", TenantID: "tenant_1", DestinationID: "dst_acct", EventType: "order.placed",
			}})
			require.NoError(t, err)
			tx, err := s.DB().BeginTx(ctx, nil)
			require.NoError(t, err)
			created, err := s.EnqueueTx(ctx, tx, ds)
			require.NoError(t, err)
			require.NoError(t, tx.Commit())
			assert.Equal(t, []bool{false}, created)
			d, err := s.Get(ctx, ds[0].ID)
			require.NoError(t, err)
			assert.Equal(t, []byte(`{"order":"o2"}`), d.Payload, "the first record is kept")
		})

		t.Run("invalid input is refused before anything is written", func(t *testing.T) {
			tx, err := s.DB().BeginTx(ctx, nil)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			_, err = s.EnqueueTx(ctx, tx, []hookrelay.Delivery{{ID: ""}})
			require.ErrorIs(t, err, hookrelay.ErrInvalidDelivery)
			_, err = s.EnqueueTx(ctx, (*sql.Tx)(nil), nil)
			require.Error(t, err)
		})

		t.Run("a finished transaction is refused as such", func(t *testing.T) {
			ds, err := client.Prepare(ctx, []hookrelay.EnqueueParams{{
				EventID: "evt_late", TenantID: "tenant_1", DestinationID: "dst_acct", EventType: "order.placed",
			}})
			require.NoError(t, err)
			for name, finish := range map[string]func(*sql.Tx) error{"committed": (*sql.Tx).Commit, "rolled back": (*sql.Tx).Rollback} {
				tx, err := s.DB().BeginTx(ctx, nil)
				require.NoError(t, err)
				require.NoError(t, finish(tx))
				_, err = s.EnqueueTx(ctx, tx, ds)
				require.ErrorIs(t, err, sql.ErrTxDone, name)
				assert.ErrorContains(t, err, "hooksql: EnqueueTx: tx is already committed or rolled back", name)
				assert.NotErrorIs(t, err, ErrDatabase, "%s: the caller's mistake, not a database failure", name)
				_, err = s.PublishTx(ctx, tx, hookrelay.PreparedPublish{Deliveries: ds})
				require.ErrorIs(t, err, sql.ErrTxDone, name)
				assert.ErrorContains(t, err, "hooksql: PublishTx: tx is already committed or rolled back", "%s: the entry point the caller called", name)
				assert.NotContains(t, err.Error(), "EnqueueTx", "%s: PublishTx's error names PublishTx", name)
				assert.NotErrorIs(t, err, ErrDatabase, "%s: the caller's mistake, not a database failure", name)
			}
			_, err = s.Get(ctx, ds[0].ID)
			require.ErrorIs(t, err, hookrelay.ErrNotFound)
		})
	})
}
