package hooksql

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/errtext"
)

var (
	_ hookrelay.DeadLetterLedger   = (*Store)(nil)
	_ hookrelay.RedriveAuditLog    = (*Store)(nil)
	_ hookrelay.DestinationPauser  = (*Store)(nil)
	_ hookrelay.DestinationEnabler = (*Store)(nil)
	_ hookrelay.DestinationLister  = (*Store)(nil)
	_ hookrelay.RedriveAuditLister = (*Store)(nil)
)

// idOrder makes ID comparisons and ordering bytewise on every dialect
// (PostgreSQL would otherwise use the database's collation), so cursors
// page the same way everywhere.
func (s *Store) idOrder() string {
	if s.dialect == Postgres {
		return `id COLLATE "C"`
	}
	return "id"
}

// deadWhere renders f as a WHERE clause over dead rows.
func (s *Store) deadWhere(f hookrelay.DeadLetterFilter) (string, []any, error) {
	var b strings.Builder
	b.WriteString(" WHERE state = 'dead'")
	var args []any
	in := func(col string, vs []string) {
		if len(vs) == 0 {
			return
		}
		b.WriteString(" AND " + col + " IN (" + placeholders(len(vs)) + ")")
		for _, v := range vs {
			args = append(args, v)
		}
	}
	in("tenant_id", f.TenantIDs)
	in("destination_id", f.DestinationIDs)
	in("event_type", f.EventTypes)
	in("last_reason", f.Reasons)
	if !f.DeadSince.IsZero() {
		t, err := encTime("DeadSince", f.DeadSince)
		if err != nil {
			return "", nil, err
		}
		b.WriteString(" AND updated_at >= ?")
		args = append(args, t)
	}
	if !f.DeadBefore.IsZero() {
		t, err := encTime("DeadBefore", f.DeadBefore)
		if err != nil {
			return "", nil, err
		}
		b.WriteString(" AND updated_at < ?")
		args = append(args, t)
	}
	return b.String(), args, nil
}

// ListDead implements hookrelay.DeadLetterLedger with keyset paging on
// (updated_at, id); for a dead row updated_at is its dead-letter time.
func (s *Store) ListDead(ctx context.Context, p hookrelay.ListDeadParams) (hookrelay.ListDeadPage, error) {
	limit := max(p.Limit, 1)
	where, args, err := s.deadWhere(p.Filter)
	if err != nil {
		return hookrelay.ListDeadPage{}, err
	}
	if p.After != nil {
		at, err := encTime("cursor", p.After.DeadAt)
		if err != nil {
			return hookrelay.ListDeadPage{}, err
		}
		where += " AND (updated_at > ? OR (updated_at = ? AND " + s.idOrder() + " > ?))"
		args = append(args, at, at, p.After.ID)
	}
	query := "SELECT " + selectDeliveryCols + " FROM {d}" + where + " ORDER BY updated_at, " + s.idOrder() + " LIMIT ?"
	args = append(args, limit+1)
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return hookrelay.ListDeadPage{}, s.dbErr("list dead", err)
	}
	defer rows.Close()
	var page hookrelay.ListDeadPage
	for rows.Next() {
		d, _, err := scanDelivery(rows)
		var de *DecodeError
		if errors.As(err, &de) {
			return hookrelay.ListDeadPage{}, err
		}
		if err != nil {
			return hookrelay.ListDeadPage{}, s.dbErr("list dead", err)
		}
		page.Deliveries = append(page.Deliveries, d)
	}
	if err := rows.Err(); err != nil {
		return hookrelay.ListDeadPage{}, s.dbErr("list dead", err)
	}
	if len(page.Deliveries) > limit {
		page.Deliveries = page.Deliveries[:limit]
		last := page.Deliveries[limit-1]
		page.Next = &hookrelay.DeadLetterCursor{DeadAt: last.UpdatedAt, ID: last.ID}
	}
	return page, nil
}

