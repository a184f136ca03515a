package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hookrelay/hookrelay"
)

//go:embed assets
var assets embed.FS

// Action names what an operator asks to do; Config.Authorize decides on
// it.
type Action string

// The actions the console performs. View covers every page.
const (
	ActionView              Action = "view"
	ActionRedrive           Action = "redrive.start"
	ActionStopRedrive       Action = "redrive.stop"
	ActionResumeRedrive     Action = "redrive.resume"
	ActionPauseDestination  Action = "destination.pause"
	ActionResumeDestination Action = "destination.resume"
	ActionEnableDestination Action = "destination.enable"
	// ActionClearDestinationGuard lifts a destination's Retry-After and
	// rate-limit holds and closes its circuit
	// (hookrelay.Client.ClearDestinationGuard).
	ActionClearDestinationGuard Action = "destination.clear_guard"
)

// ActionRequest is what Config.Authorize decides on.
type ActionRequest struct {
	Action Action
	// Actor is what Config.Actor returned for the request.
	Actor string
	// Page names the page for ActionView ("overview", "dead", "delivery",
	// "redrive", "redrives", "redrive_status", "destinations").
	//
	// No page's answer depends on data the operator may not see: the same
	// request by the same operator gets the same status and shows the same
	// rows whether or not other tenants have data.
	//
	// "dead" and "redrive" show a selection, the one in the URL. One that
	// names tenants (Filter.TenantIDs) is asked with Filter and those
	// tenants as Tenants before anything is read, and refused when the
	// hook refuses, whatever is stored. One that names none is never
	// refused: it is asked with the tenants it spans (its plan's) as
	// Tenants and Filter narrowed to them (Filter.TenantIDs holding the
	// same); refused, it is asked once per tenant (both holding that one);
	// the page lists the dead letters, or plans the redrive, of the
	// tenants allowed only, as if the selection named them.
	//
	// "delivery" is asked with DeliveryID, DestinationID and Tenants (the
	// delivery's tenant), "redrive_status" with RedriveID, Filter and
	// Tenants (the redrive's), before anything of it is shown. Refused,
	// they answer exactly as for an ID that does not exist (404, the same
	// page, not the hook's error), so an operator cannot probe IDs for
	// another tenant's records.
	//
	// "overview", "destinations" and "redrives" list rows of several
	// tenants (a destination's row is its tenant's; a redrive's, the
	// tenants it was authorized for, else those its selection names). They
	// are asked first with Tenants: every tenant they show. Allowed, the
	// page shows every row. Refused, they are asked once per tenant
	// (Tenants holding that one) and show only the rows all of whose
	// tenants were allowed: no count, destination or redrive of another
	// tenant. No Tenants means every tenant: a page with a row of unknown
	// tenant (a destination the Destinations port does not know, a
	// redrive of every tenant that matched nothing) is asked so; such a
	// row is shown only to an operator allowed every tenant.
	//
	// A page with nothing to show (a list with no row or none allowed; a
	// "dead" or "redrive" page whose selection names no tenant and spans
	// none, or none allowed) is asked with no Tenants as well, but shown,
	// empty, whatever the answer: it shows nothing of any tenant, and a
	// tenant-scoped hook refuses a request naming none. So a hook that
	// refuses one of these pages by name shows it empty; a refusal would
	// tell the operator that other tenants have rows.
	Page string
	// DestinationID is set for the destination actions and the delivery
	// page.
	DestinationID string
	// DeliveryID is set for the delivery page.
	DeliveryID string
	// RedriveID is set for stop, resume and the redrive_status page.
	RedriveID string
	// Filter is the selection of ActionRedrive, and the recorded selection
	// of the redrive that ActionStopRedrive and ActionResumeRedrive name
	// (and the redrive_status page shows). The client's
	// hookrelay.Authorizer decides on the tenants a started or resumed
	// redrive spans as well. For the dead and redrive pages, the selection
	// they list or plan, narrowed to the tenants asked about when the URL
	// names none (see Page).
	Filter hookrelay.DeadLetterFilter
	// Tenants, for ActionStopRedrive, ActionResumeRedrive and the
	// redrive_status page, are the tenants the redrive was authorized for
	// (its audit's Tenants): the only ones whose deliveries it moves. For
	// the delivery page, the delivery's tenant. For the dead and redrive
	// pages, the tenants the selection names, else those it spans that are
	// asked about (see Page).
	//
	// For ActionRedrive, the tenants the selection names, whatever it
	// spans; refused, the redrive is refused. A selection naming none is
	// asked about as the redrive starts (hookrelay.RedriveParams), with the
	// tenants it spans then and, if refused, once per tenant, Filter
	// narrowed to those asked about; the redrive is narrowed to the
	// tenants allowed (RedriveParams.NarrowTenants) and asked once more
	// with them (none: as a selection matching nothing), before the
	// client's hookrelay.Authorizer. They are the only tenants it moves:
	// a dead letter of another tenant, refused or committed after the
	// start, is not moved, and does not make the redrive refused.
	//
	// For the destination actions, the destination's tenant. For the
	// overview, destinations and redrives pages, the tenants asked about
	// (see Page; none means every tenant).
	Tenants []string
}

