package hookrelay

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DeadLetterFilter selects dead-lettered deliveries. Each list matches any
// of its values; an empty list matches everything. A zero time bound is
// open. The dead-letter time of a dead record is its UpdatedAt.
type DeadLetterFilter struct {
	TenantIDs      []string
	DestinationIDs []string
	EventTypes     []string
	// Reasons are dead-letter reasons (the record's LastReason), e.g.
	// attempts_exhausted or auth_rejected.
	Reasons []string
	// DeadSince selects records dead-lettered at or after it.
	DeadSince time.Time
	// DeadBefore selects records dead-lettered strictly before it.
	DeadBefore time.Time
}

// MaxFilterValues bounds each list of a DeadLetterFilter (TenantIDs,
// DestinationIDs, EventTypes, Reasons). A SQL store passes every value as
// a statement parameter, and the dialects bound those (SQLite at 32,766,
// PostgreSQL at 65,535): a longer list would fail there as a database
// error and work on the memory store.
const MaxFilterValues = 1000

// Validate returns a *ValidationError (wrapping ErrInvalidRequest) naming
// the first list of f, as "Filter.TenantIDs" and so on, that holds more
// than MaxFilterValues values, or the first value, as
// "Filter.TenantIDs[3]", that no record can hold: bytes that are not
// UTF-8, or a NUL byte (PostgreSQL refuses such text as a statement
// parameter, where another store would match nothing); a DeadSince or
// DeadBefore outside the years 1678 to 2262, which SQL stores cannot
// encode; or, as "Filter.DeadSince", a DeadSince at or after DeadBefore
// (both set), a window no record can fall in, refused rather than
// answered with nothing as if nothing had been dead-lettered.
// Client.DeadLetters, Client.PlanRedrive and Client.Redrive call it before
// the store sees the filter.
func (f DeadLetterFilter) Validate() error {
	for _, l := range []struct {
		name string
		vs   []string
	}{{"TenantIDs", f.TenantIDs}, {"DestinationIDs", f.DestinationIDs}, {"EventTypes", f.EventTypes}, {"Reasons", f.Reasons}} {
		if len(l.vs) > MaxFilterValues {
			return invalid(ErrInvalidRequest, "Filter."+l.name, fmt.Sprintf("has %d values, over the %d-value limit", len(l.vs), MaxFilterValues))
		}
		for i, v := range l.vs {
			if problem := unstorableText(v); problem != "" {
				return invalid(ErrInvalidRequest, fmt.Sprintf("Filter.%s[%d]", l.name, i), quote(v)+" "+problem)
			}
		}
	}
	for _, b := range []struct {
		name string
		t    time.Time
	}{{"DeadSince", f.DeadSince}, {"DeadBefore", f.DeadBefore}} {
		if !b.t.IsZero() && (b.t.Before(minStorableTime) || b.t.After(maxStorableTime)) {
			return invalid(ErrInvalidRequest, "Filter."+b.name, b.t.Format(time.RFC3339)+" is outside the storable range (years 1678 to 2262)")
		}
	}
	if !f.DeadSince.IsZero() && !f.DeadBefore.IsZero() && !f.DeadSince.Before(f.DeadBefore) {
		return invalid(ErrInvalidRequest, "Filter.DeadSince", fmt.Sprintf("%s is not before Filter.DeadBefore %s: the window selects nothing",
			f.DeadSince.UTC().Format(time.RFC3339Nano), f.DeadBefore.UTC().Format(time.RFC3339Nano)))
	}
	return nil
}

// Matches reports whether a dead record falls in the selection. Adapters
// that filter in memory use it; SQL adapters express the same rule in SQL.
func (f DeadLetterFilter) Matches(d Delivery) bool {
	in := func(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }
	return d.State == StateDead &&
		in(f.TenantIDs, d.TenantID) && in(f.DestinationIDs, d.DestinationID) &&
		in(f.EventTypes, d.EventType) && in(f.Reasons, d.LastReason) &&
		(f.DeadSince.IsZero() || !d.UpdatedAt.Before(f.DeadSince)) &&
		(f.DeadBefore.IsZero() || d.UpdatedAt.Before(f.DeadBefore))
}

