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

var (
	_ hookrelay.HistoryCleaner      = (*Store)(nil)
	_ hookrelay.UnpublishedRecovery = (*Store)(nil)
)

// CleanHistory implements hookrelay.HistoryCleaner in two short
// transactions: one removes up to Limit delivered (and, with RemoveDead,
// dead) rows with their attempts and summaries, the other compacts the
// attempts of up to Limit delivered rows. When the compaction fails, the
// error comes with the removal's counts. Each picks its rows oldest first
// through an index of finished rows only, locking them with FOR UPDATE
// SKIP LOCKED on PostgreSQL and MySQL, so cleaners in several processes
// take disjoint rows and never wait on a claim or on each other; SQLite's
// single writer serializes them.
func (s *Store) CleanHistory(ctx context.Context, p hookrelay.CleanHistoryParams) (hookrelay.CleanHistoryResult, error) {
	if err := p.Policy.Validate(); err != nil {
		return hookrelay.CleanHistoryResult{}, fmt.Errorf("hooksql: clean history: %w", err)
	}
	if p.Limit <= 0 && !p.DryRun {
		return hookrelay.CleanHistoryResult{}, errors.New("hooksql: clean history: Limit must be positive")
	}
	delivered, err := encCutoff(p.Now, p.Policy.Delivered)
	if err != nil {
		return hookrelay.CleanHistoryResult{}, err
	}
	compact, err := encCutoff(p.Now, p.Policy.AttemptDetails)
	if err != nil {
		return hookrelay.CleanHistoryResult{}, err
	}
	dead, err := encCutoff(p.Now, p.Policy.Dead)
	if err != nil {
		return hookrelay.CleanHistoryResult{}, err
	}
	if p.DryRun {
		return s.countHistory(ctx, p.Policy.RemoveDead, delivered, compact, dead)
	}
	counts := map[hookrelay.HistoryCount]*hookrelay.HistoryCount{}
	count := func(dest string, st hookrelay.State) *hookrelay.HistoryCount {
		k := hookrelay.HistoryCount{DestinationID: dest, State: st}
		if c, ok := counts[k]; ok {
			return c
		}
		counts[k] = &k
		return &k
	}
	var removedCounts []hookrelay.HistoryCount
	var removed, compacted int
	if s.dialect == Postgres {
		removedCounts, removed, err = s.removePostgres(ctx, p, delivered, dead)
	} else {
		removedCounts, removed, err = s.removeInTx(ctx, p, delivered, dead)
	}
	if err != nil {
		return hookrelay.CleanHistoryResult{}, err
	}
	err = s.inTx(ctx, "clean history: compact", func(q querier) error {
		clear(counts)
		victims, err := s.pickFinished(ctx, q, "state = 'delivered' AND history_compacted = 0 AND updated_at <= ? AND updated_at > ?",
			compact, p.Limit, delivered)
		if err != nil {
			return err
		}
		compacted = len(victims)
		for _, v := range victims {
			count(v.dest, v.state).Compacted++
		}
		if err := s.summarize(ctx, q, victims); err != nil {
			return err
		}
		return s.forChunks(ctx, q, victims, "clean history: compact", nil,
			"DELETE FROM {a} WHERE delivery_id IN (%s)",
			"UPDATE {d} SET history_compacted = 1, delivering_attempt = NULL, delivering_started_at = NULL,"+
				" delivering_finished_at = NULL, delivering_status_code = NULL, delivering_detail = NULL WHERE id IN (%s)")
	})
	if err != nil {
		// The removal committed: its records are gone, and only this
		// result can count them.
		return hookrelay.CleanHistoryResult{Counts: mergeCounts(removedCounts), More: removed == p.Limit}, err
	}
	all := append(removedCounts, maps2slice(counts)...)
	return hookrelay.CleanHistoryResult{Counts: mergeCounts(all), More: removed == p.Limit || compacted == p.Limit}, nil
}

// encCutoff encodes now−keep, the time at or before which a record is old
// enough. A cutoff before every storable time (a long retention from an
// early now) is no error: it is the lowest encoded time, which only the
// zero time shares, as nothing stored is older. A now outside the storable
// range is refused, named.
func encCutoff(now time.Time, keep time.Duration) (int64, error) {
	if _, err := encTime("Now", now); err != nil {
		return 0, err
	}
	cutoff := now.Add(-keep)
	if cutoff.Before(minTime) {
		return zeroTime, nil
	}
	return encTime("Now", cutoff)
}

