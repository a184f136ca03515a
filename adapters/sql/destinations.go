package hooksql

import (
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

// destinationField is checkString for a destination's ID or tenant: the
// same *hookrelay.ValidationError, unwrapping to ErrInvalidDestination
// (a Put refuses a destination, not a delivery).
func destinationField(field, v string, required bool) error {
	if err := checkString(field, v, required); err != nil {
		var ve *hookrelay.ValidationError
		if errors.As(err, &ve) {
			return &hookrelay.ValidationError{Err: hookrelay.ErrInvalidDestination, Field: ve.Field, Problem: ve.Problem}
		}
		return err
	}
	return nil
}

// Put adds or replaces a destination; the next attempt to it sees the
// change. Secrets and headers are stored as JSON in the destinations table
// (protect that table like any credential store); they never appear in
// errors. An ID or TenantID no store can hold (empty ID; over 255 bytes,
// not UTF-8 or with a NUL), a malformed EventTypes pattern
// (hookrelay.ValidateEventTypes), and a bad rate limit, too many secrets,
// a header the sender never sends or a URL, secret or header that is not
// UTF-8 or holds a NUL (hookrelay.Destination.ValidateLimits; stored as
// text, such bytes would change) are refused with a
// *hookrelay.ValidationError naming the field, unwrapping to
// hookrelay.ErrInvalidDestination.
func (s *Store) Put(ctx context.Context, d hookrelay.Destination) error {
	if err := destinationField("ID", d.ID, true); err != nil {
		return fmt.Errorf("hooksql: put destination: %w", err)
	}
	if err := destinationField("TenantID", d.TenantID, false); err != nil {
		return fmt.Errorf("hooksql: put destination %s: %w", errtext.Quote(d.ID), err)
	}
	if d.Policy != nil {
		if err := d.Policy.Validate(); err != nil {
			return fmt.Errorf("hooksql: put destination %s: %w", errtext.Quote(d.ID), err)
		}
	}
	if err := hookrelay.ValidateEventTypes(d.EventTypes); err != nil {
		return fmt.Errorf("hooksql: put destination %s: %w", errtext.Quote(d.ID), err)
	}
	if err := d.ValidateLimits(); err != nil {
		return fmt.Errorf("hooksql: put destination %s: %w", errtext.Quote(d.ID), err)
	}
	secrets, err1 := json.Marshal(d.Secrets)
	headers, err2 := json.Marshal(d.Headers)
	policy, err3 := json.Marshal(d.Policy)
	eventTypes, err4 := json.Marshal(append([]string{}, d.EventTypes...)) // [] rather than null
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		// json.Marshal of strings cannot fail; say which field, never its
		// value.
		return fmt.Errorf("hooksql: put destination %s: cannot encode secrets, headers, policy or event types", errtext.Quote(d.ID))
	}
	return s.inTx(ctx, "put destination", func(q querier) error {
		if _, err := q.ExecContext(ctx, s.q("DELETE FROM {dst} WHERE id = ?"), d.ID); err != nil {
			return s.dbErr("put destination "+errtext.Quote(d.ID), err)
		}
		if _, err := q.ExecContext(ctx, s.q(`INSERT INTO {dst} (id, tenant_id, url, secrets, headers, policy,
			max_concurrency, timeout_ns, paused, disabled, disabled_reason, event_types, max_per_second) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`),
			d.ID, d.TenantID, cleanText(d.URL), string(secrets), string(headers), string(policy),
			d.MaxConcurrency, int64(d.Timeout), boolInt(d.Paused), boolInt(d.Disabled), hookrelay.StorableText(d.DisabledReason),
			string(eventTypes), d.MaxPerSecond); err != nil {
			return s.dbErr("put destination "+errtext.Quote(d.ID), err)
		}
		return nil
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Destination implements hookrelay.Destinations.
func (s *Store) Destination(ctx context.Context, id string) (hookrelay.Destination, error) {
	d, err := scanDestination(s.db.QueryRowContext(ctx, s.q(`SELECT `+destinationCols+` FROM {dst} WHERE id = ?`), lookupID(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return hookrelay.Destination{}, fmt.Errorf("%w: %s", hookrelay.ErrDestinationNotFound, errtext.Quote(id))
	}
	if err != nil {
		return hookrelay.Destination{}, s.destinationErr("destination "+errtext.Quote(id), err)
	}
	return d, nil
}

var _ hookrelay.DestinationBatchReader = (*Store)(nil)

// destinationsByIDChunk bounds the IDs of one DestinationsByID statement,
// under every dialect's parameter limit.
const destinationsByIDChunk = 512

// idChunks returns the distinct IDs of ids that a store can hold
// (checkString(field, …)) as statement arguments, at most
// destinationsByIDChunk to a chunk, each chunk padded to a power of two by
// repeating its last ID: an IN list of them is one of at most ten
// statement texts, whatever the lists, where one per length would have a
// connection prepare (and keep) hundreds.
func idChunks(field string, ids []string) [][]any {
	seen := make(map[string]bool, len(ids))
	var want []string
	for _, id := range ids {
		if !seen[id] && checkString(field, id, true) == nil {
			seen[id] = true
			want = append(want, id)
		}
	}
	var chunks [][]any
	for len(want) > 0 {
		n := min(len(want), destinationsByIDChunk)
		padded := 1
		for padded < n {
			padded *= 2
		}
		args := make([]any, padded)
		for i := range padded {
			args[i] = want[min(i, n-1)]
		}
		chunks = append(chunks, args)
		want = want[n:]
	}
	return chunks
}

// DestinationsByID implements hookrelay.DestinationBatchReader: one
// SELECT … WHERE id IN (…) per 512 IDs. A chunk's placeholders are padded
// to a power of two (repeating its last ID), so the statement texts a
// connection prepares are at most ten, whatever the lists. An ID Put would
// refuse (empty, overlong, not UTF-8, with a NUL) cannot be stored and is
// not looked for. The IDs are matched exactly: the id columns compare
// bytes on every dialect (TEXT on PostgreSQL and SQLite, VARBINARY on
// MySQL).
func (s *Store) DestinationsByID(ctx context.Context, ids []string) ([]hookrelay.Destination, error) {
	if err := ctx.Err(); err != nil { // refused even when there is nothing to read
		return nil, s.dbErr("destinations by ID", err)
	}
	out := []hookrelay.Destination{}
	for _, args := range idChunks("ID", ids) {
		rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+destinationCols+` FROM {dst} WHERE id IN (`+placeholders(len(args))+`)`), args...)
		if err != nil {
			return nil, s.dbErr("destinations by ID", err)
		}
		for rows.Next() {
			d, err := scanDestination(rows)
			if err != nil {
				_ = rows.Close()
				return nil, s.destinationErr("destinations by ID", err)
			}
			out = append(out, d)
		}
		err = rows.Err()
		_ = rows.Close()
		if err != nil {
			return nil, s.dbErr("destinations by ID", err)
		}
	}
	return out, nil
}

// undecodableDestination is a destination row whose JSON columns do not
// decode. The decoder's message could quote a secret: it names the row only.
type undecodableDestination struct{ id string }

func (e *undecodableDestination) Error() string {
	return fmt.Sprintf("hooksql: destination %q: stored secrets, headers, policy or event types are not valid JSON", e.id)
}

// destinationErr translates a scanDestination failure.
func (s *Store) destinationErr(op string, err error) error {
	var bad *undecodableDestination
	if errors.As(err, &bad) {
		return err
	}
	return s.dbErr(op, err)
}

// destinationCols are read by scanDestination, in this order.
const destinationCols = `id, tenant_id, url, secrets, headers, policy, max_concurrency,
	timeout_ns, paused, disabled, disabled_reason, event_types, max_per_second`

// scanDestination reads one row of destinationCols. A driver failure is
// returned as is; a row whose JSON columns do not decode is an
// *undecodableDestination.
func scanDestination(r scanner) (hookrelay.Destination, error) {
	var (
		d                                    hookrelay.Destination
		secrets, headers, policy, eventTypes string
		timeout                              int64
		paused, disabled                     int64
	)
	if err := r.Scan(&d.ID, &d.TenantID, &d.URL, &secrets, &headers, &policy, &d.MaxConcurrency,
		&timeout, &paused, &disabled, &d.DisabledReason, &eventTypes, &d.MaxPerSecond); err != nil {
		return d, err
	}
	if json.Unmarshal([]byte(secrets), &d.Secrets) != nil || json.Unmarshal([]byte(headers), &d.Headers) != nil ||
		json.Unmarshal([]byte(policy), &d.Policy) != nil ||
		// MySQL rows stored before migration 0003 hold '' (every type).
		eventTypes != "" && json.Unmarshal([]byte(eventTypes), &d.EventTypes) != nil {
		return hookrelay.Destination{}, &undecodableDestination{id: d.ID}
	}
	if len(d.EventTypes) == 0 {
		d.EventTypes = nil
	}
	d.Timeout, d.Paused, d.Disabled = time.Duration(timeout), paused != 0, disabled != 0
	return d, nil
}

// Disable implements hookrelay.Destinations. Disabling a disabled
// destination is a no-op and keeps the first reason.
func (s *Store) Disable(ctx context.Context, p hookrelay.DisableParams) error {
	return s.updateDestination(ctx, "disable destination", p.ID,
		"UPDATE {dst} SET disabled = 1, disabled_reason = ? WHERE id = ? AND disabled = 0", hookrelay.StorableText(p.Reason), lookupID(p.ID))
}

// SetPaused pauses or resumes a destination. A paused destination's
// deliveries are not sent and spend no attempts.
func (s *Store) SetPaused(ctx context.Context, id string, paused bool) error {
	if err := s.updateDestination(ctx, "pause destination", id,
		"UPDATE {dst} SET paused = ? WHERE id = ?", boolInt(paused), lookupID(id)); err != nil {
		return err
	}
	if !paused {
		// Its waiting deliveries are claimable again: wake the workers.
		return s.notifyDue(ctx, s.db, time.Time{})
	}
	return nil
}

// Enable implements hookrelay.DestinationEnabler: it clears disabled and
// disabled_reason.
func (s *Store) Enable(ctx context.Context, id string) error {
	return s.updateDestination(ctx, "enable destination", id,
		"UPDATE {dst} SET disabled = 0, disabled_reason = '' WHERE id = ?", lookupID(id))
}

// ListDestinations implements hookrelay.DestinationLister. It reads no URL,
// secret or header column.
func (s *Store) ListDestinations(ctx context.Context) ([]hookrelay.DestinationStatus, error) {
	rows, err := s.db.QueryContext(ctx, s.q("SELECT id, tenant_id, paused, disabled, disabled_reason FROM {dst}"))
	if err != nil {
		return nil, s.dbErr("list destinations", err)
	}
	defer rows.Close()
	var out []hookrelay.DestinationStatus
	for rows.Next() {
		var d hookrelay.DestinationStatus
		var paused, disabled int64
		if err := rows.Scan(&d.ID, &d.TenantID, &paused, &disabled, &d.DisabledReason); err != nil {
			return nil, s.dbErr("list destinations", err)
		}
		d.Paused, d.Disabled = paused != 0, disabled != 0
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("list destinations", err)
	}
	// Sorted here: database collations need not sort like Go strings.
	slices.SortFunc(out, func(a, b hookrelay.DestinationStatus) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// updateDestination runs update; when it changed nothing, the destination
// must exist (MySQL does not count rows left unchanged).
func (s *Store) updateDestination(ctx context.Context, op, id, update string, args ...any) error {
	res, err := s.db.ExecContext(ctx, s.q(update), args...)
	if err != nil {
		return s.dbErr(op+" "+errtext.Quote(id), err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.dbErr(op+" "+errtext.Quote(id), err)
	} else if n > 0 {
		return nil
	}
	var one int
	err = s.db.QueryRowContext(ctx, s.q("SELECT 1 FROM {dst} WHERE id = ?"), lookupID(id)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %s", hookrelay.ErrDestinationNotFound, errtext.Quote(id))
	}
	return s.dbErr(op+" "+errtext.Quote(id), err)
}