// String describes the selection for audit entries and messages.
func (f DeadLetterFilter) String() string {
	var parts []string
	add := func(name string, vs []string) {
		if len(vs) > 0 {
			parts = append(parts, name+"="+strings.Join(vs, ","))
		}
	}
	add("tenant", f.TenantIDs)
	add("destination", f.DestinationIDs)
	add("event_type", f.EventTypes)
	add("reason", f.Reasons)
	if !f.DeadSince.IsZero() {
		parts = append(parts, "dead_since="+f.DeadSince.UTC().Format(time.RFC3339Nano))
	}
	if !f.DeadBefore.IsZero() {
		parts = append(parts, "dead_before="+f.DeadBefore.UTC().Format(time.RFC3339Nano))
	}
	if len(parts) == 0 {
		return "all dead-lettered deliveries"
	}
	return strings.Join(parts, " ")
}

// DeadLetterCursor is a position in the dead-letter list, which is ordered
// by dead-letter time, then delivery ID. Keyset paging keeps pages stable
// while records are added or redriven: a record is never listed twice.
type DeadLetterCursor struct {
	DeadAt time.Time
	ID     string
}

// After reports whether d comes after the cursor in list order.
func (c DeadLetterCursor) After(d Delivery) bool {
	if cmp := d.UpdatedAt.Compare(c.DeadAt); cmp != 0 {
		return cmp > 0
	}
	return d.ID > c.ID
}

// String encodes the cursor as an opaque token for APIs and the CLI.
func (c DeadLetterCursor) String() string {
	raw := strconv.FormatInt(c.DeadAt.UnixNano(), 10) + "|" + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ParseDeadLetterCursor decodes a token made by DeadLetterCursor.String.
func ParseDeadLetterCursor(s string) (DeadLetterCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		if ns, id, ok := strings.Cut(string(b), "|"); ok {
			// A time or ID no record has (an edited token) is refused, as
			// a store would refuse it differently: PostgreSQL refuses an
			// ID that is not UTF-8, SQL stores a time they cannot encode.
			if n, perr := strconv.ParseInt(ns, 10, 64); perr == nil && n != math.MinInt64 && unstorableText(id) == "" {
				return DeadLetterCursor{DeadAt: time.Unix(0, n), ID: id}, nil
			}
		}
	}
	return DeadLetterCursor{}, invalid(ErrInvalidRequest, "Cursor", fmt.Sprintf("%s is not a dead-letter cursor", quote(s)))
}

// DeliveryDetail is one delivery with its attempt history.
type DeliveryDetail struct {
	Delivery Delivery
	// Attempts are the attempts recorded in full.
	Attempts []Attempt
	// Compacted summarizes the attempts a retention pass replaced by a
	// summary (Config.Retention); nil when none was compacted.
	Compacted *AttemptSummary
}

// Delivery returns the record with the given ID (any state) and its
// attempt history — the attempts kept in full and, when a retention pass
// compacted older ones (a Ledger with HistoryCleaner), their summary, each
// attempt in one of the two even when a cleaner compacts them meanwhile —
// or an error wrapping ErrNotFound.
func (c *Client) Delivery(ctx context.Context, id string) (DeliveryDetail, error) {
	d, err := c.ledger.Get(ctx, id)
	if err != nil {
		return DeliveryDetail{}, opErr("ledger.get", id, err)
	}
	as, err := c.ledger.Attempts(ctx, id)
	if err != nil {
		return DeliveryDetail{}, opErr("ledger.attempts", id, err)
	}
	det := DeliveryDetail{Delivery: d, Attempts: as}
	if hc, ok := As[HistoryCleaner](c.ledger); ok {
		sum, err := hc.AttemptSummary(ctx, id)
		if err != nil {
			return DeliveryDetail{}, opErr("ledger.attempt_summary", id, err)
		}
		if sum.Count > 0 {
			det.Compacted = &sum
			if len(as) > 0 {
				// Read before a cleaner compacted them: read what the
				// summary left.
				if det.Attempts, err = c.ledger.Attempts(ctx, id); err != nil {
					return DeliveryDetail{}, opErr("ledger.attempts", id, err)
				}
			}
		}
	}
	return det, nil
}

// Page sizes of the operator calls: what a zero size means, and the
// most one call takes.
const (
	DefaultDeadLettersLimit   = 100  // Client.DeadLetters
	DefaultRedriveBatchSize   = 100  // Client.Redrive
	DefaultRedriveAuditsLimit = 50   // Client.RedriveAudits
	MaxPageSize               = 1000 // the most any of them takes at once
)

// DeadLettersParams are the inputs of Client.DeadLetters.
type DeadLettersParams struct {
	Filter DeadLetterFilter
	// Limit caps the page size. Defaults to DefaultDeadLettersLimit; at
	// most MaxPageSize.
	Limit int
	// Cursor continues from a previous page's Next; empty starts at the
	// oldest dead-lettered delivery.
	Cursor string
}