// PlanRedrive implements hookrelay.DeadLetterLedger.
func (s *Store) PlanRedrive(ctx context.Context, f hookrelay.DeadLetterFilter) ([]hookrelay.PlanRow, error) {
	where, args, err := s.deadWhere(f)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.q("SELECT tenant_id, destination_id, last_reason, COUNT(*) FROM {d}"+where+
		" GROUP BY tenant_id, destination_id, last_reason"), args...)
	if err != nil {
		return nil, s.dbErr("plan redrive", err)
	}
	defer rows.Close()
	var out []hookrelay.PlanRow
	for rows.Next() {
		var r hookrelay.PlanRow
		if err := rows.Scan(&r.TenantID, &r.DestinationID, &r.Reason, &r.Count); err != nil {
			return nil, s.dbErr("plan redrive", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("plan redrive", err)
	}
	slices.SortFunc(out, func(a, b hookrelay.PlanRow) int {
		return cmp.Or(strings.Compare(a.TenantID, b.TenantID), strings.Compare(a.DestinationID, b.DestinationID), strings.Compare(a.Reason, b.Reason))
	})
	return out, nil
}

// RedriveDelivery implements hookrelay.DeadLetterLedger: the UPDATE only
// matches a row that is still dead, so of two racing redrives one moves it.
// Bumping lease_token fences off a holder that dead-lettered the row but
// never finished its queue transition.
func (s *Store) RedriveDelivery(ctx context.Context, p hookrelay.RedriveDeliveryParams) (hookrelay.Delivery, bool, error) {
	now, err := encTime("Now", p.Now)
	if err != nil {
		return hookrelay.Delivery{}, false, err
	}
	moved := false
	key := lookupID(p.ID)
	err = s.inTx(ctx, "redrive "+errtext.Quote(p.ID), func(q querier) error {
		moved = false
		var state string
		var attempt int
		err := q.QueryRowContext(ctx, s.q("SELECT state, attempt FROM {d} WHERE id = ?"+s.lockSuffix(false)), key).Scan(&state, &attempt)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("hooksql: redrive %s: %w", errtext.Quote(p.ID), hookrelay.ErrNotFound)
		}
		if err != nil {
			return s.dbErr("redrive "+errtext.Quote(p.ID), err)
		}
		if state != string(hookrelay.StateDead) {
			return s.countRedrive(ctx, q, p, now, false)
		}
		var last sql.NullInt64
		if err := q.QueryRowContext(ctx, s.q("SELECT MAX(number) FROM {a} WHERE delivery_id = ?"), key).Scan(&last); err != nil {
			return s.dbErr("redrive "+errtext.Quote(p.ID), err)
		}
		next := max(attempt, int(last.Int64)+1)
		res, err := q.ExecContext(ctx, s.q("UPDATE {d} SET state = 'pending', attempt = ?, budget_start = ?, window_start = ?, next_attempt_at = ?, updated_at = ?,"+
			" lease_token = lease_token + 1, lease_holder = '', lease_expires_at = NULL WHERE id = ? AND state = 'dead'"),
			next, next, now, now, now, key)
		if err != nil {
			return s.dbErr("redrive "+errtext.Quote(p.ID), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return s.dbErr("redrive "+errtext.Quote(p.ID), err)
		}
		moved = n == 1
		if err := s.countRedrive(ctx, q, p, now, moved); err != nil {
			return err
		}
		if moved {
			return s.notifyDue(ctx, q, p.Now)
		}
		return nil
	})
	if err != nil {
		return hookrelay.Delivery{}, false, err
	}
	d, err := s.Get(ctx, p.ID)
	if err != nil {
		return hookrelay.Delivery{}, false, err
	}
	return d, moved, nil
}

// countRedrive adds a RedriveDelivery's outcome to the audit entry it
// names, in the move's transaction; an ID naming no entry changes nothing.
func (s *Store) countRedrive(ctx context.Context, q querier, p hookrelay.RedriveDeliveryParams, now int64, moved bool) error {
	if p.AuditID == "" {
		return nil
	}
	redriven, skipped := 0, 1
	if moved {
		redriven, skipped = 1, 0
	}
	if _, err := q.ExecContext(ctx, s.q("UPDATE {r} SET redriven = redriven + ?, skipped = skipped + ?, last_delivery_id = ?, updated_at = ? WHERE id = ?"),
		redriven, skipped, p.ID, now, lookupID(p.AuditID)); err != nil {
		return s.dbErr("redrive "+errtext.Quote(p.ID)+": count in audit "+errtext.Quote(p.AuditID), err)
	}
	return nil
}

const auditCols = "id, created_at, actor, tenant_id, selection, delivery_count, state, updated_at, reason, tenants, snapshot_at," +
	" rate_per_second, batch_size, redriven, skipped, stop_requested, stop_requested_by, last_delivery_id, error, resumed_by, redrive_run"

// auditRow encodes an audit entry in auditCols order. The selection is the
// filter as JSON; tenant_id holds the tenant of a single-tenant redrive.
func auditRow(a hookrelay.RedriveAudit) ([]any, error) {
	sel, err := json.Marshal(a.Filter)
	if err != nil {
		return nil, fmt.Errorf("hooksql: redrive audit %s: encode selection: %w", a.ID, err)
	}
	tenants, err := json.Marshal(a.Tenants)
	if err != nil {
		return nil, fmt.Errorf("hooksql: redrive audit %s: encode tenants: %w", a.ID, err)
	}
	var times [3]int64
	for i, t := range []struct {
		name string
		t    time.Time
	}{{"CreatedAt", a.CreatedAt}, {"UpdatedAt", a.UpdatedAt}, {"Snapshot", a.Snapshot}} {
		if times[i], err = encTime(t.name, t.t); err != nil {
			return nil, err
		}
	}
	tenant := ""
	if len(a.Tenants) == 1 {
		tenant = a.Tenants[0]
	}
	return []any{
		a.ID, times[0], hookrelay.StorableText(a.Actor), tenant, string(sel), a.Matched, string(a.State), times[1],
		hookrelay.StorableText(a.Reason), string(tenants), times[2], a.RatePerSecond, a.BatchSize, a.Redriven, a.Skipped,
		boolInt(a.StopRequested), hookrelay.StorableText(a.StopRequestedBy), a.LastDeliveryID, hookrelay.StorableText(a.Error), hookrelay.StorableText(a.ResumedBy), a.Run,
	}, nil
}

// scanAudit reads one row of auditCols. A driver failure is returned as
// is, for the caller to translate; an undecodable row is an *AuditDecodeError.
func scanAudit(r scanner) (hookrelay.RedriveAudit, error) {
	var (
		a                          hookrelay.RedriveAudit
		tenant, sel, state, tnts   string
		created, updated, snapshot int64
		stop                       int
	)
	if err := r.Scan(&a.ID, &created, &a.Actor, &tenant, &sel, &a.Matched, &state, &updated, &a.Reason, &tnts, &snapshot,
		&a.RatePerSecond, &a.BatchSize, &a.Redriven, &a.Skipped, &stop, &a.StopRequestedBy, &a.LastDeliveryID, &a.Error, &a.ResumedBy, &a.Run); err != nil {
		return a, err
	}
	if err := json.Unmarshal([]byte(sel), &a.Filter); err != nil {
		return a, &AuditDecodeError{RedriveID: a.ID, Column: "selection", Err: err}
	}
	if err := json.Unmarshal([]byte(tnts), &a.Tenants); err != nil {
		return a, &AuditDecodeError{RedriveID: a.ID, Column: "tenants", Err: err}
	}
	a.State, a.StopRequested = hookrelay.RedriveState(state), stop != 0
	a.CreatedAt, a.UpdatedAt, a.Snapshot = decTime(created), decTime(updated), decTime(snapshot)
	return a, nil
}

// AuditDecodeError reports a stored redrive audit row this library cannot
// read (edited by hand, or corrupted).
type AuditDecodeError struct {
	RedriveID string
	Column    string
	Err       error
}

func (e *AuditDecodeError) Error() string {
	return fmt.Sprintf("hooksql: redrive audit %q: cannot decode column %s: %v", e.RedriveID, e.Column, e.Err)
}

func (e *AuditDecodeError) Unwrap() error { return e.Err }

// CreateRedriveAudit implements hookrelay.RedriveAuditLog.
func (s *Store) CreateRedriveAudit(ctx context.Context, a hookrelay.RedriveAudit) error {
	if err := checkString("ID", a.ID, true); err != nil {
		return err
	}
	row, err := auditRow(a)
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, s.q("INSERT INTO {r} ("+auditCols+") VALUES ("+placeholders(len(row))+")"), row...); err != nil {
		return s.dbErr("create redrive audit "+errtext.Quote(a.ID), err)
	}
	return nil
}

