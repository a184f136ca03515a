package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/internal/redact"
	"github.com/hookrelay/hookrelay/internal/filterlist"
)

func (h *Handler) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets/static") // a constant path in the embedded tree
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /{$}", h.scopedView("overview", h.overview))
	m.HandleFunc("GET /dead", h.scopedView("dead", h.deadLetters))
	m.HandleFunc("GET /deliveries/{id}", h.scopedView("delivery", h.delivery))
	m.HandleFunc("GET /redrive", h.scopedView("redrive", h.redrivePlan))
	m.HandleFunc("GET /redrives", h.scopedView("redrives", h.redriveList))
	m.HandleFunc("GET /redrives/{id}", h.scopedView("redrive_status", h.redriveStatus))
	m.HandleFunc("GET /destinations", h.scopedView("destinations", h.destinations))
	m.HandleFunc("POST /redrive", h.change(h.redriveStart))
	m.HandleFunc("POST /redrives/{id}/stop", h.change(h.redriveStop))
	m.HandleFunc("POST /redrives/{id}/resume", h.change(h.redriveResume))
	m.HandleFunc("POST /destinations/{id}/{op}", h.change(h.destinationChange))
	h.mux = m
}

// page is what every template gets.
type page struct {
	Title  string
	Nav    string
	Actor  string
	CSRF   string
	Now    time.Time
	Notice string
	Data   any
	// Refresh, when positive, reloads the page after that many seconds
	// (a running redrive's progress) without JavaScript.
	Refresh int
	// ask, on every page (scopedView), asks
	// Config.Authorize about what the page is about to show; the page
	// shows nothing before it answers nil.
	ask func(ActionRequest) error
	// nothing, on every page, asks Config.Authorize about a page that has
	// nothing to show (no row, no dead letter, a selection naming no
	// tenant that matches nothing): the page is shown, empty, whatever
	// the answer, for it shows nothing of any tenant.
	nothing func(ActionRequest)
}