// Config configures the console. Client, Stats and Actor are required.
type Config struct {
	// Client is the hookrelay client whose ledger and destinations the
	// console reads and changes. Its Ledger must be a
	// hookrelay.DeadLetterLedger and a hookrelay.RedriveAuditLog (the
	// memory and SQL stores are); the audit-log page also uses
	// hookrelay.RedriveAuditLister, and the destinations page
	// hookrelay.DestinationLister and hookrelay.DestinationEnabler. A page
	// whose ability is missing says so. Its clock is the console's clock.
	Client *hookrelay.Client
	// Stats gives the overview's numbers: pass the same LedgerStats the
	// metrics adapter reads (the store), so page and metrics agree. When it
	// is also a hookrelay.AttemptStats (the memory and SQL stores are), the
	// overview shows how the attempts of the last RecentWindow ended.
	Stats hookrelay.LedgerStats
	// RecentWindow is how far back the overview counts attempt outcomes.
	// Defaults to 15 minutes.
	RecentWindow time.Duration
	// Actor says who the operator behind a request is, from the embedding
	// service's own authentication (a session, a header set by an
	// authenticating proxy). An error, or an empty name, refuses the
	// request with 401 and the error's text. There is no built-in user
	// store.
	Actor func(*http.Request) (string, error)
	// Authorize, if set, is asked before every page and every action; an
	// error refuses it with 403 and the error's text, except where that
	// would tell the operator that a record they may not see exists: a
	// refused delivery or redrive page, and an action on a destination or
	// redrive whose page the operator may not see either, answer 404 as for
	// an ID that does not exist (see ActionRequest.Page). Defaults to allowing
	// every action to any actor Actor accepted. Redrives are in any case
	// decided by the client's hookrelay.Authorizer too (a selection spanning
	// several tenants is refused unless it permits it).
	Authorize func(r *http.Request, req ActionRequest) error
	// Prefix is the path the handler is mounted at (with
	// http.StripPrefix), e.g. "/ops/hookrelay"; links and form actions
	// start with it. Defaults to "" (mounted at the root).
	Prefix string
	// PayloadLimit caps the payload bytes shown on a delivery's page.
	// Defaults to 64 KiB.
	PayloadLimit int
	// PageSize is the number of dead letters per page. Defaults to 50; at
	// most 1000.
	PageSize int
	// DefaultRate is the rate per destination the redrive form proposes.
	// Defaults to 1 per second.
	DefaultRate float64
	// Logger receives errors of redrives started from the page, which
	// finish after the request that started them. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// Random is the source of the CSRF key. Defaults to crypto/rand.Reader.
	Random io.Reader
}

// Handler is the console. It is safe for concurrent use. Redrives started
// from the page run in the handler's own goroutines until they finish or
// Close stops them.
type Handler struct {
	cfg      Config
	mux      *http.ServeMux
	guard    http.Handler
	csrfKey  []byte
	pages    map[string]*template.Template
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	closed   bool
	redrives map[string]bool // IDs of redrives running in this handler
}

// New checks cfg, applies the defaults and returns the console.
func New(cfg Config) (*Handler, error) {
	bad := func(field, problem string) error {
		return fmt.Errorf("console: Config.%s %s", field, problem)
	}
	switch {
	case cfg.Client == nil:
		return nil, bad("Client", "is required")
	case cfg.Stats == nil:
		return nil, bad("Stats", "is required (the store's hookrelay.LedgerStats)")
	case cfg.Actor == nil:
		return nil, bad("Actor", "is required (who the operator is, from your authentication)")
	case cfg.PayloadLimit < 0:
		return nil, bad("PayloadLimit", "must not be negative")
	case cfg.PageSize < 0:
		return nil, bad("PageSize", "must not be negative")
	case cfg.RecentWindow < 0:
		return nil, bad("RecentWindow", "must not be negative")
	case cfg.DefaultRate < 0:
		return nil, bad("DefaultRate", "must not be negative")
	case cfg.Prefix != "" && (!strings.HasPrefix(cfg.Prefix, "/") || strings.HasSuffix(cfg.Prefix, "/")):
		return nil, bad("Prefix", "must start with / and not end with / (e.g. /ops/hookrelay)")
	}
	if cfg.PayloadLimit == 0 {
		cfg.PayloadLimit = 64 << 10
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 50
	}
	cfg.PageSize = min(cfg.PageSize, 1000)
	if cfg.RecentWindow == 0 {
		cfg.RecentWindow = 15 * time.Minute
	}
	if cfg.DefaultRate == 0 {
		cfg.DefaultRate = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Random == nil {
		cfg.Random = rand.Reader
	}
	h := &Handler{cfg: cfg, redrives: map[string]bool{}}
	h.csrfKey = make([]byte, 32)
	if _, err := io.ReadFull(cfg.Random, h.csrfKey); err != nil {
		return nil, fmt.Errorf("console: draw the CSRF key from Config.Random: %w", err)
	}
	if err := h.parseTemplates(); err != nil {
		return nil, err
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.routes()
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusForbidden, "", errors.New("cross-origin request refused"))
	}))
	h.guard = cop.Handler(h.mux)
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cache-Control", "no-store")
	h.guard.ServeHTTP(w, r)
}