// removeInTx is the removal step on SQLite and MySQL: pick, then delete
// the picked rows' attempts, summaries and records, in one transaction.
func (s *Store) removeInTx(ctx context.Context, p hookrelay.CleanHistoryParams, delivered, dead int64) ([]hookrelay.HistoryCount, int, error) {
	var out []hookrelay.HistoryCount
	removed := 0
	err := s.inTx(ctx, "clean history: remove", func(q querier) error {
		victims, err := s.pickFinished(ctx, q, "state = 'delivered' AND updated_at <= ?", delivered, p.Limit)
		if err != nil {
			return err
		}
		if p.Policy.RemoveDead && len(victims) < p.Limit {
			dv, err := s.pickFinished(ctx, q, "state = 'dead' AND updated_at <= ?", dead, p.Limit-len(victims))
			if err != nil {
				return err
			}
			victims = append(victims, dv...)
		}
		removed, out = len(victims), nil
		for _, v := range victims {
			out = append(out, hookrelay.HistoryCount{DestinationID: v.dest, State: v.state, Removed: 1})
		}
		return s.forChunks(ctx, q, victims, "clean history: remove", nil,
			"DELETE FROM {a} WHERE delivery_id IN (%s)",
			"DELETE FROM {sum} WHERE delivery_id IN (%s)",
			"DELETE FROM {d} WHERE id IN (%s)")
	})
	return out, removed, err
}

// removePostgres is the removal step on PostgreSQL: one statement per
// state picks the rows (SKIP LOCKED) and deletes them with their attempts
// and summaries, in one round trip.
func (s *Store) removePostgres(ctx context.Context, p hookrelay.CleanHistoryParams, delivered, dead int64) ([]hookrelay.HistoryCount, int, error) {
	var out []hookrelay.HistoryCount
	removed := 0
	err := s.inTx(ctx, "clean history: remove", func(q querier) error {
		removed, out = 0, nil
		for _, st := range []struct {
			state  hookrelay.State
			cutoff int64
			on     bool
		}{{hookrelay.StateDelivered, delivered, true}, {hookrelay.StateDead, dead, p.Policy.RemoveDead}} {
			if !st.on || removed == p.Limit {
				continue
			}
			rows, err := q.QueryContext(ctx, s.q(`WITH v AS (SELECT id, destination_id FROM {d} WHERE state = ? AND updated_at <= ?
				ORDER BY updated_at, id LIMIT ? FOR UPDATE SKIP LOCKED),
				da AS (DELETE FROM {a} WHERE delivery_id IN (SELECT id FROM v)),
				ds AS (DELETE FROM {sum} WHERE delivery_id IN (SELECT id FROM v)),
				dd AS (DELETE FROM {d} WHERE id IN (SELECT id FROM v))
				SELECT destination_id, COUNT(*) FROM v GROUP BY destination_id`), string(st.state), st.cutoff, p.Limit-removed)
			if err != nil {
				return s.dbErr("clean history: remove", err)
			}
			for rows.Next() {
				var dest string
				var n int
				if err := rows.Scan(&dest, &n); err != nil {
					rows.Close()
					return s.dbErr("clean history: remove", err)
				}
				out = append(out, hookrelay.HistoryCount{DestinationID: dest, State: st.state, Removed: int64(n)})
				removed += n
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return s.dbErr("clean history: remove", err)
			}
		}
		return nil
	})
	return out, removed, err
}

// finishedRow is a row the cleaner picked.
type finishedRow struct {
	id, dest string
	state    hookrelay.State
}

// pickFinished locks up to limit rows matching where, oldest first. args
// are where's values after the first (the cutoff).
func (s *Store) pickFinished(ctx context.Context, q querier, where string, cutoff int64, limit int, args ...any) ([]finishedRow, error) {
	rows, err := q.QueryContext(ctx, s.q("SELECT id, destination_id, state FROM {d} WHERE "+where+
		" ORDER BY updated_at, id LIMIT ?"+s.lockSuffix(true)), append(append([]any{cutoff}, args...), limit)...)
	if err != nil {
		return nil, s.dbErr("clean history: pick", err)
	}
	defer rows.Close()
	var out []finishedRow
	for rows.Next() {
		var r finishedRow
		var state string
		if err := rows.Scan(&r.id, &r.dest, &state); err != nil {
			return nil, s.dbErr("clean history: pick", err)
		}
		r.state = hookrelay.State(state)
		out = append(out, r)
	}
	return out, s.dbErr("clean history: pick", rows.Err())
}

// forChunks runs each statement (its %s replaced by placeholders) over the
// rows' IDs, after the lead arguments, in chunks that stay under every
// dialect's parameter limit.
func (s *Store) forChunks(ctx context.Context, q querier, rs []finishedRow, op string, lead []any, stmts ...string) error {
	for len(rs) > 0 {
		chunk := rs[:min(len(rs), insertChunkRows)]
		rs = rs[len(chunk):]
		args := slices.Clone(lead)
		for _, r := range chunk {
			args = append(args, r.id)
		}
		for _, st := range stmts {
			if _, err := q.ExecContext(ctx, s.q(fmt.Sprintf(st, placeholders(len(chunk)))), args...); err != nil {
				return s.dbErr(op, err)
			}
		}
	}
	return nil
}