// askRows asks Config.Authorize about a page listing rows of several
// tenants; tenantsOf[i] are row i's tenants (none: not known). It asks
// first with every tenant the page shows (Tenants: their union, sorted; no
// Tenants, meaning every tenant, when a row's tenant is not known). If
// that is refused it asks once per tenant, and show(i) says whether row i
// is shown: only when all its tenants are allowed, so no row of a refused
// or unknown tenant is. The page is never refused: when no row is
// allowed, or there is none, it is asked with no Tenants (page.nothing)
// and shown empty whatever the answer, so that an operator cannot tell
// from the answer whether other tenants have rows.
func askRows(p *page, tenantsOf [][]string) (show func(i int) bool) {
	none := func(int) bool { return false }
	if len(tenantsOf) == 0 {
		p.nothing(ActionRequest{})
		return none
	}
	var all []string
	known := true
	for _, ts := range tenantsOf {
		known = known && len(ts) > 0
		all = append(all, ts...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	whole := all
	if !known {
		whole = nil
	}
	if p.ask(ActionRequest{Tenants: whole}) == nil {
		return func(int) bool { return true }
	}
	allowed := map[string]bool{}
	for _, t := range all {
		if p.ask(ActionRequest{Tenants: []string{t}}) == nil {
			allowed[t] = true
		}
	}
	if len(allowed) == 0 {
		p.nothing(ActionRequest{})
		return none
	}
	return func(i int) bool {
		for _, t := range tenantsOf[i] {
			if !allowed[t] {
				return false
			}
		}
		return len(tenantsOf[i]) > 0
	}
}

// askSelection asks Config.Authorize about a page of a selection (the
// dead letters it lists, the redrive it plans) and returns the tenants
// whose dead letters it shows; spanned lists the tenants the selection
// spans (its plan's). A selection naming tenants is asked with them as
// Tenants, whatever it matches, and refused if refused. One naming none
// is never refused: it shows the tenants allowedTenants allows of those it
// spans; allowed none, or spanning none, it is a page with nothing to show
// (page.nothing). Either way the answer does not depend on what other
// tenants store.
func askSelection(p *page, sel hookrelay.DeadLetterFilter, spanned []string) ([]string, error) {
	if len(sel.TenantIDs) > 0 {
		tenants := slices.Compact(slices.Sorted(slices.Values(sel.TenantIDs)))
		if err := p.ask(ActionRequest{Filter: sel, Tenants: tenants}); err != nil {
			return nil, err
		}
		return tenants, nil
	}
	allowed := allowedTenants(sel, spanned, p.ask)
	if len(allowed) == 0 {
		p.nothing(ActionRequest{Filter: sel})
	}
	return allowed, nil
}

// allowedTenants asks about a selection naming no tenant that spans the
// tenants spanned: first with all of them, then, if refused, once per
// tenant, each time with Filter narrowed to the tenants asked about
// (Filter.TenantIDs as Tenants). It returns those allowed, sorted.
func allowedTenants(sel hookrelay.DeadLetterFilter, spanned []string, ask func(ActionRequest) error) []string {
	spanned = slices.Compact(slices.Sorted(slices.Values(spanned)))
	if len(spanned) == 0 {
		return nil
	}
	if ask(ActionRequest{Filter: narrowed(sel, spanned), Tenants: spanned}) == nil {
		return spanned
	}
	var allowed []string
	for _, t := range spanned {
		if ask(ActionRequest{Filter: narrowed(sel, []string{t}), Tenants: []string{t}}) == nil {
			allowed = append(allowed, t)
		}
	}
	return allowed
}

// narrowed is sel selecting only tenants' dead letters.
func narrowed(sel hookrelay.DeadLetterFilter, tenants []string) hookrelay.DeadLetterFilter {
	sel.TenantIDs = slices.Clone(tenants)
	return sel
}

// rowTenants are the tenants of a destination row: its destination's
// tenant, none when the Destinations port does not know it.
func (r destinationRow) rowTenants() []string {
	if !r.Known {
		return nil
	}
	return []string{r.Status.TenantID}
}

// auditTenants are the tenants of a redrive in a list: those it was
// authorized for, else those its selection names (none: every tenant).
func auditTenants(a hookrelay.RedriveAudit) []string {
	if len(a.Tenants) > 0 {
		return a.Tenants
	}
	return a.Filter.TenantIDs
}

// keep returns the elements of rows whose index show allows, from offset
// on in the indexes askRows was given.
func keep[T any](rows []T, offset int, show func(int) bool) []T {
	var out []T
	for i, r := range rows {
		if show(offset + i) {
			out = append(out, r)
		}
	}
	return out
}

type (
	viewFunc   func(r *http.Request, p *page) (status int, err error)
	changeFunc func(r *http.Request, actor string) (redirect string, status int, err error)
)

// scopedView wraps a GET page: actor, authorization, rendering. Every page
// shows what a selection, one record or a list of several tenants' rows
// holds, so it asks Config.Authorize itself (page.ask, or askRows for a
// list) once it knows which tenants, selection, delivery or redrive it
// shows: an operator scoped to some tenants cannot read another's by
// editing the URL, nor see another's rows in a list.
func (h *Handler) scopedView(name string, f viewFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		actor, err := h.actor(r)
		if err != nil {
			h.fail(w, r, http.StatusUnauthorized, "", err)
			return
		}
		p := &page{Actor: actor, CSRF: h.csrfToken(actor), Now: h.cfg.Client.Clock().Now(), Nav: name, Notice: h.notice(r)}
		allowed := false
		p.ask = func(req ActionRequest) error {
			req.Action, req.Actor, req.Page = ActionView, actor, name
			if err := h.authorize(r, req); err != nil {
				return err
			}
			allowed = true
			return nil
		}
		p.nothing = func(req ActionRequest) {
			req.Action, req.Actor, req.Page = ActionView, actor, name
			_ = h.authorize(r, req) // a refusal has nothing to hide
			allowed = true
		}
		status, err := f(r, p)
		switch {
		case err != nil:
			h.fail(w, r, status, actor, err)
		case !allowed: // a page that never asked shows nothing
			h.fail(w, r, http.StatusInternalServerError, actor, fmt.Errorf("console: page %s did not ask Authorize", name))
		default:
			h.render(w, status, name, p)
		}
	}
}

// change wraps a POST: actor, CSRF token, then the action (which asks
// Authorize itself, knowing its target), then a redirect (303) to a page.
func (h *Handler) change(f changeFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		actor, err := h.actor(r)
		if err != nil {
			h.fail(w, r, http.StatusUnauthorized, "", err)
			return
		}
		if err := h.checkCSRF(r, actor); err != nil {
			h.fail(w, r, http.StatusForbidden, actor, err)
			return
		}
		to, status, err := f(r, actor)
		if err != nil {
			h.fail(w, r, status, actor, err)
			return
		}
		http.Redirect(w, r, h.cfg.Prefix+to, http.StatusSeeOther)
	}
}

