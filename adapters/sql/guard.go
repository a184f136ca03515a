package hooksql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/errtext"
)

var _ hookrelay.DestinationGuard = (*Store)(nil)

// guardCols are read by scanGuard, in this order.
const guardCols = `destination_id, tokens, refilled_at, limited_until, held_until, failures,
	circuit, open_until, probe, failing_since`

func scanGuard(r scanner) (hookrelay.GuardState, error) {
	var (
		g                                                hookrelay.GuardState
		refilled, limited, held, openUntil, failingSince int64
		circuit                                          string
	)
	if err := r.Scan(&g.DestinationID, &g.Tokens, &refilled, &limited, &held, &g.ConsecutiveFailures,
		&circuit, &openUntil, &g.Probe, &failingSince); err != nil {
		return g, err
	}
	g.RefilledAt, g.LimitedUntil, g.HeldUntil = decTime(refilled), decTime(limited), decTime(held)
	g.OpenUntil, g.FailingSince = decTime(openUntil), decTime(failingSince)
	g.Circuit = hookrelay.CircuitState(circuit)
	return g, nil
}

// UpdateGuard implements hookrelay.DestinationGuard: the destination's
// guard row is read under a row lock (SQLite: the write lock) and written
// back in the same transaction, so workers in every process sharing the
// database spend one rate-limit bucket and see one circuit. A destination
// updated for the first time gets its row here.
func (s *Store) UpdateGuard(ctx context.Context, p hookrelay.UpdateGuardParams) (hookrelay.GuardState, error) {
	if err := checkString("DestinationID", p.DestinationID, true); err != nil {
		return hookrelay.GuardState{}, fmt.Errorf("hooksql: update guard: %w", err)
	}
	var out hookrelay.GuardState
	err := s.inTx(ctx, "update guard", func(q querier) error {
		read := s.q("SELECT " + guardCols + " FROM {g} WHERE destination_id = ?" + s.lockSuffix(false))
		g, err := scanGuard(q.QueryRowContext(ctx, read, p.DestinationID))
		if errors.Is(err, sql.ErrNoRows) {
			insert := "INSERT INTO {g} (destination_id, tokens, refilled_at, limited_until, held_until, failures, circuit," +
				" open_until, probe, failing_since, claimable_at) VALUES (?, 0, ?, ?, ?, 0, '', ?, '', ?, ?)"
			switch s.dialect {
			case MySQL:
				insert = strings.Replace(insert, "INSERT INTO", "INSERT IGNORE INTO", 1)
			default:
				insert += " ON CONFLICT (destination_id) DO NOTHING"
			}
			if _, err := q.ExecContext(ctx, s.q(insert), p.DestinationID, zeroTime, zeroTime, zeroTime, zeroTime, zeroTime, zeroTime); err != nil {
				return s.dbErr("update guard "+errtext.Quote(p.DestinationID), err)
			}
			g, err = scanGuard(q.QueryRowContext(ctx, read, p.DestinationID))
		}
		if err != nil {
			return s.dbErr("update guard "+errtext.Quote(p.DestinationID), err)
		}
		g = p.Update(g)
		g.DestinationID = p.DestinationID
		times := make([]any, 0, 6)
		for _, f := range []struct {
			name string
			t    time.Time
		}{{"RefilledAt", g.RefilledAt}, {"LimitedUntil", g.LimitedUntil}, {"HeldUntil", g.HeldUntil},
			{"OpenUntil", g.OpenUntil}, {"FailingSince", g.FailingSince}, {"ClaimableAt", g.ClaimableAt()}} {
			n, err := encTime(f.name, f.t)
			if err != nil {
				return err
			}
			times = append(times, n)
		}
		args := []any{g.Tokens, times[0], times[1], times[2], g.ConsecutiveFailures, string(g.Circuit), times[3],
			cleanText(g.Probe), times[4], times[5], p.DestinationID}
		if _, err := q.ExecContext(ctx, s.q("UPDATE {g} SET tokens = ?, refilled_at = ?, limited_until = ?, held_until = ?,"+
			" failures = ?, circuit = ?, open_until = ?, probe = ?, failing_since = ?, claimable_at = ? WHERE destination_id = ?"), args...); err != nil {
			return s.dbErr("update guard "+errtext.Quote(p.DestinationID), err)
		}
		out = g
		return nil
	})
	if err != nil {
		return hookrelay.GuardState{}, err
	}
	return out, nil
}

// GuardStates implements hookrelay.DestinationGuard. IDs are read
// destinationsByIDChunk at a time (a worker may ask for every destination
// it holds back, more than a statement's parameters), each once; an ID no
// destination can have (checkString) is not looked for.
func (s *Store) GuardStates(ctx context.Context, p hookrelay.GuardStatesParams) ([]hookrelay.GuardState, error) {
	var out []hookrelay.GuardState
	read := func(where string, args []any) error {
		rows, err := s.db.QueryContext(ctx, s.q("SELECT "+guardCols+" FROM {g}"+where), args...)
		if err != nil {
			return s.dbErr("guard states", err)
		}
		defer rows.Close()
		for rows.Next() {
			g, err := scanGuard(rows)
			if err != nil {
				return s.dbErr("guard states", err)
			}
			out = append(out, g)
		}
		if err := rows.Err(); err != nil {
			return s.dbErr("guard states", err)
		}
		return nil
	}
	if len(p.IDs) == 0 {
		if err := read("", nil); err != nil {
			return nil, err
		}
	} else {
		for _, args := range idChunks("DestinationID", p.IDs) {
			if err := read(" WHERE destination_id IN ("+placeholders(len(args))+")", args); err != nil {
				return nil, err
			}
		}
	}
	// Sorted here: database collations need not sort like Go strings.
	slices.SortFunc(out, func(a, b hookrelay.GuardState) int { return strings.Compare(a.DestinationID, b.DestinationID) })
	return out, nil
}