// DeadLettersPage is one page of Client.DeadLetters.
type DeadLettersPage struct {
	Deliveries []Delivery
	// Next is the cursor of the following page, empty on the last page.
	Next string
}

// DeadLetters lists dead-lettered deliveries matching params.Filter, oldest
// dead-letter first, one page at a time. It returns ErrUnsupported when the
// Ledger is not a DeadLetterLedger.
func (c *Client) DeadLetters(ctx context.Context, params DeadLettersParams) (DeadLettersPage, error) {
	dl, ok := As[DeadLetterLedger](c.ledger)
	if !ok {
		return DeadLettersPage{}, fmt.Errorf("dead letters: %w (the Ledger is not a DeadLetterLedger)", ErrUnsupported)
	}
	if params.Limit < 0 {
		return DeadLettersPage{}, invalid(ErrInvalidRequest, "Limit", "must not be negative")
	}
	if err := params.Filter.Validate(); err != nil {
		return DeadLettersPage{}, err
	}
	params.Limit = min(cmp.Or(params.Limit, DefaultDeadLettersLimit), MaxPageSize)
	lp := ListDeadParams{Filter: params.Filter, Limit: params.Limit}
	if params.Cursor != "" {
		cur, err := ParseDeadLetterCursor(params.Cursor)
		if err != nil {
			return DeadLettersPage{}, err
		}
		lp.After = &cur
	}
	page, err := dl.ListDead(ctx, lp)
	if err != nil {
		return DeadLettersPage{}, opErr("ledger.list_dead", "", err)
	}
	out := DeadLettersPage{Deliveries: page.Deliveries}
	if page.Next != nil {
		out.Next = page.Next.String()
	}
	return out, nil
}

// RedrivePlan is the dry-run count of a selection: what a redrive of it
// would move now. It changes nothing.
type RedrivePlan struct {
	Filter DeadLetterFilter
	// Rows count the matches by tenant, destination and failure reason.
	Rows []PlanRow
	// Total is the sum of the rows' counts.
	Total int64
	// Tenants lists the tenants the selection spans, sorted. A redrive of
	// more than one needs the Authorizer's permission.
	Tenants []string
}

// OnlyTenants returns the plan counting only the dead letters of tenants:
// its rows of those tenants, their Total and Tenants. Filter is kept.
func (p RedrivePlan) OnlyTenants(tenants []string) RedrivePlan {
	rows := slices.DeleteFunc(slices.Clone(p.Rows), func(r PlanRow) bool { return !slices.Contains(tenants, r.TenantID) })
	return newRedrivePlan(p.Filter, rows)
}

// newRedrivePlan is the plan of filter counting rows: their Total and the
// tenants they span.
func newRedrivePlan(filter DeadLetterFilter, rows []PlanRow) RedrivePlan {
	p := RedrivePlan{Filter: filter, Rows: rows}
	for _, r := range rows {
		p.Total += r.Count
		if r.Count > 0 && !slices.Contains(p.Tenants, r.TenantID) {
			p.Tenants = append(p.Tenants, r.TenantID)
		}
	}
	slices.Sort(p.Tenants)
	return p
}

// PlanRedrive counts the dead-lettered deliveries matching filter, grouped
// by tenant, destination and failure reason, without changing anything.
func (c *Client) PlanRedrive(ctx context.Context, filter DeadLetterFilter) (RedrivePlan, error) {
	dl, ok := As[DeadLetterLedger](c.ledger)
	if !ok {
		return RedrivePlan{}, fmt.Errorf("plan redrive: %w (the Ledger is not a DeadLetterLedger)", ErrUnsupported)
	}
	if err := filter.Validate(); err != nil {
		return RedrivePlan{}, err
	}
	return planRedrive(ctx, dl, filter)
}

// planRedrive is PlanRedrive of a filter already validated. A redrive
// plans its caller's filter narrowed to its snapshot, which may leave a
// window empty (a DeadSince after the snapshot): that plan counts nothing.
func planRedrive(ctx context.Context, dl DeadLetterLedger, filter DeadLetterFilter) (RedrivePlan, error) {
	rows, err := dl.PlanRedrive(ctx, filter)
	if err != nil {
		return RedrivePlan{}, opErr("ledger.plan_redrive", "", err)
	}
	return newRedrivePlan(filter, rows), nil
}
