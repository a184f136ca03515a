package hooksql

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

func TestZZScratchYoungWrite(t *testing.T) {
	b := backends[1]
	b.skipUnlessConfigured(t)
	s := newStore(t, b, Options{})
	ctx := context.Background()
	queueSpread(t, s, 3, 3)
	if os.Getenv("ANALYZE") != "" {
		_, err := s.db.ExecContext(ctx, s.q("ANALYZE {d}"))
		require.NoError(t, err)
	}
	o, err := recordRetryOp(hookrelay.RecordRetryParams{ID: "whd_x", Lease: hookrelay.Lease{Token: 1, Holder: "w"}, Now: time.Unix(100, 0),
		NextAttemptAt: time.Unix(200, 0), NextAttempt: 2,
		Attempt: hookrelay.Attempt{Number: 1, StartedAt: time.Unix(99, 0), FinishedAt: time.Unix(100, 0),
			Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 500}})
	require.NoError(t, err)
	query, args := s.fencedQueryPostgres(o)
	n := 0
	query = rePlaceholder(query, &n)
	values := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			values[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case nil:
			values[i] = "NULL"
		default:
			values[i] = fmt.Sprint(v)
		}
	}
	conn, err := s.db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	for _, st := range []string{"SET plan_cache_mode = force_generic_plan", "PREPARE gw AS " + query} {
		_, err := conn.ExecContext(ctx, st)
		require.NoError(t, err, st)
	}
	explain := func() string {
		rows, err := conn.QueryContext(ctx, "EXPLAIN EXECUTE gw("+strings.Join(values, ", ")+")")
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var l string
			require.NoError(t, rows.Scan(&l))
			out = append(out, l)
		}
		return strings.Join(out, "\n")
	}
	explain()
	queueSpread(t, s, 3000, 10)
	t.Log("grown:\n" + explain())
}

func rePlaceholder(q string, n *int) string { return q }