// RedriveAudit implements hookrelay.RedriveAuditLog.
func (s *Store) RedriveAudit(ctx context.Context, id string) (hookrelay.RedriveAudit, error) {
	return s.readAudit(ctx, s.db, id, false)
}

func (s *Store) readAudit(ctx context.Context, q querier, id string, lock bool) (hookrelay.RedriveAudit, error) {
	suffix := ""
	if lock {
		suffix = s.lockSuffix(false)
	}
	a, err := scanAudit(q.QueryRowContext(ctx, s.q("SELECT "+auditCols+" FROM {r} WHERE id = ?"+suffix), lookupID(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return hookrelay.RedriveAudit{}, fmt.Errorf("hooksql: %w: %s", hookrelay.ErrRedriveNotFound, errtext.Quote(id))
	}
	var de *AuditDecodeError
	if err != nil && !errors.As(err, &de) {
		return hookrelay.RedriveAudit{}, s.dbErr("redrive audit "+errtext.Quote(id), err)
	}
	return a, err
}

// ListRedriveAudits implements hookrelay.RedriveAuditLister.
func (s *Store) ListRedriveAudits(ctx context.Context, p hookrelay.ListRedriveAuditsParams) ([]hookrelay.RedriveAudit, error) {
	rows, err := s.db.QueryContext(ctx, s.q("SELECT "+auditCols+" FROM {r} ORDER BY created_at DESC, "+s.idOrder()+" DESC LIMIT ?"), max(p.Limit, 1))
	if err != nil {
		return nil, s.dbErr("list redrive audits", err)
	}
	defer rows.Close()
	var out []hookrelay.RedriveAudit
	for rows.Next() {
		a, err := scanAudit(rows)
		var de *AuditDecodeError
		if errors.As(err, &de) {
			return nil, err
		}
		if err != nil {
			return nil, s.dbErr("list redrive audits", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("list redrive audits", err)
	}
	return out, nil
}

// UpdateRedriveAudit implements hookrelay.RedriveAuditLog: a
// read-modify-write under the row's lock.
func (s *Store) UpdateRedriveAudit(ctx context.Context, u hookrelay.RedriveAuditUpdate) (hookrelay.RedriveAudit, error) {
	var out hookrelay.RedriveAudit
	err := s.inTx(ctx, "update redrive audit "+errtext.Quote(u.ID), func(q querier) error {
		a, err := s.readAudit(ctx, q, u.ID, true)
		if err != nil {
			return err
		}
		u.Apply(&a)
		row, err := auditRow(a)
		if err != nil {
			return err
		}
		cols := strings.Split(auditCols, ", ")
		var set strings.Builder
		for i, c := range cols[1:] {
			if i > 0 {
				set.WriteString(", ")
			}
			set.WriteString(strings.TrimSpace(c) + " = ?")
		}
		if _, err := q.ExecContext(ctx, s.q("UPDATE {r} SET "+set.String()+" WHERE id = ?"), append(row[1:], a.ID)...); err != nil {
			return s.dbErr("update redrive audit "+errtext.Quote(u.ID), err)
		}
		out = a
		return nil
	})
	return out, err
}
