package hooksql

import (
	"context"
	"database/sql"
	"slices"

	"github.com/hookrelay/hookrelay"
)

// Stats implements hookrelay.LedgerStats with one grouped query over the
// pending and dead records, and fills the guard fields from the
// destination_guards table (MergeGuardStates). Destinations with neither
// deliveries nor a guard state worth seeing are omitted.
func (s *Store) Stats(ctx context.Context, p hookrelay.StatsParams) ([]hookrelay.DestinationStats, error) {
	now, err := encTime("Now", p.Now)
	if err != nil {
		return nil, err
	}
	const eligible = "state = 'pending' AND next_attempt_at <= ? AND (lease_expires_at IS NULL OR lease_expires_at <= ?)"
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT destination_id,
		COUNT(CASE WHEN state = 'pending' THEN 1 END),
		COUNT(CASE WHEN `+eligible+` THEN 1 END),
		MIN(CASE WHEN `+eligible+` THEN next_attempt_at END),
		COUNT(CASE WHEN state = 'dead' THEN 1 END),
		MIN(CASE WHEN state = 'dead' THEN updated_at END)
		FROM {d} WHERE state IN ('pending', 'dead') GROUP BY destination_id`), now, now, now, now)
	if err != nil {
		return nil, s.dbErr("stats", err)
	}
	defer rows.Close()
	var out []hookrelay.DestinationStats
	for rows.Next() {
		var (
			st                    hookrelay.DestinationStats
			oldestDue, oldestDead sql.NullInt64
		)
		if err := rows.Scan(&st.DestinationID, &st.Pending, &st.EligibleNow, &oldestDue, &st.Dead, &oldestDead); err != nil {
			return nil, s.dbErr("stats", err)
		}
		if oldestDue.Valid {
			st.OldestEligibleAge = p.Now.Sub(decTime(oldestDue.Int64))
		}
		if oldestDead.Valid {
			// Never negative: a worker's clock ahead of the caller's can
			// dead-letter after Now.
			st.OldestDeadAge = max(0, p.Now.Sub(decTime(oldestDead.Int64)))
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("stats", err)
	}
	rows.Close()
	gs, err := s.GuardStates(ctx, hookrelay.GuardStatesParams{})
	if err != nil {
		return nil, err
	}
	// Merged and sorted here: database collations need not sort like Go
	// strings.
	return hookrelay.MergeGuardStates(out, gs, p.Now), nil
}

var _ hookrelay.AttemptStats = (*Store)(nil)

// recentOutcomesQuery is RecentOutcomes' statement; its three arguments
// are all Since. Each attempts row since then finds its record's
// destination by key (a subquery, not a join: with few attempts rows, as
// when delivering attempts are kept in their records' rows, a join was
// planned the other way round, reading every record), and the kept
// attempts come from the index of delivered rows.
func (s *Store) recentOutcomesQuery() string {
	return s.q(`SELECT destination_id, kind, reason, COUNT(*) FROM (
		SELECT (SELECT d.destination_id FROM {d} d WHERE d.id = a.delivery_id) AS destination_id, a.kind AS kind, a.reason AS reason
		FROM {a} a WHERE a.finished_at >= ?
		UNION ALL SELECT destination_id, ` + deliveredKind + `, last_reason FROM {d}
		WHERE state = 'delivered' AND updated_at >= ? AND delivering_finished_at >= ?) x
		WHERE destination_id IS NOT NULL GROUP BY destination_id, kind, reason`)
}

// RecentOutcomes implements hookrelay.AttemptStats with one grouped query
// over the attempts finished since params.Since: the attempts rows
// (indexed by finished_at) and the attempts kept in delivered records' rows
// (keepsInRow: each finished no later than its row's updated_at, so the
// index of delivered rows by updated_at finds them all).
func (s *Store) RecentOutcomes(ctx context.Context, p hookrelay.RecentOutcomesParams) ([]hookrelay.OutcomeCount, error) {
	since, err := encTime("Since", p.Since)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.recentOutcomesQuery(), since, since, since)
	if err != nil {
		return nil, s.dbErr("recent outcomes", err)
	}
	defer rows.Close()
	var out []hookrelay.OutcomeCount
	for rows.Next() {
		var c hookrelay.OutcomeCount
		if err := rows.Scan(&c.DestinationID, &c.Kind, &c.Reason, &c.Count); err != nil {
			return nil, s.dbErr("recent outcomes", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("recent outcomes", err)
	}
	slices.SortFunc(out, hookrelay.CompareOutcomeCounts)
	return out, nil
}