// summarize stores one attempt_summaries row per picked record that has
// attempts, from its attempts rows and the attempt kept in its own row
// (keepsInRow), which is the last.
func (s *Store) summarize(ctx context.Context, q querier, rs []finishedRow) error {
	for len(rs) > 0 {
		chunk := rs[:min(len(rs), insertChunkRows)]
		rs = rs[len(chunk):]
		args := make([]any, 2*len(chunk))
		for i, r := range chunk {
			args[i], args[len(chunk)+i] = r.id, r.id
		}
		in := placeholders(len(chunk))
		rows, err := q.QueryContext(ctx, s.q("SELECT delivery_id, started_at, finished_at, status_code, outcome, reason, 0 AS kept, seq FROM {a}"+
			" WHERE delivery_id IN ("+in+") UNION ALL SELECT id, delivering_started_at, delivering_finished_at, delivering_status_code,"+
			" last_outcome, last_reason, 1, 0 FROM {d} WHERE id IN ("+in+") AND delivering_attempt IS NOT NULL ORDER BY 1, 7, 8"), args...)
		if err != nil {
			return s.dbErr("clean history: compact", err)
		}
		type sum struct {
			id                  string
			n                   int
			first, last, status int64
			outcome, reason     string
		}
		var sums []*sum
		for rows.Next() {
			var (
				id                string
				started, finished int64
				status            int64
				outcome, reason   string
				kept, seq         int64
			)
			if err := rows.Scan(&id, &started, &finished, &status, &outcome, &reason, &kept, &seq); err != nil {
				rows.Close()
				return s.dbErr("clean history: compact", err)
			}
			if len(sums) == 0 || sums[len(sums)-1].id != id {
				sums = append(sums, &sum{id: id, first: started})
			}
			c := sums[len(sums)-1]
			c.n++
			c.first = min(c.first, started)
			c.last, c.status, c.outcome, c.reason = finished, status, outcome, reason
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return s.dbErr("clean history: compact", err)
		}
		if len(sums) == 0 {
			continue
		}
		var b strings.Builder
		b.WriteString("INSERT INTO {sum} (delivery_id, attempts, first_started_at, last_finished_at, last_status_code, last_outcome, last_reason) VALUES ")
		ins := make([]any, 0, 7*len(sums))
		for i, c := range sums {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?,?,?,?,?,?,?)")
			ins = append(ins, c.id, c.n, c.first, c.last, c.status, c.outcome, c.reason)
		}
		if _, err := q.ExecContext(ctx, s.q(b.String()), ins...); err != nil {
			return s.dbErr("clean history: compact", err)
		}
	}
	return nil
}

// countHistory is CleanHistory's dry run: two grouped counts.
func (s *Store) countHistory(ctx context.Context, removeDead bool, delivered, compact, dead int64) (hookrelay.CleanHistoryResult, error) {
	dropDead := 0
	if removeDead {
		dropDead = 1
	}
	var all []hookrelay.HistoryCount
	for _, c := range []struct {
		query string
		args  []any
		set   func(*hookrelay.HistoryCount, int64)
	}{
		{"SELECT destination_id, state, COUNT(*) FROM {d} WHERE (state = 'delivered' AND updated_at <= ?)" +
			" OR (state = 'dead' AND ? = 1 AND updated_at <= ?) GROUP BY destination_id, state",
			[]any{delivered, dropDead, dead}, func(h *hookrelay.HistoryCount, n int64) { h.Removed = n }},
		{"SELECT destination_id, state, COUNT(*) FROM {d} WHERE state = 'delivered' AND history_compacted = 0" +
			" AND updated_at <= ? AND updated_at > ? GROUP BY destination_id, state",
			[]any{compact, delivered}, func(h *hookrelay.HistoryCount, n int64) { h.Compacted = n }},
	} {
		rows, err := s.db.QueryContext(ctx, s.q(c.query), c.args...)
		if err != nil {
			return hookrelay.CleanHistoryResult{}, s.dbErr("clean history: count", err)
		}
		for rows.Next() {
			var h hookrelay.HistoryCount
			var st string
			var n int64
			if err := rows.Scan(&h.DestinationID, &st, &n); err != nil {
				rows.Close()
				return hookrelay.CleanHistoryResult{}, s.dbErr("clean history: count", err)
			}
			h.State = hookrelay.State(st)
			c.set(&h, n)
			all = append(all, h)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return hookrelay.CleanHistoryResult{}, s.dbErr("clean history: count", err)
		}
	}
	return hookrelay.CleanHistoryResult{Counts: mergeCounts(all)}, nil
}