func (h *Handler) render(w http.ResponseWriter, status int, name string, p *page) {
	t, ok := h.pages[name]
	if !ok {
		http.Error(w, "console: no template "+name, http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		h.cfg.Logger.Error("hookrelay console: render", "page", name, "err", err)
		http.Error(w, "console: cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away
}

// fail renders the error page. Library errors carry no secret by
// contract; the text is masked again and cut all the same.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, actor string, err error) {
	if status == 0 {
		status = statusOf(err)
	}
	h.render(w, status, "error", &page{
		Title: http.StatusText(status), Actor: actor, Now: h.cfg.Client.Clock().Now(),
		Data: struct {
			Status  int
			Message string
		}{status, redact.Text(err.Error(), 1024)},
	})
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, hookrelay.ErrRedriveRefused):
		return http.StatusForbidden
	case errors.Is(err, hookrelay.ErrNotFound), errors.Is(err, hookrelay.ErrRedriveNotFound), errors.Is(err, hookrelay.ErrDestinationNotFound):
		return http.StatusNotFound
	case errors.Is(err, hookrelay.ErrInvalidRequest), errors.Is(err, hookrelay.ErrInvalidState), errors.Is(err, errBadForm):
		return http.StatusBadRequest
	case errors.Is(err, hookrelay.ErrUnsupported):
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}

var errBadForm = errors.New("invalid form")

func badForm(field, problem string) error {
	return fmt.Errorf("%w: %s %s", errBadForm, field, problem)
}

// --- overview ---

type destinationRow struct {
	hookrelay.DestinationStats
	Status hookrelay.DestinationStatus
	Known  bool // the Destinations port knows it
	// Recent are the outcomes of the attempts of the last RecentWindow.
	Recent []hookrelay.OutcomeCount
}

// guardTag is one fact of a destination's guard state, as the overview
// shows it.
type guardTag struct{ Class, Text string }

// Guard lists the row's guard state (README "Protecting recipients"): an
// open or half-open circuit, failures in a row, a Retry-After hold, a
// rate limit and how long it has been failing. LedgerStats leaves the
// times zero once they have passed.
func (r destinationRow) Guard() []guardTag {
	var out []guardTag
	switch r.Circuit {
	case hookrelay.CircuitOpen:
		out = append(out, guardTag{"bad", "circuit open"})
	case hookrelay.CircuitHalfOpen:
		out = append(out, guardTag{"warn", "circuit half-open (probing)"})
	}
	if r.ConsecutiveFailures > 0 {
		out = append(out, guardTag{"warn", fmt.Sprintf("%d failed in a row", r.ConsecutiveFailures)})
	}
	if !r.HeldUntil.IsZero() {
		out = append(out, guardTag{"warn", "held until " + fmtTime(r.HeldUntil)})
	}
	if !r.RateLimitedUntil.IsZero() {
		out = append(out, guardTag{"", "rate-limited until " + fmtTime(r.RateLimitedUntil)})
	}
	if !r.FailingSince.IsZero() {
		out = append(out, guardTag{"warn", "failing since " + fmtTime(r.FailingSince)})
	}
	return out
}

// Guarded reports whether the row's guard holds or counts anything an
// operator may clear (hookrelay.Client.ClearDestinationGuard): an open or
// half-open circuit, failures in a row, a Retry-After or rate-limit hold.
func (r destinationRow) Guarded() bool {
	return r.Circuit == hookrelay.CircuitOpen || r.Circuit == hookrelay.CircuitHalfOpen || r.ConsecutiveFailures > 0 ||
		!r.HeldUntil.IsZero() || !r.RateLimitedUntil.IsZero()
}

func (h *Handler) destinationRows(ctx context.Context, now time.Time) ([]destinationRow, error) {
	stats, err := h.cfg.Stats.Stats(ctx, hookrelay.StatsParams{Now: now})
	if err != nil {
		return nil, fmt.Errorf("ledger stats: %w", err)
	}
	rows := map[string]*destinationRow{}
	for _, s := range stats {
		rows[s.DestinationID] = &destinationRow{DestinationStats: s}
	}
	statuses, err := h.cfg.Client.Destinations(ctx)
	if err != nil && !errors.Is(err, hookrelay.ErrUnsupported) {
		return nil, err
	}
	for _, st := range statuses {
		r, ok := rows[st.ID]
		if !ok {
			r = &destinationRow{DestinationStats: hookrelay.DestinationStats{DestinationID: st.ID}}
			rows[st.ID] = r
		}
		r.Status, r.Known = st, true
	}
	if errors.Is(err, hookrelay.ErrUnsupported) {
		// No listing: look each destination with work up by ID.
		for id, r := range rows {
			st, err := h.cfg.Client.DestinationStatus(ctx, id)
			if err == nil {
				r.Status, r.Known = st, true
			} else if !errors.Is(err, hookrelay.ErrDestinationNotFound) {
				return nil, err
			}
		}
	}
	if as, ok := h.cfg.Stats.(hookrelay.AttemptStats); ok {
		recent, err := as.RecentOutcomes(ctx, hookrelay.RecentOutcomesParams{Since: now.Add(-h.cfg.RecentWindow)})
		if err != nil {
			return nil, fmt.Errorf("recent outcomes: %w", err)
		}
		for _, c := range recent {
			r, ok := rows[c.DestinationID]
			if !ok {
				r = &destinationRow{DestinationStats: hookrelay.DestinationStats{DestinationID: c.DestinationID}}
				rows[c.DestinationID] = r
			}
			r.Recent = append(r.Recent, c)
		}
	}
	out := make([]destinationRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b destinationRow) int { return strings.Compare(a.DestinationID, b.DestinationID) })
	return out, nil
}

