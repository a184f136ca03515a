package hooksql

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// TestClaimThatCannotDeadLetterStrandsNoLease has a claim meet an
// undecodable delivery that it then fails to move to the dead-letter path
// (a trigger refuses the write): the deliveries it did read are either
// returned, leased, or left unleased for the next claim, never leased to a
// claim that reported an error, where they would wait out the lease. On
// PostgreSQL the claim commits before the dead-letter write runs.
func TestClaimThatCannotDeadLetterStrandsNoLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b, Options{})
		ctx := context.Background()
		ds := make([]hookrelay.Delivery, 3)
		for i := range ds {
			ds[i] = newDelivery(fmt.Sprintf("evt_%d", i), "dst_1", t0)
		}
		_, err := s.Create(ctx, ds)
		require.NoError(t, err)
		bad := ds[0].ID
		_, err = s.db.ExecContext(ctx, s.q("UPDATE {d} SET scope = ? WHERE id = ?"), "{not json", bad)
		require.NoError(t, err)
		refuseDeadLetters(t, s)

		claims, err := s.Claim(ctx, hookrelay.ClaimParams{Now: t0, Limit: 10, LeaseFor: time.Hour, Holder: "w"})
		var leased int
		require.NoError(t, s.db.QueryRowContext(ctx, s.q("SELECT COUNT(*) FROM {d} WHERE id <> ? AND lease_expires_at IS NOT NULL"), bad).Scan(&leased))
		if err != nil {
			assert.Zero(t, leased, "a failed claim leaves the deliveries it read unleased (%v)", err)
			return
		}
		assert.Len(t, claims, 2, "the claim returns the decodable deliveries")
		assert.Equal(t, 2, leased)
		var state string
		require.NoError(t, s.db.QueryRowContext(ctx, s.q("SELECT state FROM {d} WHERE id = ?"), bad).Scan(&state))
		assert.Equal(t, "pending", state, "the undecodable delivery waits for a later claim to move it")
	})
}

// refuseDeadLetters makes the database refuse any write that sets a
// delivery of s dead.
func refuseDeadLetters(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	var stmts []string
	switch s.dialect {
	case SQLite:
		stmts = []string{"CREATE TRIGGER {p}refuse_dead BEFORE UPDATE ON {d} WHEN NEW.state = 'dead' BEGIN SELECT RAISE(ABORT, 'dead letters refused'); END"}
	case Postgres:
		stmts = []string{
			"CREATE FUNCTION {p}refuse_dead() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'dead letters refused'; END $$",
			"CREATE TRIGGER {p}refuse_dead BEFORE UPDATE ON {d} FOR EACH ROW WHEN (NEW.state = 'dead') EXECUTE FUNCTION {p}refuse_dead()",
		}
		t.Cleanup(func() {
			_, err := s.db.ExecContext(ctx, "DROP FUNCTION IF EXISTS "+s.prefix+"refuse_dead() CASCADE")
			assert.NoError(t, err)
		})
	case MySQL:
		stmts = []string{"CREATE TRIGGER {p}refuse_dead BEFORE UPDATE ON {d} FOR EACH ROW BEGIN IF NEW.state = 'dead' THEN" +
			" SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'dead letters refused'; END IF; END"}
	}
	for _, stmt := range stmts {
		_, err := s.db.ExecContext(ctx, s.q(strings.ReplaceAll(stmt, "{p}", s.prefix)))
		require.NoError(t, err)
	}
}