func maps2slice(m map[hookrelay.HistoryCount]*hookrelay.HistoryCount) []hookrelay.HistoryCount {
	out := make([]hookrelay.HistoryCount, 0, len(m))
	for _, c := range m {
		out = append(out, *c)
	}
	return out
}

// mergeCounts adds up counts of the same destination and state and sorts
// them. Sorted here: database collations need not sort like Go strings.
func mergeCounts(cs []hookrelay.HistoryCount) []hookrelay.HistoryCount {
	slices.SortFunc(cs, hookrelay.CompareHistoryCounts)
	var out []hookrelay.HistoryCount
	for _, c := range cs {
		if n := len(out); n > 0 && hookrelay.CompareHistoryCounts(out[n-1], c) == 0 {
			out[n-1].Removed += c.Removed
			out[n-1].Compacted += c.Compacted
			continue
		}
		out = append(out, c)
	}
	return out
}

// AttemptSummary implements hookrelay.HistoryCleaner.
func (s *Store) AttemptSummary(ctx context.Context, id string) (hookrelay.AttemptSummary, error) {
	var (
		sum             hookrelay.AttemptSummary
		first, last     sql.NullInt64
		status, n       sql.NullInt64
		outcome, reason sql.NullString
	)
	err := s.db.QueryRowContext(ctx, s.q(`SELECT s.attempts, s.first_started_at, s.last_finished_at, s.last_status_code, s.last_outcome, s.last_reason
		FROM {d} d LEFT JOIN {sum} s ON s.delivery_id = d.id WHERE d.id = ?`), lookupID(id)).Scan(&n, &first, &last, &status, &outcome, &reason)
	if errors.Is(err, sql.ErrNoRows) {
		return sum, fmt.Errorf("hooksql: attempt summary %s: %w", errtext.Quote(id), hookrelay.ErrNotFound)
	}
	if err != nil {
		return sum, s.dbErr("attempt summary "+errtext.Quote(id), err)
	}
	if !n.Valid {
		return sum, nil
	}
	sum.Count, sum.LastStatusCode = int(n.Int64), int(status.Int64)
	sum.FirstStartedAt, sum.LastFinishedAt = decTime(first.Int64), decTime(last.Int64)
	sum.LastOutcome, sum.LastReason = hookrelay.Outcome(outcome.String), reason.String
	return sum, nil
}

// TakeUnpublished implements hookrelay.UnpublishedRecovery: one
// transaction locks up to Limit idle pending rows (SKIP LOCKED where
// supported, so concurrent callers take disjoint rows), through the
// pending-only claim index, and marks them taken.
func (s *Store) TakeUnpublished(ctx context.Context, p hookrelay.RecoverUnpublishedParams) ([]hookrelay.Delivery, error) {
	if p.Limit <= 0 || p.Grace < 0 {
		return nil, errors.New("hooksql: take unpublished: Limit must be positive and Grace not negative")
	}
	now, err := encTime("Now", p.Now)
	if err != nil {
		return nil, err
	}
	cutoff, err := encTime("Now", p.Now.Add(-p.Grace))
	if err != nil {
		return nil, err
	}
	var out []hookrelay.Delivery
	err = s.inTx(ctx, "take unpublished", func(q querier) error {
		out = out[:0]
		query := "SELECT " + selectDeliveryCols + " FROM {d} WHERE state = 'pending' AND next_attempt_at <= ?" +
			" AND (lease_expires_at IS NULL OR lease_expires_at <= ?) AND (touched_at IS NULL OR touched_at <= ?)"
		args := []any{cutoff, now, cutoff}
		// As in Claim (notInIDs): a worker may hold back more destinations
		// than a statement takes parameters.
		if len(p.SkipDestinations) > 0 {
			cond, skipArgs := s.notInIDs("destination_id", p.SkipDestinations)
			query += cond
			args = append(args, skipArgs...)
		}
		rows, err := q.QueryContext(ctx, s.q(query+" ORDER BY next_attempt_at, {seq} LIMIT ?"+s.lockSuffix(true)), append(args, p.Limit)...)
		if err != nil {
			return s.dbErr("take unpublished", err)
		}
		for rows.Next() {
			d, _, err := scanDelivery(rows)
			var de *DecodeError
			if errors.As(err, &de) {
				continue // a worker that can read it will find it
			}
			if err != nil {
				rows.Close()
				return s.dbErr("take unpublished", err)
			}
			out = append(out, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return s.dbErr("take unpublished", err)
		}
		rs := make([]finishedRow, len(out))
		for i, d := range out {
			rs[i] = finishedRow{id: d.ID}
		}
		return s.forChunks(ctx, q, rs, "take unpublished", []any{now}, "UPDATE {d} SET touched_at = ? WHERE id IN (%s)")
	})
	return out, err
}