func (h *Handler) overview(r *http.Request, p *page) (int, error) {
	rows, err := h.destinationRows(r.Context(), p.Now)
	if err != nil {
		return http.StatusInternalServerError, err
	}
	audits, err := h.cfg.Client.RedriveAudits(r.Context(), 20)
	if err != nil && !errors.Is(err, hookrelay.ErrUnsupported) {
		return http.StatusInternalServerError, err
	}
	var running []hookrelay.RedriveAudit
	for _, a := range audits {
		if a.State == hookrelay.RedriveRunning {
			running = append(running, a)
		}
	}
	tenants := make([][]string, 0, len(rows)+len(running))
	for _, r := range rows {
		tenants = append(tenants, r.rowTenants())
	}
	for _, a := range running {
		tenants = append(tenants, auditTenants(a))
	}
	show := askRows(p, tenants)
	var views []auditView
	for _, a := range keep(running, len(rows), show) {
		views = append(views, h.auditView(a, p))
	}
	rows = keep(rows, 0, show)
	p.Title = "Overview"
	_, recent := h.cfg.Stats.(hookrelay.AttemptStats)
	p.Data = struct {
		Destinations []destinationRow
		Running      []auditView
		Recent       bool
		Window       time.Duration
	}{rows, views, recent, h.cfg.RecentWindow}
	return http.StatusOK, nil
}

// --- dead letters ---

// filterForm is a DeadLetterFilter as the forms carry it.
type filterForm struct {
	Tenant, Destination, EventType, Reason, Since, Before string
}

// Query is the filter as a URL query, for links.
func (f filterForm) Query() template.URL {
	v := url.Values{}
	for k, s := range map[string]string{"tenant": f.Tenant, "destination": f.Destination, "event_type": f.EventType,
		"reason": f.Reason, "since": f.Since, "before": f.Before} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return template.URL(v.Encode()) //nolint:gosec // built by url.Values.Encode
}

func (f filterForm) Empty() bool { return f == filterForm{} }

func readFilter(get func(string) string, now time.Time) (filterForm, hookrelay.DeadLetterFilter, error) {
	f := filterForm{
		Tenant: strings.TrimSpace(get("tenant")), Destination: strings.TrimSpace(get("destination")),
		EventType: strings.TrimSpace(get("event_type")), Reason: strings.TrimSpace(get("reason")),
		Since: strings.TrimSpace(get("since")), Before: strings.TrimSpace(get("before")),
	}
	// Each field is a comma-separated list, a value holding a comma in
	// double quotes (internal/filterlist, as the CLI's flags).
	var sel hookrelay.DeadLetterFilter
	for _, l := range []struct {
		field, text string
		to          *[]string
	}{{"tenant", f.Tenant, &sel.TenantIDs}, {"destination", f.Destination, &sel.DestinationIDs},
		{"event_type", f.EventType, &sel.EventTypes}, {"reason", f.Reason, &sel.Reasons}} {
		vs, err := filterlist.Split(l.text)
		if err != nil {
			return f, sel, badForm(l.field, err.Error())
		}
		*l.to = vs
	}
	var err error
	if sel.DeadSince, err = parseTime("since", f.Since, now); err != nil {
		return f, sel, err
	}
	if sel.DeadBefore, err = parseTime("before", f.Before, now); err != nil {
		return f, sel, err
	}
	return f, sel, nil
}