// Close stops the redrives this handler started (each ends stopped, with
// its audit entry saying how far it got, and can be resumed) and waits for
// them until ctx ends. Pages keep working; new redrives are refused.
func (h *Handler) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// csrfToken is the form token of an actor: an HMAC of the actor's name
// under the handler's key, so a token taken from one operator's page is
// worthless to another and to a forged form.
func (h *Handler) csrfToken(actor string) string {
	m := hmac.New(sha256.New, h.csrfKey)
	m.Write([]byte("hookrelay-console-csrf\x00" + actor))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (h *Handler) checkCSRF(r *http.Request, actor string) error {
	got := r.PostFormValue("csrf_token")
	if got == "" || !hmac.Equal([]byte(got), []byte(h.csrfToken(actor))) {
		return errors.New("the form's CSRF token is missing or not this operator's; reload the page and try again")
	}
	return nil
}

// actor runs the Actor hook.
func (h *Handler) actor(r *http.Request) (string, error) {
	a, err := h.cfg.Actor(r)
	if err == nil && a == "" {
		err = errors.New("no operator identity")
	}
	return a, err
}

// authorize runs the Authorize hook.
func (h *Handler) authorize(r *http.Request, req ActionRequest) error {
	if h.cfg.Authorize == nil {
		return nil
	}
	return h.cfg.Authorize(r, req)
}

// startRedrive runs start in a goroutine owned by the handler and returns
// the redrive's ID once its audit entry is written, or the error that
// ended it before that (validation, authorization).
func (h *Handler) startRedrive(start func(ctx context.Context, progress func(hookrelay.RedriveAudit)) (hookrelay.RedriveAudit, error)) (string, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return "", errors.New("the console is shutting down")
	}
	h.wg.Add(1)
	h.mu.Unlock()
	ids := make(chan string, 1)
	errs := make(chan error, 1)
	go func() {
		defer h.wg.Done()
		var once sync.Once
		var id string
		a, err := start(h.ctx, func(a hookrelay.RedriveAudit) {
			once.Do(func() {
				id = a.ID
				h.mu.Lock()
				h.redrives[id] = true
				h.mu.Unlock()
				ids <- a.ID
			})
		})
		if id != "" {
			h.mu.Lock()
			delete(h.redrives, id)
			h.mu.Unlock()
		}
		if err != nil {
			if id == "" {
				errs <- err
				return
			}
			if !errors.Is(err, context.Canceled) || a.State != hookrelay.RedriveStopped {
				h.cfg.Logger.Error("hookrelay console: redrive ended with an error", "redrive_id", a.ID, "state", string(a.State), "err", err)
			}
		}
		if id == "" {
			errs <- errors.New("the redrive ended before it was recorded")
		}
	}()
	select {
	case id := <-ids:
		return id, nil
	case err := <-errs:
		return "", err
	}
}

func (h *Handler) parseTemplates() error {
	funcs := template.FuncMap{
		"path": func(p string) string { return h.cfg.Prefix + p },
		// seg makes an ID one path segment: IDs are free text, and a '/',
		// '?', '#' or '%' in one must not change the link's target.
		"seg":  url.PathEscape,
		"time": fmtTime,
		"age":  fmtAge,
		"rate": func(f float64) string { return trimFloat(f) },
		"join": strings.Join,
		"opArgs": func(csrf, id, op, label string) map[string]string {
			return map[string]string{"CSRF": csrf, "ID": id, "Op": op, "Label": label}
		},
	}
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/partials.html")
	if err != nil {
		return fmt.Errorf("console: parse layout: %w", err)
	}
	names, err := fs.Glob(assets, "assets/page_*.html")
	if err != nil {
		return fmt.Errorf("console: list pages: %w", err)
	}
	h.pages = map[string]*template.Template{}
	for _, n := range names {
		t, err := template.Must(base.Clone()).ParseFS(assets, n)
		if err != nil {
			return fmt.Errorf("console: parse %s: %w", n, err)
		}
		h.pages[strings.TrimSuffix(strings.TrimPrefix(n, "assets/page_"), ".html")] = t
	}
	return nil
}