// parseTime reads RFC 3339, a datetime-local value (UTC) or a duration
// ago ("24h").
func parseTime(field, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, badForm(field, fmt.Sprintf("%q is not a time (RFC 3339, YYYY-MM-DDTHH:MM in UTC, or a duration ago such as 24h)", cut(s, 40)))
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func (h *Handler) deadLetters(r *http.Request, p *page) (int, error) {
	q := r.URL.Query()
	form, sel, err := readFilter(q.Get, p.Now)
	if err != nil {
		return http.StatusBadRequest, err
	}
	// A selection naming no tenant lists the tenants it spans (its plan's)
	// that the hook allows, and nothing when it allows none: the answer
	// must not say whether other tenants' dead letters match.
	var spanned []string
	if len(sel.TenantIDs) == 0 {
		plan, err := h.cfg.Client.PlanRedrive(r.Context(), sel)
		if err != nil {
			return 0, err
		}
		spanned = plan.Tenants
	}
	tenants, err := askSelection(p, sel, spanned)
	if err != nil {
		return http.StatusForbidden, err
	}
	var res hookrelay.DeadLettersPage
	if len(tenants) > 0 {
		list := sel
		if len(sel.TenantIDs) == 0 && len(tenants) < len(spanned) && len(tenants) <= hookrelay.MaxFilterValues {
			// Over MaxFilterValues the filter would be refused: the
			// selection is listed whole, and filtered below.
			list = narrowed(sel, tenants)
		}
		if res, err = h.cfg.Client.DeadLetters(r.Context(), hookrelay.DeadLettersParams{Filter: list, Limit: h.cfg.PageSize, Cursor: q.Get("cursor")}); err != nil {
			return 0, err
		}
		// A tenant whose first dead letter of the selection came after
		// the plan was not asked about: its rows are not shown.
		res.Deliveries = slices.DeleteFunc(res.Deliveries, func(d hookrelay.Delivery) bool { return !slices.Contains(tenants, d.TenantID) })
	}
	var next template.URL
	if res.Next != "" {
		v, _ := url.ParseQuery(string(form.Query()))
		v.Set("cursor", res.Next)
		next = template.URL(v.Encode()) //nolint:gosec // built by url.Values.Encode
	}
	p.Title = "Dead letters"
	p.Data = struct {
		Filter     filterForm
		Deliveries []hookrelay.Delivery
		Next       template.URL
		Paged      bool
	}{form, res.Deliveries, next, q.Get("cursor") != ""}
	return http.StatusOK, nil
}

// --- one delivery ---

type attemptView struct {
	hookrelay.Attempt
	Detail string
}

// notFound answers a page of one record that does not exist, and one the
// hook refuses, alike (404, the same text): a refusal would tell an
// operator probing IDs that another tenant's record exists.
func notFound(kind, id string) (int, error) {
	return http.StatusNotFound, fmt.Errorf("no %s %q (or not one you may see)", kind, cut(id, 100))
}

func (h *Handler) delivery(r *http.Request, p *page) (int, error) {
	id := r.PathValue("id")
	d, err := h.cfg.Client.Delivery(r.Context(), id)
	if errors.Is(err, hookrelay.ErrNotFound) {
		return notFound("delivery", id)
	}
	if err != nil {
		return 0, err
	}
	if err := p.ask(ActionRequest{DeliveryID: d.Delivery.ID, DestinationID: d.Delivery.DestinationID, Tenants: []string{d.Delivery.TenantID}}); err != nil {
		return notFound("delivery", id)
	}
	as := make([]attemptView, len(d.Attempts))
	for i, a := range d.Attempts {
		as[i] = attemptView{Attempt: a, Detail: redact.Text(a.Detail, 512)}
	}
	payload := d.Delivery.Payload
	shown := payload[:min(len(payload), h.cfg.PayloadLimit)]
	// A cap inside a character of a UTF-8 payload drops that character's
	// first bytes too, so the payload still shows as text.
	if len(shown) < len(payload) && !utf8.Valid(shown) {
		k := len(shown) - 1
		for k > 0 && k > len(shown)-utf8.UTFMax && !utf8.RuneStart(shown[k]) {
			k--
		}
		if r, _ := utf8.DecodeRune(payload[k:]); r != utf8.RuneError && utf8.Valid(shown[:k]) {
			shown = shown[:k]
		}
	}
	text, binary := string(shown), !utf8.Valid(shown)
	if binary {
		text = fmt.Sprintf("% x", shown)
	}
	scope := make([]string, 0, len(d.Delivery.Scope))
	for k, v := range d.Delivery.Scope {
		scope = append(scope, k+"="+v)
	}
	slices.Sort(scope)
	p.Title = "Delivery " + d.Delivery.ID
	p.Data = struct {
		D            hookrelay.Delivery
		Attempts     []attemptView
		Compacted    *hookrelay.AttemptSummary
		Scope        []string
		Payload      string
		PayloadBytes int
		ShownBytes   int
		Binary       bool
		Truncated    bool
	}{d.Delivery, as, d.Compacted, scope, text, len(payload), len(shown), binary, len(shown) < len(payload)}
	return http.StatusOK, nil
}

// --- redrive ---

func (h *Handler) redrivePlan(r *http.Request, p *page) (int, error) {
	form, sel, err := readFilter(r.URL.Query().Get, p.Now)
	if err != nil {
		return http.StatusBadRequest, err
	}
	// The plan is read before the hook is asked, but shown only after,
	// and, for a selection naming no tenant, only the rows of the tenants
	// the hook allows.
	plan, err := h.cfg.Client.PlanRedrive(r.Context(), sel)
	if err != nil {
		return 0, err
	}
	tenants, err := askSelection(p, sel, plan.Tenants)
	if err != nil {
		return http.StatusForbidden, err
	}
	plan = plan.OnlyTenants(tenants)
	p.Title = "Redrive"
	p.Data = struct {
		Filter      filterForm
		Selection   string
		Plan        hookrelay.RedrivePlan
		DefaultRate float64
	}{form, sel.String(), plan, h.cfg.DefaultRate}
	return http.StatusOK, nil
}

func (h *Handler) redriveStart(r *http.Request, actor string) (string, int, error) {
	now := h.cfg.Client.Clock().Now()
	// The form names the dead-letter reason filter "failure" and the
	// operator's reason for the redrive "why".
	_, sel, err := readFilter(func(k string) string {
		if k == "reason" {
			k = "failure"
		}
		return r.PostFormValue(k)
	}, now)
	if err != nil {
		return "", http.StatusBadRequest, err
	}
	reason := strings.TrimSpace(r.PostFormValue("why"))
	if reason == "" {
		return "", http.StatusBadRequest, badForm("why", "is required: say why you redrive, it goes in the audit log")
	}
	rate, err := strconv.ParseFloat(strings.TrimSpace(r.PostFormValue("rate")), 64)
	if err != nil || !(rate > 0 && rate <= hookrelay.MaxRedriveRate) {
		return "", http.StatusBadRequest, badForm("rate", fmt.Sprintf("must be a positive number of deliveries per second per destination, at most %g", hookrelay.MaxRedriveRate))
	}
	// The hook is asked by the redrive itself (RedriveParams.Authorizer),
	// with the plan it counts at its start: a plan counted here, before
	// the start, would let a dead letter of a tenant the hook was never
	// asked about, committed in between, be moved. A selection naming
	// tenants is asked with those, whatever it spans, so the answer does
	// not depend on what is stored. One naming none is first narrowed
	// (RedriveParams.NarrowTenants) to the tenants it spans that the hook
	// allows, then asked with those (none: as a selection matching
	// nothing), so it moves only them and is never refused because of
	// another tenant's dead letters. The hook is asked before the client's
	// Authorizer, and its refusal is shown as it is: the
	// RedriveRefusedError would name the tenants of the selection.
	askRedrive := func(req ActionRequest) error {
		req.Action, req.Actor = ActionRedrive, actor
		return h.authorize(r, req)
	}
	var narrow func(context.Context, []string) []string
	if len(sel.TenantIDs) == 0 {
		narrow = func(_ context.Context, spanned []string) []string {
			return allowedTenants(sel, spanned, askRedrive)
		}
	}
	var refused error
	ask := hookrelay.AuthorizerFunc(func(_ context.Context, req hookrelay.RedriveAuthorization) error {
		filter, tenants := sel, req.Tenants
		switch {
		case len(sel.TenantIDs) > 0:
			tenants = slices.Compact(slices.Sorted(slices.Values(sel.TenantIDs)))
		case len(tenants) > 0:
			filter = narrowed(sel, tenants)
		}
		refused = askRedrive(ActionRequest{Filter: filter, Tenants: tenants})
		return refused
	})
	id, err := h.startRedrive(func(ctx context.Context, progress func(hookrelay.RedriveAudit)) (hookrelay.RedriveAudit, error) {
		return h.cfg.Client.Redrive(ctx, hookrelay.RedriveParams{Filter: sel, Actor: actor, Reason: reason, RatePerSecond: rate,
			Progress: progress, Authorizer: ask, NarrowTenants: narrow})
	})
	if refused != nil {
		return "", http.StatusForbidden, refused
	}
	if err != nil {
		return "", 0, err
	}
	return "/redrives/" + url.PathEscape(id), 0, nil
}

// redriveTarget is the ActionRequest of a stop or resume: the hook is told
// what the named redrive selects and which tenants it spans, so an
// operator cannot reach another tenant's redrive by its ID in the URL.
func (h *Handler) redriveTarget(r *http.Request, action Action, actor, id string) (ActionRequest, int, error) {
	a, err := h.cfg.Client.RedriveStatus(r.Context(), id)
	if errors.Is(err, hookrelay.ErrRedriveNotFound) {
		status, err := notFound("redrive", id)
		return ActionRequest{}, status, err
	}
	if err != nil {
		return ActionRequest{}, 0, err
	}
	return ActionRequest{Action: action, Actor: actor, RedriveID: id, Filter: a.Filter, Tenants: a.Tenants}, 0, nil
}

// refused answers an action the hook refused on a record. An operator who
// may not see the record either is answered as for an ID that does not
// exist (404, notFound's text), so that acting on IDs cannot tell them
// another tenant's record exists; one who may see it (the page of kind
// shows it) is told the hook's answer (403).
func (h *Handler) refused(r *http.Request, req ActionRequest, page, kind, id string, err error) (int, error) {
	req.Action, req.Page = ActionView, page
	if h.authorize(r, req) != nil {
		return notFound(kind, id)
	}
	return http.StatusForbidden, err
}

func (h *Handler) redriveStop(r *http.Request, actor string) (string, int, error) {
	id := r.PathValue("id")
	req, status, err := h.redriveTarget(r, ActionStopRedrive, actor, id)
	if err != nil {
		return "", status, err
	}
	if err := h.authorize(r, req); err != nil {
		status, err := h.refused(r, req, "redrive_status", "redrive", id, err)
		return "", status, err
	}
	if _, err := h.cfg.Client.StopRedrive(r.Context(), id, actor); err != nil {
		return "", 0, err
	}
	return "/redrives/" + url.PathEscape(id) + "?notice=stop", 0, nil
}

func (h *Handler) redriveResume(r *http.Request, actor string) (string, int, error) {
	id := r.PathValue("id")
	req, status, err := h.redriveTarget(r, ActionResumeRedrive, actor, id)
	if err != nil {
		return "", status, err
	}
	if err := h.authorize(r, req); err != nil {
		status, err := h.refused(r, req, "redrive_status", "redrive", id, err)
		return "", status, err
	}
	_, err = h.startRedrive(func(ctx context.Context, progress func(hookrelay.RedriveAudit)) (hookrelay.RedriveAudit, error) {
		return h.cfg.Client.ResumeRedrive(ctx, id, actor, progress)
	})
	if err != nil {
		return "", 0, err
	}
	return "/redrives/" + url.PathEscape(id), 0, nil
}

type auditView struct {
	hookrelay.RedriveAudit
	Selection string
	Progress  hookrelay.RedriveProgress
	Percent   int
	// Here says this handler runs it (so a Close would stop it).
	Here bool
	// CSRF is the page's form token, for the Stop button.
	CSRF string
}

func (h *Handler) auditView(a hookrelay.RedriveAudit, p *page) auditView {
	v := auditView{RedriveAudit: a, Selection: a.Filter.String(), Progress: a.Progress(p.Now), CSRF: p.CSRF}
	if a.Matched > 0 {
		v.Percent = int(100 * v.Progress.Handled / a.Matched)
	}
	h.mu.Lock()
	v.Here = h.redrives[a.ID]
	h.mu.Unlock()
	return v
}

func (h *Handler) redriveList(r *http.Request, p *page) (int, error) {
	audits, err := h.cfg.Client.RedriveAudits(r.Context(), 100)
	if err != nil {
		return 0, err
	}
	tenants := make([][]string, len(audits))
	for i, a := range audits {
		tenants[i] = auditTenants(a)
	}
	show := askRows(p, tenants)
	var vs []auditView
	for _, a := range keep(audits, 0, show) {
		vs = append(vs, h.auditView(a, p))
	}
	p.Title = "Redrive audit log"
	p.Data = vs
	return http.StatusOK, nil
}

func (h *Handler) redriveStatus(r *http.Request, p *page) (int, error) {
	id := r.PathValue("id")
	a, err := h.cfg.Client.RedriveStatus(r.Context(), id)
	if errors.Is(err, hookrelay.ErrRedriveNotFound) {
		return notFound("redrive", id)
	}
	if err != nil {
		return 0, err
	}
	if err := p.ask(ActionRequest{RedriveID: a.ID, Filter: a.Filter, Tenants: a.Tenants}); err != nil {
		return notFound("redrive", id)
	}
	if a.State == hookrelay.RedriveRunning {
		p.Refresh = 2
	}
	p.Title = "Redrive " + a.ID
	p.Nav = "redrives"
	p.Data = h.auditView(a, p)
	return http.StatusOK, nil
}

// --- destinations ---

func (h *Handler) destinations(r *http.Request, p *page) (int, error) {
	rows, err := h.destinationRows(r.Context(), p.Now)
	if err != nil {
		return http.StatusInternalServerError, err
	}
	tenants := make([][]string, len(rows))
	for i, r := range rows {
		tenants[i] = r.rowTenants()
	}
	show := askRows(p, tenants)
	rows = keep(rows, 0, show)
	// A notice names its destination only when the page shows it.
	if dest := r.URL.Query().Get("destination"); p.Notice != "" && !slices.ContainsFunc(rows, func(d destinationRow) bool { return d.DestinationID == dest }) {
		p.Notice = ""
	}
	p.Title = "Destinations"
	p.Data = rows
	return http.StatusOK, nil
}

func (h *Handler) destinationChange(r *http.Request, actor string) (string, int, error) {
	id, op := r.PathValue("id"), r.PathValue("op")
	actions := map[string]Action{"pause": ActionPauseDestination, "resume": ActionResumeDestination, "enable": ActionEnableDestination,
		"clear-guard": ActionClearDestinationGuard}
	action, ok := actions[op]
	if !ok {
		return "", http.StatusNotFound, badForm("operation", fmt.Sprintf("%q is not pause, resume, enable or clear-guard", cut(op, 20)))
	}
	// The hook is told the destination's tenant, so an operator scoped to
	// some tenants cannot change another's destination by its ID.
	st, err := h.cfg.Client.DestinationStatus(r.Context(), id)
	if errors.Is(err, hookrelay.ErrDestinationNotFound) {
		status, err := notFound("destination", id)
		return "", status, err
	}
	if err != nil {
		return "", 0, err
	}
	req := ActionRequest{Action: action, Actor: actor, DestinationID: id, Tenants: []string{st.TenantID}}
	if err := h.authorize(r, req); err != nil {
		status, err := h.refused(r, req, "destinations", "destination", id, err)
		return "", status, err
	}
	switch action {
	case ActionPauseDestination:
		err = h.cfg.Client.PauseDestination(r.Context(), id)
	case ActionResumeDestination:
		err = h.cfg.Client.ResumeDestination(r.Context(), id)
	case ActionEnableDestination:
		err = h.cfg.Client.EnableDestination(r.Context(), id)
	case ActionClearDestinationGuard:
		err = h.cfg.Client.ClearDestinationGuard(r.Context(), id)
	}
	if err != nil {
		return "", 0, err
	}
	h.cfg.Logger.Info("hookrelay console: destination changed", "destination_id", id, "operation", op, "actor", actor)
	return "/destinations?" + url.Values{"notice": {op}, "destination": {id}}.Encode(), 0, nil
}

// notice is the message a redirect after a change asks for. Only known
// notices are shown, naming only a destination that exists, so a crafted
// link cannot put words on the page.
func (h *Handler) notice(r *http.Request) string {
	q := r.URL.Query()
	dest := q.Get("destination")
	switch q.Get("notice") {
	case "pause", "resume", "enable", "clear-guard":
		if _, err := h.cfg.Client.DestinationStatus(r.Context(), dest); err != nil {
			return ""
		}
	}
	switch q.Get("notice") {
	case "stop":
		return "Stop requested: the redrive stops before its next delivery, in whichever process runs it."
	case "pause":
		return "Destination " + dest + " paused: its deliveries wait without spending attempts."
	case "resume":
		return "Destination " + dest + " resumed."
	case "enable":
		return "Destination " + dest + " re-enabled."
	case "clear-guard":
		return "Destination " + dest + " guard cleared: its holds are lifted and its circuit closed; its rate limit still holds."
	}
	return ""
}

// --- formatting ---

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func fmtAge(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

func trimFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
